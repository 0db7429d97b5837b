"""Uniform: the window budget spread evenly over its slots (Kellaris et al. 2014, §3 benchmark).

Every slot publishes ``c_t + Lap(w/epsilon)^d``.

Spend: ``epsilon / w`` per slot, so every full window spends exactly ``epsilon``.
Expected mean absolute error: ``w / epsilon`` per bin.

>>> from pipeline.core.randomness import SecretKey, DerivedRandomness
>>> m = Uniform(epsilon=1.0, window=4, domain_size=3, randomness=DerivedRandomness(SecretKey.from_seed(1)))
>>> r = m.step([10, 20, 30])
>>> r.strategy.value, r.eps2, r.release.shape
('publish', 0.25, (3,))
"""

from __future__ import annotations

import numpy as np

from ..base import StepResult, Strategy
from ._base import CentralMechanism

__all__ = ["Uniform"]


class Uniform(CentralMechanism):
    name = "uniform"

    @property
    def window_spend_bound(self) -> float:
        return self.epsilon

    def _publish(self, slot: int, counts: np.ndarray, dissimilarity) -> StepResult:
        self._fresh(slot, counts, self.epsilon / self.window)
        return self._result(slot, Strategy.PUBLISH, self.epsilon / self.window)
