"""Per-model glue between a stream's configuration and the privacy core.

The processors stay model-agnostic: they ask a :class:`StreamLogic` to build the mechanism,
compute M1's dissimilarity for a slot, run M2, and describe the slot for the audit topic.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.base import REGISTRY, Mechanism, StepResult
from ..core.central import CentralMechanism, Dissimilarity
from ..core.randomness import DerivedRandomness
from .codecs import AuditRecord
from .config import AppConfig, ConfigError, StreamConfig

__all__ = ["StreamLogic", "CentralLogic", "logic_for"]


class StreamLogic:
    """What the processors need to know about one stream's model."""

    groups = 1  # rows of a slot's count matrix (requirement types for personalized streams)

    def __init__(self, stream: StreamConfig, randomness: DerivedRandomness) -> None:
        self.stream = stream
        self.randomness = randomness

    def group_of_users(self) -> np.ndarray | None:
        """Row of each user in the count matrix (None: a single row)."""
        return None

    def new_mechanism(self) -> Mechanism:
        raise NotImplementedError

    def restore(self, blob: bytes) -> Mechanism:
        from ..core.base import restore

        return restore(blob, self.randomness)

    def measure(self, slot: int, counts: np.ndarray, last_release: np.ndarray) -> dict[str, Any]:
        """M1: the private dissimilarity fields for slot ``slot`` (empty when the mechanism has none)."""
        raise NotImplementedError

    def publish(self, mechanism: Mechanism, counts: np.ndarray, measured: dict[str, Any]) -> StepResult:
        raise NotImplementedError

    def audit(self, mechanism: Mechanism, result: StepResult) -> AuditRecord:
        return AuditRecord(
            stream=self.stream.name,
            slot=result.slot,
            mechanism=mechanism.name,
            epsilon=mechanism.epsilon,
            window=mechanism.window,
            eps1=float(result.eps1),
            eps2=float(result.eps2),
        )


class CentralLogic(StreamLogic):
    """Uniform, Sample, BD, BA: M1 is the shared dissimilarity measure (absent for Uniform/Sample)."""

    def __init__(self, stream: StreamConfig, randomness: DerivedRandomness) -> None:
        super().__init__(stream, randomness)
        self._template = self.new_mechanism()  # validates parameters up front

    def new_mechanism(self) -> CentralMechanism:
        s = self.stream
        try:
            return REGISTRY[s.mechanism](s.epsilon, s.window, s.domain, randomness=self.randomness, **s.options)
        except TypeError as exc:
            raise ConfigError(f"stream {s.name!r}: invalid options for {s.mechanism}: {exc}") from None

    def measure(self, slot, counts, last_release):
        m1 = self._template.dissimilarity_measure
        if m1 is None:
            return {}
        d = m1.measure(slot, counts.reshape(-1).astype(float), np.asarray(last_release, dtype=float), self.randomness)
        return {"dis_value": d.value, "dis_epsilon": d.epsilon, "dis_scale": d.scale}

    def publish(self, mechanism, counts, measured):
        slot = mechanism.slot + 1
        dis = None
        if "dis_value" in measured:
            dis = Dissimilarity(slot, measured["dis_value"], measured["dis_epsilon"], measured["dis_scale"])
        return mechanism.publish(counts.reshape(-1).astype(float), dis)


def logic_for(config: AppConfig, stream: StreamConfig) -> StreamLogic:
    randomness = DerivedRandomness(config.noise_key(), stream.name)
    if stream.model == "central":
        if not issubclass(REGISTRY[stream.mechanism], CentralMechanism):
            raise ConfigError(f"stream {stream.name!r}: {stream.mechanism} is not a central-model mechanism")
        return CentralLogic(stream, randomness)
    raise ConfigError(f"stream {stream.name!r}: model {stream.model!r} is not supported by this pipeline yet")
