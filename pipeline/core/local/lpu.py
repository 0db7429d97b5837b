"""LPU, LDP population uniform: [A] §6.2 / [S] §5.2 (spec ldp-ids §4.3).

At start the users are split at random into ``w`` disjoint groups of ``floor(N/w)`` or
``ceil(N/w)`` (a permutation from the server's generator at ``(0, SETUP)``, so a restored
mechanism rebuilds the same groups); at slot t, group ``(t-1) mod w`` reports with the whole
``eps`` and the release is its estimate.

Spend: ``eps`` per user once every ``w`` slots: each user's report gaps are exactly ``w``.
MSE about ``V(eps, N/w)``; CFPU ``1/w``.

>>> from pipeline.core.local.devices import Devices
>>> m = LPU(1.0, 3, 2, population=10, devices=Devices.from_seed(0))
>>> results = m.run(np.zeros((4, 10), dtype=int))
>>> [r.n2 for r in results]
[4, 3, 3, 4]
>>> bool((results[0].users2 == results[3].users2).all())
True
"""

from __future__ import annotations

import functools

import numpy as np

from ..base import Strategy
from ..randomness import Phase
from ..validation import ParameterError
from ._base import LocalMechanism
from .protocol import LocalDissimilarity, Request

__all__ = ["LPU"]


class LPU(LocalMechanism):
    name = "lpu"

    def __init__(self, epsilon: float, window: int, domain_size: int, population: int, **options) -> None:
        super().__init__(epsilon, window, domain_size, population, **options)
        if self.population < self.window:
            raise ParameterError(f"LPU needs at least one user per group: N >= w; got N = {self.population}, w = {self.window}")

    @functools.cached_property
    def groups(self) -> list[np.ndarray]:
        """The ``w`` groups, drawn when first needed: a restore that publishes nothing draws none."""
        order = self.randomness.generator(0, Phase.SETUP).permutation(self.population)
        return [np.sort(order[g :: self.window]).astype(np.int64) for g in range(self.window)]

    def _decide(self, slot: int, dissimilarity: LocalDissimilarity | None) -> Request | Strategy:
        return self._request(slot, Phase.PUBLICATION, self.epsilon, self.groups[(slot - 1) % self.window])
