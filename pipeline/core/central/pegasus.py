"""PeGaSus: perturb, group and smooth every bin's counts (Chen, Machanavajjhala, Hay, Miklau, CCS 2017)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ..base import StepResult, Strategy
from ..options import Option
from ..randomness import DerivedRandomness, Phase
from ..validation import ParameterError, check_positive
from ._base import CentralMechanism, DecisionOverride
from .time_groups import GROUP_OPTIONS, SMOOTHERS, DeviationGrouper, check_smoother

__all__ = ["PeGaSus"]


def _floor(value: Fraction) -> float:
    """The largest float not above ``value``: a budget share that never rounds up."""
    share = float(value)
    while Fraction(share) > value:
        share = math.nextafter(share, 0.0)
    return share


class PeGaSus(CentralMechanism):
    """PeGaSus: every slot's counts perturbed, grouped with similar neighbours in time, and smoothed.

    PeGaSus is event-level private with a budget per slot; any ``w`` slots of an event-level
    ``epsilon / w`` mechanism are ``epsilon``-DP together, so every slot spends ``epsilon / w``:
    ``eps_g`` (a share ``grouper_share``) on the grouper and ``eps_p`` (the rest) on the perturber.
    The perturber adds noise of budget ``eps_p`` to every bin's count. The grouper keeps every
    bin's open group of consecutive slots and lets the count join it while the group's deviation
    stays below ``theta``, tested with the sparse vector technique (:mod:`.time_groups`). The
    smoother releases, for every bin, the median (or mean, or shrinkage) of the noisy counts of
    its current group.

    There is no dissimilarity in the base's sense: :meth:`measure` (M1) returns None and
    :meth:`publish` (M2) groups, perturbs and smooths. The grouper's tests read the current
    groups' counts, so the state holds raw counts (at most ``max_group`` per bin), which the
    central model's trusted aggregator may keep; the releases and budgets stay public.

    Parameters
    ----------
    epsilon : float
        The budget of any window of ``window`` consecutive slots, > 0.
    window : int
        ``w``, the window length in slots, >= 1.
    domain_size : int
        ``d``, the bins of a slot's histogram of counts (sensitivity 1 per user and slot).
    grouper_share : float, default 0.2
        The share of every slot's budget the grouper takes, in (0, 1).
    threshold : float, optional
        ``theta``, the deviation (in counts) a group may reach; ``5 / eps_g`` if omitted.
    smoother : {"median", "mean", "shrinkage"}, default "median"
        How a group's noisy counts become a release.
    max_group : int, default 32
        The most slots a group holds, >= 1.
    randomness : DerivedRandomness, optional
        Where every draw comes from (a fresh random key if omitted).
    clamp_round : bool, default False
        Round fresh releases to non-negative integers (post-processing, no budget).
    noise : {"discrete", "laplace"}, default "discrete"
        Exact two-sided geometric noise on integer queries, or the paper's ``Lap(1/eps)``.
    decision_override : callable, optional
        Accepted for the common signature; the method has no publish rule to replace.

    Spend
    -----
    ``eps_g + eps_p <= epsilon / w`` at every slot, so ``epsilon`` in any window (a count takes
    part in one group's tests only: the grouper costs ``eps_g`` per slot's data).

    Notes
    -----
    Where we depart from the paper: the deviation is measured from the group's median instead of
    its mean (sensitivity 1 instead of 2, and an integer for integer counts, so the test needs
    half the noise and works with discrete noise); the sparse vector technique splits ``eps_g``
    as one third on the threshold and two thirds on the tests, so that one noise scale serves
    both; a group holds at most ``max_group`` slots (ours: it bounds the state). The shares and
    ``theta`` are the paper's (its Section 6.1), as in the benchmark of Schäler et al., which
    runs PeGaSus with ``epsilon / w`` per slot and, by a debugging flag, a new group at every
    slot.

    Examples
    --------
    >>> from wevent.core.randomness import SecretKey, DerivedRandomness
    >>> m = PeGaSus(1.0, 10, 2, randomness=DerivedRandomness(SecretKey.from_seed(1)))
    >>> r = m.step([500, 20])
    >>> r.eps1 + r.eps2 <= 0.1, r.strategy.value, m.grouper.sizes.tolist()
    (True, 'publish', [1, 1])

    References
    ----------
    Y. Chen, A. Machanavajjhala, M. Hay, G. Miklau. PeGaSus: Data-Adaptive Differentially
    Private Stream Processing. CCS 2017: the perturber-grouper-smoother framework with its
    deviation-based grouper and its smoothers, and Section 6.1 (the budget shares and the
    threshold).
    """

    name = "pegasus"
    OPTIONS = {
        "grouper_share": Option.number("the share of every slot's budget the grouper takes", 0, 1, example=0.3,
                                       open_low=True, open_high=True),
        "threshold": Option.number("theta, the deviation (in counts) a group may reach", 0, example=0.5,
                                   open_low=True, derived="5 / eps_g"),
        "smoother": Option.choice("how a group's noisy counts become a release", SMOOTHERS, example="mean"),
        **GROUP_OPTIONS,
    }

    def __init__(
        self,
        epsilon: float,
        window: int,
        domain_size: int,
        *,
        grouper_share: float = 0.2,
        threshold: float | None = None,
        smoother: str = "median",
        max_group: int = 32,
        randomness: DerivedRandomness | None = None,
        clamp_round: bool = False,
        noise: str = "discrete",
        decision_override: DecisionOverride | None = None,
    ) -> None:
        super().__init__(epsilon, window, domain_size, randomness=randomness, clamp_round=clamp_round, noise=noise,
                         decision_override=decision_override)
        self.grouper_share = check_positive(grouper_share, "grouper share")
        if self.grouper_share >= 1:
            raise ParameterError(f"the grouper share must be below 1, got {grouper_share!r}")
        per_slot = Fraction(self.epsilon) / self.window
        self.eps_g = _floor(per_slot * Fraction(self.grouper_share))
        self.eps_p = _floor(per_slot - Fraction(self.eps_g))
        self.threshold = 5.0 / self.eps_g if threshold is None else check_positive(threshold, "threshold theta")
        self.smoother = check_smoother(smoother)
        self.grouper = DeviationGrouper(self.domain_size, max_group, self.eps_g, self.noise)

    @property
    def window_spend_bound(self) -> float:
        return self.window * (self.eps_g + self.eps_p)

    def _publish(self, slot: int, counts: np.ndarray, dissimilarity) -> StepResult:
        noisy = self._noisy(slot, counts, self.eps_p)
        self.grouper.step(slot, counts, noisy, np.full(self.domain_size, self.threshold), self.randomness)
        self._release(self.grouper.smoothed(self.smoother))
        return StepResult(slot, self.last_release, Strategy.PUBLISH, self.eps_g, self.eps_p)

    def _prefetch(self, slots: np.ndarray) -> None:
        self._prefetch_noise(slots, Phase.PUBLICATION, self.eps_p, self.domain_size)
        self.grouper.prefetch(slots, self.randomness)

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "grouper_share": self.grouper_share, "threshold": self.threshold,
                "smoother": self.smoother, "max_group": self.grouper.limit}

    def _dynamic(self) -> dict[str, Any]:
        return {**super()._dynamic(), "groups": self.grouper.state()}

    def _load(self, dynamic: dict[str, Any]) -> None:
        super()._load(dynamic)
        self.grouper.load(dynamic["groups"])
