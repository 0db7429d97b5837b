"""LPA, LDP population absorption: [A] Algorithm 4 / [S] Algorithm 3 (spec ldp-ids §4.7).

Every slot owns one unit of ``n_u = floor(P / w)`` users (``floor(N/(2w))`` by default). M1 asks
``n1`` available users at every slot, nullified ones included. After a publication of ``k`` units
the next ``k - 1`` slots are NULLIFIED; otherwise a publication would absorb the units skipped
since, up to ``w``, ask ``N_pp = k n_u`` available users and have error ``err = V(eps, N_pp)``;
it happens iff ``dis > err``. The unit ledger is LBA's
(:class:`~pipeline.core.local.schedules.Absorption`).

Spend: ``eps`` per report and at most one report per user in any window (publications of a
window hold at most ``w n_u <= P`` users): ``eps`` per window.

>>> import numpy as np
>>> from pipeline.core.local.devices import Devices
>>> script = {1: True, 3: False, 4: True, 6: True}
>>> m = LPA(1.0, 3, 2, population=60, devices=Devices.from_seed(0), decision_override=script.get)
>>> results = m.run(np.zeros((6, 60), dtype=int))
>>> [r.strategy.value[0].upper() for r in results], [r.n2 for r in results], results[0].n1
(['P', 'N', 'A', 'P', 'N', 'P'], [20, 0, 0, 20, 0, 10], 10)
"""

from __future__ import annotations

from ..validation import ParameterError
from ._base import Absorbing, PopulationDivision
from .schedules import Absorption

__all__ = ["LPA"]


class LPA(Absorbing, PopulationDivision):
    name = "lpa"

    def __init__(self, epsilon: float, window: int, domain_size: int, population: int, **options) -> None:
        super().__init__(epsilon, window, domain_size, population, **options)
        self.unit = self.pool // self.window
        if self.unit < 1:
            raise ParameterError(f"the publication pool of {self.pool} users leaves no unit for w = {self.window}")
        self.schedule = Absorption(self.window)
