"""Uniform: the window budget spread evenly over its slots (Kellaris et al. 2014, Section 3)."""

from __future__ import annotations

import numpy as np

from ..base import StepResult, Strategy
from ..exact import divide
from ..randomness import Phase
from ._base import CentralMechanism

__all__ = ["Uniform"]


class Uniform(CentralMechanism):
    """Uniform: every slot publishes with ``epsilon / w``.

    Every slot releases ``c_t`` plus noise of budget ``epsilon / w`` per bin, rounded down (the
    largest multiple of epsilon's grid that ``w`` slots can spend, :func:`~wevent.core.exact.divide`);
    the expected mean absolute error is ``w / epsilon`` per bin.

    Parameters
    ----------
    epsilon : float
        The budget of any window of ``window`` consecutive slots, > 0.
    window : int
        ``w``, the window length in slots, >= 1.
    domain_size : int
        ``d``, the bins of a slot's histogram of counts (sensitivity 1 per user and slot).
    randomness : DerivedRandomness, optional
        Where every draw comes from (a fresh random key if omitted).
    clamp_round : bool, default False
        Round fresh releases to non-negative integers (post-processing, no budget).
    noise : {"discrete", "laplace"}, default "discrete"
        Exact two-sided geometric noise on integer queries, or the paper's ``Lap(1/eps)``.
    decision_override : callable, optional
        ``slot -> bool | None``, a test hook that replaces the publish rule where not None.

    Spend
    -----
    ``epsilon / w`` per slot rounded down, so every full window spends at most ``epsilon``, exactly.

    Examples
    --------
    >>> from wevent.core.randomness import SecretKey, DerivedRandomness
    >>> m = Uniform(epsilon=1.0, window=4, domain_size=3, randomness=DerivedRandomness(SecretKey.from_seed(1)))
    >>> r = m.step([10, 20, 30])
    >>> r.strategy.value, r.eps2, r.release.shape
    ('publish', 0.25, (3,))

    References
    ----------
    G. Kellaris, S. Papadopoulos, X. Xiao, D. Papadias. Differentially Private Event Sequences
    over Infinite Streams. PVLDB 7(12), 2014: Section 3, the Uniform benchmark.
    """

    name = "uniform"

    @property
    def slot_budget(self) -> float:
        """What every slot spends: the largest budget ``w`` slots can spend within epsilon."""
        return divide(self.epsilon, self.window)

    @property
    def window_spend_bound(self) -> float:
        return self.epsilon

    def _publish(self, slot: int, counts: np.ndarray, dissimilarity) -> StepResult:
        budget = self.slot_budget
        self._fresh(slot, counts, budget)
        return self._result(slot, Strategy.PUBLISH, budget)

    def _prefetch(self, slots: np.ndarray) -> None:
        self._prefetch_noise(slots, Phase.PUBLICATION, self.slot_budget, self.domain_size)
