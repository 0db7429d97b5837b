"""LSP, LDP sampling: [A] §5.2 / [S] §4.2.2 (spec ldp-ids §4.2).

At slots ``t = 1, w+1, 2w+1, ...`` (``(t-1) mod w == 0``, RES-14) every user reports with the
whole ``eps``; other slots repeat the last release (NOT_SAMPLED). Each report is requested
(one instruction bit, spec §6.4).

Spend: ``eps`` per user at a sampled slot, 0 elsewhere; every window holds one sampled slot.
CFPU ``ceil(T/w)/T``.

>>> import numpy as np
>>> from pipeline.core.local.devices import Devices
>>> m = LSP(1.0, 3, 2, population=50, devices=Devices.from_seed(0))
>>> [r.strategy.value for r in m.run(np.zeros((4, 50), dtype=int))]
['publish', 'not_sampled', 'not_sampled', 'publish']
"""

from __future__ import annotations

from ..base import Strategy
from ..randomness import Phase
from ._base import LocalMechanism
from .protocol import LocalDissimilarity, Request

__all__ = ["LSP"]


class LSP(LocalMechanism):
    name = "lsp"
    instructs = (False, True)

    def _decide(self, slot: int, dissimilarity: LocalDissimilarity | None) -> Request | Strategy:
        if (slot - 1) % self.window == 0:
            return self._request(slot, Phase.PUBLICATION, self.epsilon, None)
        return Strategy.NOT_SAMPLED
