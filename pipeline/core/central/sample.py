"""Sample: one full-budget release per window on a fixed schedule (Kellaris et al. 2014, Section 3)."""

from __future__ import annotations

import numpy as np

from ..base import StepResult, Strategy
from ..randomness import Phase
from ._base import CentralMechanism

__all__ = ["Sample"]


class Sample(CentralMechanism):
    """Sample: one full-budget release per window, on a fixed schedule.

    Slots ``1, w+1, 2w+1, ...`` publish ``c_t`` plus noise of budget ``epsilon``; all others
    repeat the last release. The schedule test is ``(t - 1) mod w == 0``: the paper's
    ``t mod w = 1`` never holds at ``w = 1``, where this one publishes every slot, and the two
    agree for ``w >= 2``.

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
    ``epsilon`` at a sampled slot, 0 elsewhere; every window holds exactly one sampled slot.

    Examples
    --------
    >>> from wevent.core.randomness import SecretKey, DerivedRandomness
    >>> m = Sample(epsilon=1.0, window=3, domain_size=2, randomness=DerivedRandomness(SecretKey.from_seed(1)))
    >>> [r.strategy.value for r in m.run([[5, 5]] * 4)]
    ['publish', 'not_sampled', 'not_sampled', 'publish']

    References
    ----------
    G. Kellaris, S. Papadopoulos, X. Xiao, D. Papadias. Differentially Private Event Sequences
    over Infinite Streams. PVLDB 7(12), 2014: Section 3, the Sample benchmark.
    """

    name = "sample"

    @property
    def window_spend_bound(self) -> float:
        return self.epsilon

    def _publish(self, slot: int, counts: np.ndarray, dissimilarity) -> StepResult:
        if (slot - 1) % self.window == 0:
            self._fresh(slot, counts, self.epsilon)
            return self._result(slot, Strategy.PUBLISH, self.epsilon)
        return self._repeat(slot, Strategy.NOT_SAMPLED)

    def _prefetch(self, slots: np.ndarray) -> None:
        self._prefetch_noise(slots[(slots - 1) % self.window == 0], Phase.PUBLICATION, self.epsilon, self.domain_size)
