"""LBA, LDP budget absorption: [A] Algorithm 2 / [S] §4.2.3 (spec ldp-ids §4.5).

Every slot owns one publication unit ``u = (1-beta) eps / w`` (``eps/(2w)`` by default). M1 runs
at every slot, nullified ones included (RES-8). After a publication of ``k`` units the next
``k - 1`` slots are NULLIFIED; otherwise a publication would absorb the units skipped since, up
to ``w`` (:class:`~pipeline.core.local.schedules.Absorption`), use ``eps_2 = k u`` and have error
``err = V(eps_2, N)``; it happens iff ``dis > err``.

Spend: per user, ``eps_1 = beta eps / w`` at every slot plus at most ``w`` units in any window:
at most ``eps``.

The worked ledger of spec §4.5 (w = 3; P at t = 1, A at 3, P at 4 and 6; u = eps/6):

>>> import numpy as np
>>> from pipeline.core.local.devices import Devices
>>> script = {1: True, 3: False, 4: True, 6: True}
>>> m = LBA(1.0, 3, 2, population=50, devices=Devices.from_seed(0), decision_override=script.get)
>>> results = m.run(np.zeros((6, 50), dtype=int))
>>> [r.strategy.value[0].upper() for r in results], [round(r.eps2 * 6, 9) for r in results]
(['P', 'N', 'A', 'P', 'N', 'P'], [2.0, 0.0, 0.0, 2.0, 0.0, 1.0])
"""

from __future__ import annotations

from ._base import Absorbing, BudgetDivision
from .schedules import Absorption

__all__ = ["LBA"]


class LBA(Absorbing, BudgetDivision):
    name = "lba"

    def __init__(self, epsilon: float, window: int, domain_size: int, population: int, **options) -> None:
        super().__init__(epsilon, window, domain_size, population, **options)
        self.unit = self.pool / self.window
        self.schedule = Absorption(self.window)

    @property
    def window_spend_bound(self) -> float:
        return self.window * self.eps1 + self.window * self.unit
