"""LPD, LDP population distribution: [A] Algorithm 3 / [S] Algorithm 2 (spec ldp-ids §4.6).

Every slot, ``n1 = floor(beta N / w)`` available users report M1 with ``eps`` and the server
computes ``dis``. With ``N_rm`` the publication pool ``P`` minus the users of the publications of
the previous ``w - 1`` slots, a publication would ask ``N_pp = floor(N_rm / 2)`` available users
and have error ``err = V(eps, N_pp)``; it happens iff ``dis > err`` and ``N_pp >= u_min``.
Users asked at slot t are available again at the end of slot ``t + w - 1`` (RES-12).

Spend: ``eps`` per report and at most one report per user in any window (``|U_A|`` after M1
is at least ``N - w n1 - S >= P - S >= N_pp``, so sampling never runs short): ``eps`` per window.

Always publishing takes ``floor(N_rm/2)``: ``P/2, P/4, ...`` users, then recycled ones (spec §4.6):

>>> import numpy as np
>>> from pipeline.core.local.devices import Devices
>>> m = LPD(1.0, 4, 2, population=400, devices=Devices.from_seed(0), decision_override=lambda t: True)
>>> [r.n2 for r in m.run(np.zeros((5, 400), dtype=int))]
[100, 50, 25, 12, 56]
"""

from __future__ import annotations

from typing import Any

from ..base import Strategy
from ..validation import check_positive_int
from ._base import PopulationDivision, Scheduled
from .protocol import LocalDissimilarity, Request
from .schedules import Distribution

__all__ = ["LPD"]


class LPD(Scheduled, PopulationDivision):
    name = "lpd"

    def __init__(self, epsilon: float, window: int, domain_size: int, population: int, *, u_min: int = 1,
                 **options) -> None:
        super().__init__(epsilon, window, domain_size, population, **options)
        self.u_min = check_positive_int(u_min, "u_min")
        self.schedule = Distribution(self.pool, self.window)

    def _decide(self, slot: int, dissimilarity: LocalDissimilarity | None) -> Request | Strategy:
        users = self.schedule.remaining() // 2
        if self._publishes(slot, dissimilarity, self._error(users)) and users >= self.u_min:
            return self._ask(slot, users)
        return Strategy.APPROXIMATE

    def _closed(self, slot: int, publication: Request | None) -> None:
        self.schedule.record(slot, publication.size if publication is not None else 0)
        super()._closed(slot, publication)

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "u_min": self.u_min}

