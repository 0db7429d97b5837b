"""Sample: one full-budget release per window on a fixed schedule (Kellaris et al. 2014, §3 benchmark).

Slots ``1, w+1, 2w+1, ...`` publish ``c_t + Lap(1/epsilon)^d``; all others repeat the last release.
The schedule test is ``(t - 1) mod w == 0`` (spec RES-2), which also publishes every slot at w = 1.

Spend: ``epsilon`` at a sampled slot, 0 elsewhere; every window holds exactly one sampled slot.

>>> from pipeline.core.randomness import SecretKey, DerivedRandomness
>>> m = Sample(epsilon=1.0, window=3, domain_size=2, randomness=DerivedRandomness(SecretKey.from_seed(1)))
>>> [r.strategy.value for r in m.run([[5, 5]] * 4)]
['publish', 'not_sampled', 'not_sampled', 'publish']
"""

from __future__ import annotations

import numpy as np

from ..base import StepResult, Strategy
from ._base import CentralMechanism

__all__ = ["Sample"]


class Sample(CentralMechanism):
    name = "sample"

    @property
    def window_spend_bound(self) -> float:
        return self.epsilon

    def _publish(self, slot: int, counts: np.ndarray, dissimilarity) -> StepResult:
        if (slot - 1) % self.window == 0:
            self._fresh(slot, counts, self.epsilon)
            return self._result(slot, Strategy.PUBLISH, self.epsilon)
        return self._repeat(slot, Strategy.NOT_SAMPLED)
