"""DSAT_w: a dissimilarity test against a threshold steered to a publication rate (Li et al., CIKM 2015)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ..base import StepResult, Strategy
from ..control import RATE_CONTROL_OPTIONS, steer_threshold
from ..options import Option
from ..randomness import DerivedRandomness
from ..validation import ParameterError, check_positive, check_positive_int
from ._base import AdaptiveCentralMechanism, DecisionOverride
from .dissimilarity import Dissimilarity

__all__ = ["DSAT"]


def _floor(value: Fraction) -> float:
    """The largest float not above ``value``: a budget share that never rounds up."""
    share = float(value)
    while Fraction(share) > value:
        share = math.nextafter(share, 0.0)
    return share


class DSAT(AdaptiveCentralMechanism):
    """DSAT_w: publish when the dissimilarity exceeds a threshold that follows the publication rate.

    M1 is BD's private dissimilarity (:class:`.DissimilarityMeasure`, ``eps_1 = epsilon/(2w)``
    at every slot). A publication spends a fixed ``eps_2 = pool / C`` (rounded down; the pool is
    what M1 leaves of every window, ``epsilon / 2``), so at most ``C`` publications fit in any
    window: when the previous ``w - 1`` slots hold ``C`` of them, the slot repeats the last
    release (NULLIFIED) and the threshold waits. Otherwise the threshold ``T_t`` moves by
    ``u = theta |(|rate - C/w| - sigma)| / sigma``, down when the publication rate
    ``count / min(t, w)`` is below ``C / w`` and up otherwise, within ``[0, T_max]``, and the
    slot publishes when ``dis > T_t``.

    Parameters
    ----------
    epsilon : float
        The budget of any window of ``window`` consecutive slots, > 0.
    window : int
        ``w``, the window length in slots, >= 1.
    domain_size : int
        ``d``, the bins of a slot's histogram of counts (sensitivity 1 per user and slot).
    cutoff : int, optional
        ``C``, the most publications in a window, in ``[1, w]``; ``ceil(0.15 w)`` if omitted.
    threshold : float, optional
        ``T``, the initial threshold; ``1 / eps_2`` (a publication's expected absolute error per
        bin) if omitted.
    tolerance : float, default 0.05
        ``sigma``, the rate error the controller tolerates, > 0.
    gain : float, optional
        ``theta``, the controller's gain; ``T / 10`` if omitted.
    threshold_cap : float, optional
        ``T_max``, the largest threshold; ``2 T`` if omitted.
    rate_denominator : {"window", "slot"}, default "window"
        Divide the publication count by ``min(t, w)`` or, as printed, by ``t``.
    budget_shift : bool, default False
        Give M1 ``epsilon / d`` instead of ``epsilon / (2w)`` when ``d > 2w`` and the rest to the
        publications (Kellaris et al.'s Section 4.5).
    force_first_publish : bool, default False
        Publish slot 1 whatever its dissimilarity.
    randomness : DerivedRandomness, optional
        Where every draw comes from (a fresh random key if omitted).
    clamp_round : bool, default False
        Round fresh releases to non-negative integers (post-processing, no budget).
    noise : {"discrete", "laplace"}, default "discrete"
        Exact two-sided geometric noise on integer queries, or the paper's ``Lap(1/eps)``.
    decision_override : callable, optional
        ``slot -> bool | None``, a test hook that replaces the publish rule where not None (a
        nullified slot stays nullified).

    Spend
    -----
    ``eps_1`` at every slot and at most ``C`` publications of ``eps_2`` in any window:
    ``w eps_1 + C eps_2 <= epsilon`` (:attr:`window_spend_bound`).

    Notes
    -----
    DSAT's controller is a PID controller on the rate error; like its LDP-IDS forms
    (LP-DSAT_w, LB-DSAT_w) this one is proportional, and the rate counts the publications of the
    last ``w - 1`` slots, as a window is what the budget constrains. The original paper samples a
    finite stream with the budget split by a formula in the data's size (its Theorem 5.4), and
    its threshold is a fraction of a normalised histogram; here M1 and the publications share
    the window as in Kellaris et al.'s BD, and the threshold is in counts, so its start and cap
    are ours. The default ``C`` is the benchmark of Schäler et al.'s.

    Examples
    --------
    >>> from wevent.core.randomness import SecretKey, ZeroNoise
    >>> m = DSAT(1.0, 4, 2, randomness=ZeroNoise(SecretKey.from_seed(0)), decision_override=lambda t: True)
    >>> [r.strategy.value[0] for r in m.run([[1, 1]] * 6)], m.cutoff, m.eps2
    (['p', 'n', 'n', 'n', 'p', 'n'], 1, 0.5)

    References
    ----------
    H. Li, L. Xiong, X. Jiang, J. Liu. Differentially Private Histogram Publication for Dynamic
    Datasets: an Adaptive Sampling Approach. CIKM 2015: Algorithm 2 (DSAT, the adaptive-threshold
    sampling with feedback control of the threshold) and Theorem 5.4 (its budget split). X. Ren, L. Shi, W. Yu,
    S. Yang, C. Zhao, Z. Xu. LDP-IDS: Local Differential Privacy for Infinite Data Streams.
    SIGMOD 2022: Section 6.2 and Algorithm 4 (DSAT_w, its w-event form).
    """

    name = "dsat"
    OPTIONS = {
        "cutoff": Option.integer("C, the most publications in a window", 1, 2**20, example=2, derived="ceil(0.15 w)"),
        "threshold": Option.number("T, the initial threshold", 0, example=0.5, derived="1 / eps_2"),
        **RATE_CONTROL_OPTIONS,
        "threshold_cap": Option.number("T_max, the largest threshold", 0, example=40.0, derived="2 T"),
    }

    def __init__(
        self,
        epsilon: float,
        window: int,
        domain_size: int,
        *,
        cutoff: int | None = None,
        threshold: float | None = None,
        tolerance: float = 0.05,
        gain: float | None = None,
        threshold_cap: float | None = None,
        rate_denominator: str = "window",
        budget_shift: bool = False,
        force_first_publish: bool = False,
        randomness: DerivedRandomness | None = None,
        clamp_round: bool = False,
        noise: str = "discrete",
        decision_override: DecisionOverride | None = None,
    ) -> None:
        super().__init__(epsilon, window, domain_size, budget_shift=budget_shift,
                         force_first_publish=force_first_publish, randomness=randomness, clamp_round=clamp_round,
                         noise=noise, decision_override=decision_override)
        self.cutoff = check_positive_int(math.ceil(0.15 * self.window) if cutoff is None else cutoff, "cutoff C")
        if self.cutoff > self.window:
            raise ParameterError(f"the cutoff C is at most w = {self.window} publications per window, got {self.cutoff}")
        if rate_denominator not in ("window", "slot"):
            raise ParameterError(f"rate_denominator must be 'window' or 'slot', got {rate_denominator!r}")
        self.rate_denominator = rate_denominator
        m1 = self.dissimilarity_measure  # what it leaves of every window, exactly:
        self.eps2 = _floor((Fraction(self.epsilon) - self.window * Fraction(m1.eps1)) / self.cutoff)
        self.initial_threshold = 1.0 / self.eps2 if threshold is None else float(threshold)
        if not self.initial_threshold >= 0:
            raise ParameterError(f"the threshold T must be >= 0, got {threshold!r}")
        self.tolerance = check_positive(tolerance, "tolerance sigma")
        self.gain = self.initial_threshold / 10 if gain is None else float(gain)
        self.threshold_cap = 2 * self.initial_threshold if threshold_cap is None else float(threshold_cap)
        if not self.threshold_cap >= self.initial_threshold:
            raise ParameterError(f"the threshold cap must be at least T = {self.initial_threshold}, got {threshold_cap!r}")
        self.threshold = self.initial_threshold
        self._recent = np.zeros(self.window - 1, dtype=bool)  # publications of the previous w-1 slots

    @property
    def window_spend_bound(self) -> float:
        return self.window * self.dissimilarity_measure.eps1 + self.cutoff * self.eps2

    def _publish(self, slot: int, counts: np.ndarray, dissimilarity: Dissimilarity | None) -> StepResult:
        count = int(self._recent.sum())
        if count >= self.cutoff:
            result = self._repeat(slot, Strategy.NULLIFIED, dissimilarity)
        else:
            rate = count / (min(slot, self.window) if self.rate_denominator == "window" else slot)
            self.threshold = steer_threshold(self.threshold, rate, self.cutoff / self.window, self.tolerance,
                                             self.gain, self.threshold_cap)
            if (self.force_first_publish and slot == 1) or self._decide(slot, dissimilarity, self.threshold):
                self._fresh(slot, counts, self.eps2)
                result = self._result(slot, Strategy.PUBLISH, self.eps2, dissimilarity, self.threshold)
            else:
                result = self._repeat(slot, Strategy.APPROXIMATE, dissimilarity, self.threshold)
        if self.window > 1:
            self._recent[slot % (self.window - 1)] = result.published
        return result

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "cutoff": self.cutoff, "threshold": self.initial_threshold,
                "tolerance": self.tolerance, "gain": self.gain, "threshold_cap": self.threshold_cap,
                "rate_denominator": self.rate_denominator}

    def _dynamic(self) -> dict[str, Any]:
        return {**super()._dynamic(), "threshold": self.threshold, "recent_publications": self._recent.copy()}

    def _load(self, dynamic: dict[str, Any]) -> None:
        super()._load(dynamic)
        self.threshold = float(dynamic["threshold"])
        self._recent = np.array(dynamic["recent_publications"], dtype=bool)
