"""Budget Absorption (BA): Kellaris, Papadopoulos, Xiao, Papadias, PVLDB 2014, Algorithm 3.

Every slot owns one publication unit ``u = pool / w`` (``epsilon/(2w)`` by default). A slot that
does not publish leaves its unit for a later publication to absorb; a publication that absorbs
``k - 1`` units (``k <= w``) forces the next ``k - 1`` slots to be nullified, so every window still
averages at most one unit per slot. Units are integers, so the nullified range is exact (RES-1).
M1, the private dissimilarity, runs and is charged at every slot, nullified ones included (RES-8).

Spend: ``eps_1 = epsilon/(2w)`` per slot on M1, and publication budgets ``k * u`` with
``1 <= k <= w`` summing to at most ``epsilon/2`` in any window: at most ``epsilon`` in all.

Examples
--------
The paper's example (w = 3; decisions P, S, P, ·, P, S, consulted only at non-nullified slots):

>>> from pipeline.core.randomness import SecretKey, ZeroNoise
>>> script = {1: True, 2: False, 3: True, 5: True, 6: False}
>>> m = BudgetAbsorption(1.0, 3, 2, randomness=ZeroNoise(SecretKey.from_seed(0)),
...                      decision_override=script.get)
>>> results = m.run([[1, 1]] * 6)
>>> [r.strategy.value[0].upper() for r in results]
['P', 'A', 'P', 'N', 'P', 'A']
>>> [round(r.eps2 * 6, 9) for r in results]
[1.0, 0.0, 2.0, 0.0, 1.0, 0.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base import StepResult, Strategy
from ._base import AdaptiveCentralMechanism
from .dissimilarity import Dissimilarity

__all__ = ["BudgetAbsorption"]


class BudgetAbsorption(AdaptiveCentralMechanism):
    name = "ba"

    def __init__(self, epsilon: float, window: int, domain_size: int, **options) -> None:
        super().__init__(epsilon, window, domain_size, **options)
        self.unit = self.dissimilarity_measure.publication_pool / self.window
        self.last_publication = 0  # l: the virtual release r_0 at slot 0 ...
        self.last_units = 1  # ... used one unit, so nothing is nullified after it (RES-3)

    @property
    def window_spend_bound(self) -> float:
        return self.window * self.dissimilarity_measure.eps1 + self.window * self.unit

    def _publish(self, slot: int, counts: np.ndarray, dissimilarity: Dissimilarity | None) -> StepResult:
        to_nullify = self.last_units - 1
        if slot - self.last_publication <= to_nullify:
            return self._repeat(slot, Strategy.NULLIFIED, dissimilarity)
        # Own unit plus the skipped slots since the nullified range, at most w in all (RES-4).
        units = min(slot - (self.last_publication + to_nullify), self.window)
        eps2 = self.unit * units
        threshold = 1.0 / eps2
        if (self.force_first_publish and slot == 1) or self._decide(slot, dissimilarity, threshold):
            self._fresh(slot, counts, eps2)
            self.last_publication, self.last_units = slot, units
            return self._result(slot, Strategy.PUBLISH, eps2, dissimilarity, threshold)
        return self._repeat(slot, Strategy.APPROXIMATE, dissimilarity, threshold)

    def _dynamic(self) -> dict[str, Any]:
        return {**super()._dynamic(), "last_publication": self.last_publication, "last_units": self.last_units}

    def _load(self, dynamic: dict[str, Any]) -> None:
        super()._load(dynamic)
        self.last_publication = int(dynamic["last_publication"])
        self.last_units = int(dynamic["last_units"])
