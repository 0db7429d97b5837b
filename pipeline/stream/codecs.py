"""Every message format of the system, in one place (ARCHITECTURE.md §3).

This module is imported by producers, workers, devices and the CLI alike; it needs only numpy.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = ["ReleaseRecord"]


def _finite_or_none(value):
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class ReleaseRecord:
    """One slot's release on the ``releases`` topic (and one line of a release log).

    ``(stream, slot)`` identifies it: a consumer keeps the first copy of each pair, and any
    re-emission after a crash is byte-for-byte identical.
    """

    stream: str
    slot: int
    release: list[float]
    strategy: str
    mechanism: str
    epsilon: float
    window: int
    eps1: float
    eps2: float
    window_spend: float  # total budget of the window of w slots ending here
    slot_start: float = 0.0  # epoch seconds; 0 when the stream has no clock (simulation)
    slot_end: float = 0.0
    dissimilarity: float | None = None
    threshold: float | None = None
    extras: dict[str, Any] = field(default_factory=dict)  # model-specific (LDP: users, reports, bits)

    @classmethod
    def from_step(cls, stream: str, mechanism, result, window_spend: float, slot_start: float = 0.0,
                  slot_end: float = 0.0, extras: dict | None = None) -> "ReleaseRecord":
        return cls(
            stream=stream,
            slot=int(result.slot),
            release=np.asarray(result.release, dtype=float).tolist(),
            strategy=result.strategy.value,
            mechanism=mechanism.name,
            epsilon=mechanism.epsilon,
            window=mechanism.window,
            eps1=float(result.eps1),
            eps2=float(result.eps2),
            window_spend=float(window_spend),
            slot_start=float(slot_start),
            slot_end=float(slot_end),
            dissimilarity=_finite_or_none(result.dissimilarity),
            threshold=_finite_or_none(result.threshold),
            extras=dict(extras or {}),
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"), sort_keys=True)

    def to_bytes(self) -> bytes:
        return self.to_json().encode()

    @classmethod
    def from_json(cls, text: str | bytes) -> "ReleaseRecord":
        data = json.loads(text)
        return cls(**data)
