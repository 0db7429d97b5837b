"""Budget Distribution (BD): Kellaris, Papadopoulos, Xiao, Papadias, PVLDB 2014, Algorithm 2.

Each slot runs M1 (the private dissimilarity, :mod:`.dissimilarity`) and then M2: with
``eps_rm = pool - sum of the publication budgets of the previous w-1 slots``, a publication would
get ``eps_rm / 2`` and have expected absolute error ``lambda_2 = 2 / eps_rm``. BD publishes iff the
noisy dissimilarity exceeds that error (strictly); otherwise it repeats the last release and
spends nothing on M2. A budget leaves the window after ``w`` slots and so is recycled.

Spend: ``eps_1 = epsilon/(2w)`` on M1 at every slot, and at most
``(epsilon/2)(1 - 2^-w)`` on publications in any window: at most ``epsilon (1 - 2^-(w+1))`` in all.

Options (spec §3.6, §7): ``budget_shift`` moves budget from M1 to M2 when ``d > 2w``;
``force_first_publish`` publishes slot 1 with the budget the rule would give (RES-3);
``clamp_round`` post-processes releases to non-negative integers (RES-18).

Examples
--------
The paper's worked ledger (w = 3, scripted decisions P, S, P, P, S, S):

>>> from pipeline.core.randomness import SecretKey, ZeroNoise
>>> script = {1: True, 2: False, 3: True, 4: True, 5: False, 6: False}
>>> m = BudgetDistribution(1.0, 3, 2, randomness=ZeroNoise(SecretKey.from_seed(0)),
...                        decision_override=script.get)
>>> [r.eps2 for r in m.run([[1, 1]] * 6)]
[0.25, 0.0, 0.125, 0.1875, 0.0, 0.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base import StepResult, Strategy
from ._base import AdaptiveCentralMechanism
from .dissimilarity import Dissimilarity

__all__ = ["BudgetDistribution"]

# Below this remaining budget a publication's noise scale is not a finite float: treat as skip.
_TINY_BUDGET = 1e-300


class BudgetDistribution(AdaptiveCentralMechanism):
    name = "bd"

    def __init__(self, epsilon: float, window: int, domain_size: int, **options) -> None:
        super().__init__(epsilon, window, domain_size, **options)
        # eps_{k,2} of the previous w-1 slots, in a ring indexed by slot (0 for slots <= 0).
        self._recent = np.zeros(self.window - 1)

    @property
    def window_spend_bound(self) -> float:
        m1 = self.dissimilarity_measure
        return self.window * m1.eps1 + m1.publication_pool * (1.0 - 2.0 ** -self.window)

    def remaining_budget(self) -> float:
        """``eps_rm`` of the next slot: the pool minus the last w-1 publication budgets."""
        # Summed afresh each slot (spec §3.4) so that no running total can drift.
        return self.dissimilarity_measure.publication_pool - float(self._recent.sum())

    def _publish(self, slot: int, counts: np.ndarray, dissimilarity: Dissimilarity | None) -> StepResult:
        eps2 = self.remaining_budget() / 2.0
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
            self._recent[slot % (self.window - 1)] = result.eps2
        return result

    def _dynamic(self) -> dict[str, Any]:
        return {**super()._dynamic(), "recent_publication_budgets": self._recent.copy()}

    def _load(self, dynamic: dict[str, Any]) -> None:
        super()._load(dynamic)
        self._recent = np.array(dynamic["recent_publication_budgets"], dtype=float)
