"""The central-model family of ``wevent simulate``: every central mechanism over count histograms."""

from __future__ import annotations

import numpy as np

from ..core.central import CentralMechanism
from ..core.data import load_input
from ..core.ledger import window_sums
from ..core.metrics import COUNT_MRE_FLOOR
from ..core.randomness import DerivedRandomness, SecretKey
from ..core.registry import mechanisms
from ..core.simulation import simulate
from ..core.synthetic import synthetic
from ..stream.wire.records import ReleaseRecord
from ._common import progress
from .simulate_family import Outcome, average_runs
from .simulate_options import given_options

AVERAGED = ("mae", "mre", "mse", "ajsd", "publications", "approximations")  # means over --runs


class CentralFamily:
    """Every registered central mechanism; ``compared`` are Kellaris et al.'s, which ``-m all`` runs."""

    name = "central"
    compared = ("uniform", "sample", "bd", "ba")

    @property
    def mechanisms(self) -> tuple[str, ...]:
        """Kellaris et al.'s four, then the other central mechanisms the registry holds, by name."""
        others = sorted(n for n, cls in mechanisms().items() if cls.model == "central" and n not in self.compared)
        return (*self.compared, *others)

    def add_arguments(self, group) -> None:
        """No settings of its own: its mechanisms' options are their declarations' flags."""

    def counts(self, args):
        if args.input:
            counts, _ = load_input(args.input)
            return counts
        return synthetic(args.dataset, args.users, args.slots, args.seed).counts.astype(float)

    def build(self, mechanism: str, args, domain_size: int, seed: int) -> CentralMechanism:
        cls = mechanisms()[mechanism]
        assert issubclass(cls, CentralMechanism), f"{mechanism} is not a central mechanism"
        randomness = DerivedRandomness(SecretKey.from_seed(seed), args.stream)
        return cls(args.epsilon, args.window, domain_size, randomness=randomness, **given_options(args, cls))

    def run(self, mechanism: str, args):
        """``--runs`` runs on the same counts, with the noise keys of seeds ``seed, seed+1, ...``."""
        counts = self.counts(args)
        floor = args.mre_floor if args.mre_floor is not None else COUNT_MRE_FLOOR
        summaries, records = [], []
        for run in range(args.runs):
            m = self.build(mechanism, args, counts.shape[1], args.seed + run)
            result = simulate(m, counts, progress=lambda rows: progress(rows, args.progress, total=len(counts),
                                                                           desc=f"{mechanism} run {run + 1}"))
            summaries.append(result.summary(mre_floor=floor))
            if run == 0 and args.releases:  # built only when written: they cost as much as a central run
                spend = window_sums(np.array([r.budget.total for r in result.results]), m.window)
                records = [ReleaseRecord.from_step(args.stream, m, r, s) for r, s in zip(result.results, spend)]
        return Outcome(average_runs(summaries, AVERAGED, ("max_window_epsilon",)), records)


FAMILY = CentralFamily()
