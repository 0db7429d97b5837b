"""The local-model family of ``wevent simulate``: LBU, LSP, LBD, LBA, LPU, LPD, LPA and the extensions (LDP-IDS).

Every user's value at every slot comes from a synthetic stream (binary LNS/Sin/Log; their "-Con"
versions with ``--task mean``) or a ``.npz`` dump of user values; devices perturb the values of
the users each request asks and the mechanism sees only the reports' sums. In sufficient mode on a
synthetic binary stream, whose ones sit on uniformly random users, devices draw how many asked
users hold 1 instead of reading N values a slot (exact in distribution:
:class:`~wevent.core.local.exchangeable.ExchangeableBinarySlot`). The summary adds the
communication (CFPU, bits per user per slot), the largest per-user window spend and report
count, and with ``--roc`` the event-monitoring ROC curve and its area (LDP-IDS, Section 7.1.4 of the SIGMOD version).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..core.data import ABSENT, UserValues, is_dump, load_dump
from ..core.local import MECHANISMS, MODES, ClippingThreshold, Devices, UserLedger
from ..core.local._base import DEFAULT_BOUND
from ..core.local.device_reports import DEFAULT_BLOCK_SIZE
from ..core.local.exchangeable import ExchangeableBinarySlot
from ..core.local.measures import bits_per_user_per_slot, cfpu, monitoring_events, roc_auc, roc_curve
from ..core.metrics import FREQUENCY_MRE_FLOOR, mae, mre, mse
from ..core.randomness import DerivedRandomness, SecretKey
from ..core.simulation import SimulationRun
from ..core.synthetic import synthetic
from ..core.validation import ParameterError
from ..stream.wire.records import local_release_record
from ._common import UsageError, integer, progress, real, user_count
from .simulate_family import Outcome, average_runs
from .simulate_options import given_options

_CACHED_VALUES = 400_000_000  # bytes of a (slots, users) uint8 matrix kept in memory
ROC_FPR = np.linspace(0.0, 1.0, 21)  # --roc reports the ROC curve's true positive rate at these false positive rates
_AVERAGED = ("mae", "mre", "mse", "cfpu", "bits_per_user_per_slot", "publications", "approximations")


def _model_options(args) -> dict:
    """The synthetic model's parameters the command line sets (LDP-IDS Fig. 6(c)(d) sweeps them)."""
    given = {"lns": ("--lns-std", args.lns_std, "step_std"), "sin": ("--sin-b", args.sin_b, "frequency")}
    for dataset, (flag, value, _) in given.items():
        if value is not None and (args.input or args.dataset != dataset):
            raise UsageError(f"{flag} applies to --dataset {dataset} only")
    if args.dataset not in given:
        return {}
    _, value, option = given[args.dataset]
    return {} if value is None else {option: value}


@functools.lru_cache(maxsize=1)
def _stream_values(dataset: str, users: int, slots: int, seed: int, options: tuple) -> np.ndarray:
    """A synthetic stream's (slots, users) values, kept for the next call in this process, since
    `wevent reproduce` runs every method of one stream in a row in one process."""
    matrix = synthetic(dataset, users, slots, seed, **dict(options)).values()
    matrix.flags.writeable = False
    return matrix


@functools.lru_cache(maxsize=1)
def _standard_normals(dataset: str, users: int, slots: int, seed: int) -> np.ndarray:
    """A "-Con" stream's ``Z`` of every slot, (slots, users), kept for the next call in this process:
    no model parameter changes them, so the cells of one run's stream that sweep sqrt(Q) or b (`wevent
    reproduce`) draw them once."""
    stream = synthetic(dataset, users, 1, seed)
    normals = np.stack([stream.standard_normals_at(t) for t in range(1, slots + 1)])
    normals.flags.writeable = False
    return normals


@functools.lru_cache(maxsize=1)
def _true_means(dataset: str, users: int, slots: int, seed: int, sigma: float, options: tuple) -> np.ndarray:
    """A "-Con" stream's true mean per slot, (slots, 1), kept for the next call in this process like
    :func:`_stream_values`. It is the unclipped mean: clipping into [0, B] biases what devices report
    (LDP-IDS Section 7.2.6 of the SIGMOD version)."""
    p = synthetic(dataset, users, slots, seed, **dict(options)).p
    normals = _standard_normals(dataset, users, slots, seed)
    means = np.array([[(p[t] + sigma * normals[t]).mean()] for t in range(slots)])
    means.flags.writeable = False
    return means


