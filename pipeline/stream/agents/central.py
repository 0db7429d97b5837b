"""The central model's logic: Uniform, Sample, BD and BA (:class:`CentralLogic`)."""

from __future__ import annotations

import numpy as np

from ...core.central import CentralMechanism
from ...core.randomness import DerivedRandomness
from ...core.registry import mechanisms
from ..config import ConfigError, StreamConfig
from .logic import StreamLogic

__all__ = ["CentralLogic"]


class CentralLogic(StreamLogic):
    """Uniform, Sample, BD, BA: M1 is the shared dissimilarity measure (absent for Uniform/Sample)."""

    def __init__(self, stream: StreamConfig, randomness: DerivedRandomness) -> None:
        super().__init__(stream, randomness)

    def new_mechanism(self) -> CentralMechanism:
        s = self.stream
        try:  # a Mode B/C query index takes its budget out of every window first (composition)
            return mechanisms()[s.mechanism](s.budget.host, s.window, s.domain, randomness=self.randomness,
                                         **s.mechanism_options)
        except TypeError as exc:
            raise ConfigError(f"stream {s.name!r}: invalid options for {s.mechanism}: {exc}") from None

    def _input(self, counts: np.ndarray) -> np.ndarray:
        return counts.reshape(-1).astype(float)  # one group: the histogram c_t

    def measure(self, slot, counts, last_release):
        m1 = self._template.dissimilarity_measure
        if m1 is None:
            return None
        return m1.measure(slot, self._input(counts), np.asarray(last_release, dtype=float), self.randomness)

    def publish(self, mechanism, counts, dissimilarity):
        return mechanism.publish(self._input(counts), dissimilarity)
