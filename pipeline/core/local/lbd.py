"""LBD, LDP budget distribution: [A] Algorithm 1 / [S] §4.2.3 (spec ldp-ids §4.4).

Every slot, all users report M1 with ``eps_1 = beta eps / w`` (``eps/(2w)`` by default; [A]
§5.3.3 prints 2eps/w, RES-7) and the server computes ``dis``. With ``eps_rm`` the pool
``(1-beta) eps`` minus the publication budgets of the previous ``w - 1`` slots, a publication would
use ``eps_2 = eps_rm / 2`` and have error ``err = V(eps_2, N)``; the slot publishes (all users
report again with ``eps_2``) iff ``dis > err``, else it repeats the last release.

Spend: per user, ``eps_1`` at every slot plus ``eps_2`` at publications: at most
``beta eps + (1-beta) eps (1 - 2^-w) < eps`` in any window.

The worked ledger of spec §4.4 (w = 3, scripted decisions P, A, P, P, A, A):

>>> import numpy as np
>>> from pipeline.core.local.devices import Devices
>>> script = [True, False, True, True, False, False]
>>> m = LBD(1.0, 3, 2, population=50, devices=Devices.from_seed(0), decision_override=lambda t: script[t - 1])
>>> [r.eps2 for r in m.run(np.zeros((6, 50), dtype=int))]
[0.25, 0.0, 0.125, 0.1875, 0.0, 0.0]
"""

from __future__ import annotations

from ..base import Strategy
from ._base import BudgetDivision, Scheduled
from .protocol import LocalDissimilarity, Request
from .schedules import Distribution

__all__ = ["LBD"]


class LBD(Scheduled, BudgetDivision):
    name = "lbd"

    def __init__(self, epsilon: float, window: int, domain_size: int, population: int, **options) -> None:
        super().__init__(epsilon, window, domain_size, population, **options)
        self.schedule = Distribution(self.pool, self.window)

    @property
    def window_spend_bound(self) -> float:
        return self.window * self.eps1 + self.pool * (1.0 - 2.0**-self.window)

    def _decide(self, slot: int, dissimilarity: LocalDissimilarity | None) -> Request | Strategy:
        eps2 = self.schedule.remaining() / 2.0
        if self._publishes(slot, dissimilarity, self._error(eps2)):
            return self._ask(slot, eps2)
        return Strategy.APPROXIMATE

    def _closed(self, slot: int, publication: Request | None) -> None:
        self.schedule.record(slot, publication.epsilon if publication is not None else 0.0)
        super()._closed(slot, publication)

