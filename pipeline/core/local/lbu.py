"""LBU, LDP budget uniform: [A] §5.2 / [S] §4.2.1 (spec ldp-ids §4.1).

Every user reports at every slot with ``eps / w``; the release is the oracle's estimate. There is
no dissimilarity, no decision and no instruction traffic (users report on a clock).

Spend: ``eps / w`` per user per slot, so every window of ``w`` slots spends exactly ``eps``.
MSE ``V(eps/w, N)``; CFPU 1.

>>> import numpy as np
>>> from pipeline.core.local.devices import Devices
>>> m = LBU(1.0, 4, 2, population=100, devices=Devices.from_seed(0))
>>> results = m.run(np.zeros((3, 100), dtype=int))
>>> [(r.strategy.value, r.eps2, r.reports, r.bits) for r in results][0]
('publish', 0.25, 100, 100)
"""

from __future__ import annotations

from ..base import Strategy
from ..randomness import Phase
from ._base import LocalMechanism
from .protocol import LocalDissimilarity, Request

__all__ = ["LBU"]


class LBU(LocalMechanism):
    name = "lbu"
    instructs = (False, False)

    def _decide(self, slot: int, dissimilarity: LocalDissimilarity | None) -> Request | Strategy:
        return self._request(slot, Phase.PUBLICATION, self.epsilon / self.window, None)