def _selected_bound(args, stream) -> float:
    """The clipping bound in ``[0, --bound]`` a calibration period picks (LDP-IDS Section 6.1.2).

    Every user reports a bucket of their value once, w or more slots before the stream starts, so
    no window holds both a calibration report and a stream report; slot 1's values stand in for
    that period's. The bound is tuned for an estimate from ``N / w`` users, a population-division
    publication of the uniform share.
    """
    calibration = ClippingThreshold(args.epsilon, _mean_bound(args), max(1, args.users // args.window),
                                    buckets=args.bound_buckets)
    return calibration.calibrate(stream.continuous_draws_at(1, args.sigma), np.random.default_rng([args.seed, 3]))


def _mean_bound(args) -> float:
    """The top B of the mean task's values (``--bound``, checked while parsing; else the mechanisms' default)."""
    return DEFAULT_BOUND if args.bound is None else float(args.bound)


@dataclass
class LocalData:
    """What a local simulation needs: every user's value per slot, and what releases estimate."""

    population: int
    truth: np.ndarray  # (T, d): what the releases estimate (frequencies, or the mean)
    # 1-based slot -> every user's value (or answer category), or in sufficient mode an exchangeable slot
    values_at: Callable[[int], np.ndarray | ExchangeableBinarySlot]
    absent: bool = False  # users may have no value: the devices answer with an extra, last category
    bound: float | None = None  # the mean task's clipping bound

    @property
    def domain_size(self) -> int:
        return int(self.truth.shape[1])

    @property
    def slots(self) -> int:
        return int(self.truth.shape[0])


class LocalFamily:
    name = "local"
    mechanisms = tuple(MECHANISMS)

    def add_arguments(self, group) -> None:
        group.add_argument("--task", choices=("frequency", "mean"), default="frequency", help="frequencies of "
                           "categories, or the mean over [0, B] with the Hybrid Mechanism on the -Con streams")
        group.add_argument("--oracle", choices=("ada", "grr", "oue"), default="ada",
                           help="frequency oracle (default: ada, the adaptive choice)")
        group.add_argument("--mode", choices=MODES, default="report", help="draw every report, or sample the "
                           "reports' sufficient statistic (same distribution, faster; on a synthetic binary "
                           "--dataset also how many asked users hold 1) (default: report)")
        group.add_argument("--sigma", type=real(above=0), default=0.1,
                           help="mean task: spread of the -Con values around p_t "
                           "(default: 0.1; the paper prints 10)")
        group.add_argument("--select-bound", action="store_true", help="mean task: clip at the threshold in "
                           "[0, B] a calibration period of reports picks, not at B")
        group.add_argument("--bound-buckets", type=integer(2, 1_000_000), default=100,
                           help="--select-bound: buckets of [0, B], the thresholds it chooses from (default: 100)")
        group.add_argument("--lns-std", type=real(above=0, maximum=1), default=None,
                           help="--dataset lns: sqrt(Q), the walk's step deviation (default: 0.0025)")
        group.add_argument("--sin-b", type=real(above=0, maximum=10), default=None,
                           help="--dataset sin: b, the sine's frequency per slot (default: 0.01)")
        group.add_argument("--block-size", type=user_count, default=DEFAULT_BLOCK_SIZE, help="users per device block "
                           f"(default: {DEFAULT_BLOCK_SIZE})")
        group.add_argument("--roc", action="store_true", help="add the event-monitoring ROC curve "
                           "(true positive rates at 21 false positive rates) and its area to the summary")

    # --- data --------------------------------------------------------------------------------
    def data(self, args) -> LocalData:
        if args.input:
            if args.task == "mean":
                raise UsageError("--task mean runs on the synthetic -Con streams (--dataset), not on --input")
            if not is_dump(args.input):
                raise UsageError("the local model needs every user's values: give a dump "
                                 "(`wevent replay ... --dump`), not a CSV of counts")
            return _dump_data(load_dump(args.input))
        stream = synthetic(args.dataset, args.users, args.slots, args.seed, **_model_options(args))
        if args.select_bound and args.task != "mean":
            raise UsageError("--select-bound chooses the clipping bound of --task mean")
        if args.task == "mean":
            bound = _selected_bound(args, stream) if args.select_bound else _mean_bound(args)
            normals = _standard_normals(args.dataset, args.users, args.slots, args.seed)
            # stream.continuous_values_at(t, sigma, bound), from the kept normals
            values = lambda t: np.clip(stream.p[t - 1] + args.sigma * normals[t - 1], 0.0, bound)  # noqa: E731
            truth = _true_means(args.dataset, args.users, args.slots, args.seed, args.sigma,
                                tuple(sorted(_model_options(args).items())))
            return LocalData(stream.users, truth, values, bound=bound)
        truth = stream.counts / stream.users
        if args.mode == "sufficient":  # the reports' statistic needs only how many asked users hold 1
            ones = stream.ones
            return LocalData(stream.users, truth, lambda t: ExchangeableBinarySlot(stream.users, ones[t - 1]))
        if stream.slots * stream.users <= _CACHED_VALUES:  # every mechanism and run reuses the same values
            matrix = _stream_values(args.dataset, args.users, args.slots, args.seed,
                                    tuple(sorted(_model_options(args).items())))
            return LocalData(stream.users, truth, lambda t: matrix[t - 1])
        return LocalData(stream.users, truth, stream.values_at)

    # --- one mechanism -----------------------------------------------------------------------
    def build(self, mechanism: str, args, data: LocalData, run: int):
        seed = args.seed + run
        cls = MECHANISMS[mechanism]
        options = dict(
            given_options(args, cls),
            oracle="hm" if args.task == "mean" else args.oracle,
            bound=data.bound,  # the mean task's (--bound, or the one a calibration selected)
            absent=data.absent,
            randomness=DerivedRandomness(SecretKey.from_seed(seed), args.stream),
            devices=Devices.from_seed(seed, args.stream, block_size=args.block_size, mode=args.mode),
        )
        return cls(args.epsilon, args.window, data.domain_size, data.population, **options)

    def run(self, mechanism: str, args):
        data = self.data(args)
        floor = args.mre_floor if args.mre_floor is not None else FREQUENCY_MRE_FLOOR
        summaries, records = [], []
        for run in range(args.runs):
            m = self.build(mechanism, args, data, run)
            ledger = m.new_ledger()
            results, spends = [], []
            for t in progress(range(1, data.slots + 1), args.progress, total=data.slots, desc=f"{mechanism} run {run + 1}"):
                results.append(m.step(data.values_at(t)))
                spends.append(ledger.record(results[-1])[0])
            summaries.append(self.summary(m, results, data, ledger, floor, args.roc))
            if run == 0 and args.releases:
                records = [local_release_record(args.stream, m, r, s) for r, s in zip(results, spends)]
        return Outcome(_average(summaries), records)

    @staticmethod
    def summary(m, results, data: LocalData, ledger: UserLedger, floor: float, roc: bool) -> dict:
        run = SimulationRun(m, results, data.truth, charged=ledger)  # the run charged it slot by slot
        releases, truth = run.releases, data.truth
        summary = run.summary(mre_floor=floor)
        summary.update(
            domain_size=data.domain_size,
            mae=mae(releases, truth),
            mre=mre(releases, truth, floor),
            mse=mse(releases, truth),
            max_window_epsilon=ledger.max_window_spend,  # per user: the local guarantee (LDP-IDS, Theorem 4.1 of the SIGMOD version)
            max_reports_per_user_in_window=ledger.max_window_reports,
            cfpu=cfpu(results, data.population),
            bits_per_user_per_slot=bits_per_user_per_slot(results, data.population),
            users=data.population,
        )
        if roc:
            summary["roc_fpr"] = ROC_FPR.tolist()
            try:
                labels, scores = monitoring_events(releases, truth)
                summary["roc_auc"] = roc_auc(scores, labels)
                summary["roc_tpr"] = np.interp(ROC_FPR, *roc_curve(scores, labels)).tolist()
            except ParameterError:
                summary["roc_auc"] = summary["roc_tpr"] = None  # the true stream has no event (or only events)
        return summary


def _dump_data(values: UserValues) -> LocalData:
    """A dump's users, as a stream's devices answer: a user without a value in a slot answers with
    the absent category, the last of ``d + 1``, whose estimate no release holds (the papers do not
    say how they handled absent users). Whether or not this dump has holes, so that its releases
    are the stream's; the releases estimate each value's share of all the users."""
    matrix = values.values
    if values.domain_size > np.iinfo(matrix.dtype).max:  # the absent category, d, must fit the values' type
        matrix = matrix.astype(np.int64)
    holes = matrix == ABSENT
    if holes.any():  # a copy only where there is something to replace
        matrix = np.where(holes, values.domain_size, matrix)
    return LocalData(values.users, values.counts() / values.users, lambda t: matrix[t - 1], absent=True)


def _average(summaries: list[dict]) -> dict:
    """Errors and communication averaged over runs; spends and report counts at their maximum."""
    first = average_runs(summaries, _AVERAGED, ("max_window_epsilon", "max_reports_per_user_in_window"))
    if len(summaries) > 1 and "roc_auc" in first:
        aucs = [auc for s in summaries if (auc := s.get("roc_auc")) is not None]
        first["roc_auc"] = float(np.mean(aucs)) if aucs else None
        curves = [s["roc_tpr"] for s in summaries if s.get("roc_tpr") is not None]
        first["roc_tpr"] = np.mean(curves, axis=0).tolist() if curves else None  # vertical averaging
    return first


FAMILY = LocalFamily()
