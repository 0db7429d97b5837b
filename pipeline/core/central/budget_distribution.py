"""Budget Distribution (BD): Kellaris, Papadopoulos, Xiao, Papadias, PVLDB 2014, Algorithm 2."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base import StepResult, Strategy
from ..exact import divide, grid
from ..randomness import DerivedRandomness
from ._base import AdaptiveCentralMechanism, DecisionOverride
from .dissimilarity import Dissimilarity

__all__ = ["BudgetDistribution"]

# Below this remaining budget a publication's noise scale is not a finite float: treat as skip.
_TINY_BUDGET = 1e-300


class BudgetDistribution(AdaptiveCentralMechanism):
    """Budget Distribution: each publication takes half of what the window has left.

    Each slot runs M1 (the private dissimilarity, :class:`.DissimilarityMeasure`) and then M2:
    with ``eps_rm = pool - sum of the publication budgets of the previous w-1 slots``, a
    publication would get ``eps_rm / 2`` and have expected absolute error ``2 / eps_rm``. BD
    publishes iff the noisy dissimilarity exceeds that error (strictly); otherwise it repeats
    the last release and spends nothing on M2. A budget leaves the window after ``w`` slots and
    so is recycled.

    Parameters
    ----------
    epsilon : float
        The budget of any window of ``window`` consecutive slots, > 0.
    window : int
        ``w``, the window length in slots, >= 1.
    domain_size : int
        ``d``, the bins of a slot's histogram of counts (sensitivity 1 per user and slot).
    budget_shift : bool, default False
        Give M1 ``epsilon / d`` instead of ``epsilon / (2w)`` when ``d > 2w`` and the rest to the
        publications (the optimisation of Section 4.5; off by default, as in the paper's
        evaluation).
    force_first_publish : bool, default False
        Publish slot 1 whatever its dissimilarity, with the budget the rule gives it. Off by
        default: slot 1 is compared with the virtual release ``r_0 = 0``, which is public.
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
    ``eps_1 = epsilon/(2w)`` on M1 at every slot, and at most ``(epsilon/2)(1 - 2^-w)`` on
    publications in any window: at most ``epsilon (1 - 2^-(w+1))`` in all
    (:attr:`window_spend_bound`).

    Notes
    -----
    The slots before the first, ``t <= 0``, spent nothing (as the paper states), and slot 1
    compares its counts with the virtual release ``r_0 = 0``. ``eps_rm`` is the pool minus the sum
    of a ring of the last ``w - 1`` budgets, and its half is rounded down onto epsilon's grid
    (:func:`~wevent.core.exact.divide`): every budget is a multiple of it, so every sum of them
    within epsilon is exact, and the ring's sum is kept as a running one (each budget added when
    it enters the ring and subtracted when it leaves) with no drift. A remaining budget too small
    for a finite noise scale skips the slot.

    Examples
    --------
    The paper's worked ledger (w = 3, scripted decisions P, S, P, P, S, S):

    >>> from wevent.core.randomness import SecretKey, ZeroNoise
    >>> script = {1: True, 2: False, 3: True, 4: True, 5: False, 6: False}
    >>> m = BudgetDistribution(1.0, 3, 2, randomness=ZeroNoise(SecretKey.from_seed(0)),
    ...                        decision_override=script.get)
    >>> [r.eps2 for r in m.run([[1, 1]] * 6)]
    [0.25, 0.0, 0.125, 0.1875, 0.0, 0.0]

    References
    ----------
    G. Kellaris, S. Papadopoulos, X. Xiao, D. Papadias. Differentially Private Event Sequences
    over Infinite Streams. PVLDB 7(12), 2014: Section 4.2, Algorithm 2, Theorem 4.
    """

    name = "bd"

    def __init__(
        self,
        epsilon: float,
        window: int,
        domain_size: int,
        *,
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
        # eps_{k,2} of the previous w-1 slots, in a ring indexed by slot (0 for slots <= 0), and their sum
        self._recent = np.zeros(self.window - 1)
        self._spent = 0.0
        self._grid = grid(self.epsilon)

    @property
    def window_spend_bound(self) -> float:
        m1 = self.dissimilarity_measure
        return self.window * m1.eps1 + m1.publication_pool * (1.0 - 2.0 ** -self.window)

    def remaining_budget(self) -> float:
        """``eps_rm`` of the next slot: the pool minus the last w-1 publication budgets."""
        return self.dissimilarity_measure.publication_pool - self._spent

    def _publish(self, slot: int, counts: np.ndarray, dissimilarity: Dissimilarity | None) -> StepResult:
        eps2 = divide(self.remaining_budget(), 2, self._grid)
        threshold = 1.0 / eps2 if eps2 > _TINY_BUDGET else float("inf")
        publish = threshold != float("inf") and (
            (self.force_first_publish and slot == 1) or self._decide(slot, dissimilarity, threshold)
        )
        if publish:
            self._fresh(slot, counts, eps2)
            result = self._result(slot, Strategy.PUBLISH, eps2, dissimilarity, threshold)
        else:
            result = self._repeat(slot, Strategy.APPROXIMATE, dissimilarity, threshold)
        if self.window > 1:
            ring = slot % (self.window - 1)
            # multiples of the grid within the pool: exact, the same sum as a fresh one
            self._spent += result.eps2 - float(self._recent[ring])
            self._recent[ring] = result.eps2
        return result

    def _dynamic(self) -> dict[str, Any]:
        return {**super()._dynamic(), "recent_publication_budgets": self._recent.copy()}

    def _load(self, dynamic: dict[str, Any]) -> None:
        super()._load(dynamic)
        self._recent = np.array(dynamic["recent_publication_budgets"], dtype=float)
        self._spent = float(self._recent.sum())
