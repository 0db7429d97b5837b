"""RescueDP: adaptive sampling, adaptive budgets, dynamic grouping and filtering per bin (Wang et al., INFOCOM 2016)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ..base import StepResult, Strategy
from ..control import INTERVAL_OPTIONS, KALMAN_OPTIONS, PID_OPTIONS, KalmanFilter, PIDController, rescue_interval
from ..noise import noise_variance
from ..options import Option
from ..randomness import DerivedRandomness
from ..validation import MIN_EPSILON, ParameterError, check_epsilon, check_positive, check_positive_int
from ._base import CentralMechanism, DecisionOverride

__all__ = ["RescueDP"]


def _floor(value: Fraction) -> float:
    """The largest float not above ``value``: a budget that never rounds up."""
    share = float(value)
    while Fraction(share) > value:
        share = math.nextafter(share, 0.0)
    return share


class RescueDP(CentralMechanism):
    """RescueDP: every bin samples on its own PID-controlled interval, similar bins are sampled together.

    Every bin ``j`` has a sampling interval ``I_j`` (1 at first) and its next sampling slot. At a
    slot where some bins sample, the window has ``eps_rm = epsilon - (budgets of the previous
    w - 1 slots)`` left and bin ``j`` asks for ``min(p_j eps_rm, e_max)`` with
    ``p_j = min(phi ln(I_j + 1), p_max)`` (the adaptive budget allocation); the slot's budget
    ``eps_t`` is the largest ask. With ``dynamic_grouping``, the sampled bins with ``kappa``
    samples and a prediction (the mean of their last ``kappa`` releases) at most ``tau_1`` are
    grouped: in order of prediction, a pivot takes the next bins while their prediction differs
    from its own by less than ``tau_3`` and the group's predictions add up to less than
    ``tau_1``, skipping those whose last ``kappa`` releases correlate with the pivot's by at most
    ``tau_2`` (Pearson). A group publishes the sum of its counts plus noise of budget ``eps_t``,
    divided by its size; other sampled bins publish their own count likewise. Every bin's Kalman
    filter (random walk: ``P += Q`` every slot) corrects its last release with that measurement,
    ``R`` being the measurement's noise variance. From a bin's second sample on, its feedback
    error ``E = |r_t - r_l|`` drives its PID controller,
    ``delta = Kp E + Ki mean(last pi E) + Kd dE / dt``, and its interval becomes
    ``max(1, I + theta (1 - (delta / lambda_r)^2))``, with ``lambda_r = 1 / min(e_max, eps_rm')``
    the noise scale the next slot could afford; its next sample is ``floor(I)`` slots later.
    Unsampled bins repeat their last release.

    There is no dissimilarity: :meth:`measure` (M1) returns None and :meth:`publish` (M2)
    samples, groups, filters and schedules; everything it reads besides the slot's counts is
    public (releases, intervals, covariances, past budgets).

    Parameters
    ----------
    epsilon : float
        The budget of any window of ``window`` consecutive slots, > 0.
    window : int
        ``w``, the window length in slots, >= 1.
    domain_size : int
        ``d``, the bins (regions) of a slot's histogram of counts (sensitivity 1 per user and slot).
    sample_share : float, default 0.2
        ``phi``, the budget share's scale, > 0.
    max_share : float, default 0.6
        ``p_max``, the largest share of the remaining budget a sample takes, in (0, 1].
    max_budget : float, optional
        ``e_max``, the largest budget of a sample; ``epsilon / 5`` if omitted.
    kp, ki, kd : float, default 0.9, 0.1, 0.0
        The PID controller's proportional gain; the PID controller's integral gain; the PID
        controller's derivative gain (every bin has its controller).
    integral_window : int, default 3
        ``pi``, the feedback errors the integral term averages.
    interval_gain : float, default 10.0
        ``theta``, the interval's gain.
    dynamic_grouping : bool, default True
        Group similar sampled bins (RescueDP); False samples every bin alone (the one-dimensional
        form run per bin).
    group_limit : float, default 30.0
        ``tau_1``: a bin predicted above it is sampled alone, and a group's predictions add up to
        less than it.
    min_correlation : float, default 0.5
        ``tau_2``: bins join a pivot only when their releases correlate with its by more.
    max_difference : float, default 25.0
        ``tau_3``: bins join a pivot only when their prediction differs from its by less.
    history : int, default 3
        ``kappa``, the releases a prediction and a correlation look back on, >= 2.
    process_noise : float, default 1e5
        ``Q``, the Kalman filter's process noise per slot (every bin's), >= 0.
    initial_covariance : float, default 100.0
        ``P0``, the Kalman filter's initial covariance (every bin's), > 0.
    randomness : DerivedRandomness, optional
        Where every draw comes from (a fresh random key if omitted).
    clamp_round : bool, default False
        Round fresh releases to non-negative integers (post-processing, no budget).
    noise : {"discrete", "laplace"}, default "discrete"
        Exact two-sided geometric noise on integer queries, or the paper's ``Lap(1/eps)``.
    decision_override : callable, optional
        ``slot -> bool | None``: True samples every bin, False none, where not None.

    Spend
    -----
    ``eps_t <= p_max eps_rm`` at a slot where bins sample, 0 elsewhere: the budgets of any ``w``
    consecutive slots add up to at most ``epsilon`` (:attr:`window_spend_bound`). Bins and
    groups are disjoint and a user is in one bin per slot, so a slot's samples together cost
    ``eps_t`` once.

    Notes
    -----
    RescueDP keeps a budget window per region. A user who is in one region at one slot and in
    another at the next would pay for the samples of both, so here the window is the stream's:
    a slot costs the largest budget any bin takes at it, every bin's ask is a share of what the
    stream's window has left, and every bin sampled at a slot takes the slot's budget, which
    costs nothing more. Where the paper leaves room: the first sample of every bin is at slot 1
    and does not move its interval; a bin whose ask is 0 (nothing left in the window) retries
    at the next slot; a bin joins a group only after ``kappa`` samples of its own (a correlation
    needs them); a group's measurement noise is its noise variance over its size squared. The
    defaults of ``phi``, ``p_max``, the gains, ``pi``, ``theta``, the ``tau`` and ``kappa`` are
    the paper's as the benchmark of Schäler et al. uses them, ``e_max = epsilon / 5`` is the
    benchmark's reading of the paper's cap, and ``Q``, ``P0`` are FAST's (the benchmark takes
    ``Q`` from the stream's own variance, which would read the data without privacy).

    Examples
    --------
    >>> from wevent.core.randomness import SecretKey, DerivedRandomness
    >>> m = RescueDP(1.0, 10, 3, randomness=DerivedRandomness(SecretKey.from_seed(1)))
    >>> first = m.step([40, 50, 60])
    >>> first.strategy.value, round(first.eps2, 6) == round(0.2 * math.log(2), 6), m.next_sample.tolist()
    ('publish', True, [2, 2, 2])

    References
    ----------
    Q. Wang, Y. Zhang, X. Lu, Z. Wang, Z. Qin, K. Ren. RescueDP: Real-time Spatio-temporal
    Crowd-sourced Data Publishing with Differential Privacy. INFOCOM 2016: its components dynamic
    grouping, adaptive sampling (the PID error and the interval update), adaptive budget
    allocation and Kalman filtering; and its journal version, Real-time and spatio-temporal
    crowd-sourced social network data publishing with differential privacy, IEEE TDSC 15(4), 2018,
    as the benchmark of Schäler et al. cites it (Algorithm 3 there: the filter).
    """

    name = "rescuedp"
    OPTIONS = {
        **PID_OPTIONS, **INTERVAL_OPTIONS, **KALMAN_OPTIONS,
        "sample_share": Option.number("phi, the budget share's scale", 0, example=0.3, open_low=True),
        "max_share": Option.number("p_max, the largest share of the remaining budget a sample takes", 0, 1,
                                   example=0.5, open_low=True),
        "max_budget": Option.number("e_max, the largest budget of a sample", MIN_EPSILON, 100, example=0.1,
                                    derived="epsilon / 5"),
        "dynamic_grouping": Option.boolean("group similar sampled bins (RescueDP); false samples every bin alone",
                                           example=False),
        "group_limit": Option.number("tau_1: a bin predicted above it is sampled alone", 0, example=20.0,
                                     open_low=True),
        "min_correlation": Option.number("tau_2: bins join a pivot only when their releases correlate with its by "
                                         "more", -1, 1, example=0.4),
        "max_difference": Option.number("tau_3: bins join a pivot only when their prediction differs from its by "
                                        "less", 0, example=10.0),
        "history": Option.integer("kappa, the releases a prediction and a correlation look back on", 2, 2**16,
                                  example=4),
    }

    def __init__(
        self,
        epsilon: float,
        window: int,
        domain_size: int,
        *,
        sample_share: float = 0.2,
        max_share: float = 0.6,
        max_budget: float | None = None,
        kp: float = 0.9,
        ki: float = 0.1,
        kd: float = 0.0,
        integral_window: int = 3,
        interval_gain: float = 10.0,
        dynamic_grouping: bool = True,
        group_limit: float = 30.0,
        min_correlation: float = 0.5,
        max_difference: float = 25.0,
        history: int = 3,
        process_noise: float = 1e5,
        initial_covariance: float = 100.0,
        randomness: DerivedRandomness | None = None,
        clamp_round: bool = False,
        noise: str = "discrete",
        decision_override: DecisionOverride | None = None,
    ) -> None:
        super().__init__(epsilon, window, domain_size, randomness=randomness, clamp_round=clamp_round, noise=noise,
                         decision_override=decision_override)
        self.sample_share = check_positive(sample_share, "phi")
        self.max_share = check_positive(max_share, "p_max")
        if self.max_share > 1:
            raise ParameterError(f"p_max is a share of the remaining budget: at most 1, got {max_share!r}")
        self.max_budget = check_epsilon(self.epsilon / 5 if max_budget is None else max_budget, "e_max")
        self.interval_gain = float(interval_gain)
        self.dynamic_grouping = bool(dynamic_grouping)
        self.group_limit, self.min_correlation = float(group_limit), float(min_correlation)
        self.max_difference = float(max_difference)
        self.history = check_positive_int(history, "kappa", minimum=2)
        d = self.domain_size
        self.pid = PIDController(kp, ki, kd, integral_window, channels=d)
        self.kalman = KalmanFilter(process_noise, initial_covariance, channels=d)
        self.interval = np.ones(d)
        self.next_sample = np.ones(d, dtype=np.int64)
        self.last_sample = np.zeros(d, dtype=np.int64)  # 0: none yet
        self.samples = np.zeros(d, dtype=np.int64)
        self.sampled_releases = np.zeros((d, self.history))  # each bin's last kappa releases at its samples
        self._recent = np.zeros(self.window - 1)  # budgets of the previous w-1 slots, slot s at s % (w-1)

    @property
    def window_spend_bound(self) -> float:
        return self.epsilon

    def _remaining(self) -> Fraction:
        """Exactly what the budgets of the last ``w - 1`` slots leave of ``epsilon``."""
        return Fraction(self.epsilon) - sum(map(Fraction, self._recent.tolist()), Fraction(0))

    def _publish(self, slot: int, counts: np.ndarray, dissimilarity) -> StepResult:
        self.kalman.predict()
        sampled = np.flatnonzero(self.next_sample <= slot)
        if self.decision_override is not None:
            forced = self.decision_override(slot)
            if forced is not None:
                sampled = np.arange(self.domain_size) if forced else sampled[:0]
        shares = np.minimum(self.sample_share * np.log(self.interval[sampled] + 1.0), self.max_share)
        ask = Fraction(float(shares.max(initial=0.0))) * self._remaining()
        budget = _floor(min(ask, Fraction(self.max_budget)))
        if not sampled.size or budget <= 0.0:
            self.next_sample[sampled] = slot + 1  # nothing to spend: retry at the next slot
            self._record(slot, 0.0)
            return self._repeat(slot, Strategy.NOT_SAMPLED)
        groups = self._groups(sampled)
        sizes = np.array([g.size for g in groups], dtype=float)
        sums = np.array([counts[g].sum() for g in groups])
        measured = self._noisy(slot, sums, budget) / sizes
        members = np.concatenate(groups)
        per_bin = np.repeat(np.arange(len(groups)), [g.size for g in groups])
        prior = self.last_release[members]
        posterior = self.kalman.correct(prior, measured[per_bin], noise_variance(budget, self.noise) / sizes[per_bin] ** 2,
                                        channels=members)
        self._record(slot, budget)
        self._schedule(slot, members, prior, posterior)
        release = np.array(self.last_release)
        release[members] = posterior
        self._release(release)
        return self._result(slot, Strategy.PUBLISH, budget)

    def _groups(self, sampled: np.ndarray) -> list[np.ndarray]:
        """The sampled bins in groups: singletons, and with dynamic grouping, groups of similar bins."""
        if not self.dynamic_grouping:
            return [sampled[i : i + 1] for i in range(sampled.size)]
        prediction = self.sampled_releases.mean(axis=1)
        candidate = (self.samples[sampled] >= self.history) & (prediction[sampled] <= self.group_limit)
        groups = [sampled[i : i + 1] for i in np.flatnonzero(~candidate)]
        waiting = sampled[candidate][np.argsort(prediction[sampled[candidate]], kind="stable")]
        centred = self.sampled_releases - self.sampled_releases.mean(axis=1, keepdims=True)
        norms = np.sqrt((centred**2).sum(axis=1))
        while waiting.size:
            pivot, rest = waiting[0], waiting[1:]
            with np.errstate(invalid="ignore", divide="ignore"):
                correlated = (centred[rest] @ centred[pivot]) / (norms[rest] * norms[pivot]) > self.min_correlation
            taken = np.where(correlated, prediction[rest], 0.0)
            before = prediction[pivot] + np.concatenate([[0.0], np.cumsum(taken)[:-1]])
            closed = (np.abs(prediction[rest] - prediction[pivot]) >= self.max_difference) | (before >= self.group_limit)
            stop = int(np.argmax(closed)) if closed.any() else rest.size
            joins = np.zeros(rest.size, dtype=bool)
            joins[:stop] = correlated[:stop]
            groups.append(np.concatenate([[pivot], rest[joins]]))
            waiting = rest[~joins]
        return groups

    def _schedule(self, slot: int, bins: np.ndarray, prior: np.ndarray, posterior: np.ndarray) -> None:
        """Move the intervals of the sampled ``bins`` (from their second sample on) and set their next samples.

        ``lambda_r`` is the noise scale of a sample at the next slot: what this slot (already
        recorded) and the ``w - 2`` before it leave, capped at ``e_max``.
        """
        again = self.samples[bins] > 0
        if again.any():
            chosen = bins[again]
            delta = self.pid.update(chosen, np.abs(posterior[again] - prior[again]), slot - self.last_sample[chosen])
            affordable = float(min(self._remaining(), Fraction(self.max_budget)))
            scale = 1.0 / affordable if affordable > 0 else math.inf
            self.interval[chosen] = rescue_interval(self.interval[chosen], delta, scale, self.interval_gain)
        self.next_sample[bins] = slot + np.floor(self.interval[bins]).astype(np.int64)
        self.last_sample[bins] = slot
        self.samples[bins] += 1
        self.sampled_releases[bins] = np.column_stack([self.sampled_releases[bins, 1:], posterior])

    def _record(self, slot: int, budget: float) -> None:
        if self.window > 1:
            self._recent[slot % (self.window - 1)] = budget

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "sample_share": self.sample_share, "max_share": self.max_share,
                "max_budget": self.max_budget, "kp": self.pid.kp, "ki": self.pid.ki, "kd": self.pid.kd,
                "integral_window": self.pid.integral_window, "interval_gain": self.interval_gain,
                "dynamic_grouping": self.dynamic_grouping, "group_limit": self.group_limit,
                "min_correlation": self.min_correlation, "max_difference": self.max_difference,
                "history": self.history, "process_noise": self.kalman.process_noise,
                "initial_covariance": self.kalman.initial_covariance}

    def _dynamic(self) -> dict[str, Any]:
        return {**super()._dynamic(), "interval": self.interval.copy(), "next_sample": self.next_sample.copy(),
                "last_sample": self.last_sample.copy(), "samples": self.samples.copy(),
                "sampled_releases": self.sampled_releases.copy(), "covariance": self.kalman.covariance.copy(),
                "pid": self.pid.state(), "recent_budgets": self._recent.copy()}

    def _load(self, dynamic: dict[str, Any]) -> None:
        super()._load(dynamic)
        self.interval = np.array(dynamic["interval"], dtype=float)
        self.next_sample = np.array(dynamic["next_sample"], dtype=np.int64)
        self.last_sample = np.array(dynamic["last_sample"], dtype=np.int64)
        self.samples = np.array(dynamic["samples"], dtype=np.int64)
        self.sampled_releases = np.array(dynamic["sampled_releases"], dtype=float).reshape(self.domain_size,
                                                                                           self.history)
        self.kalman.covariance = np.array(dynamic["covariance"], dtype=float)
        self.pid.load(dynamic["pid"])
        self._recent = np.array(dynamic["recent_budgets"], dtype=float)
