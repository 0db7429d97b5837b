"""What a processor saw of one input, or a device fleet of one request, for export as metrics.

The processors count what happened (reports accepted and rejected, dead letters, forged messages,
closed slots, releases) in an :class:`Events` they return beside their outputs and state updates;
they never touch a metrics library. A device fleet does the same with its refusals and the forged
requests it reads (:mod:`wevent.producers.device_fleet`). The worker and the fleet turn each input's
events into Prometheus updates with :func:`wevent.stream.runtime.prometheus.export`, the one place that
maps events to metrics.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

__all__ = ["Events", "Released"]


@dataclass(frozen=True)
class Released:
    """What operators see of one release: the gauges of its stream once M2 published it.

    The window's budget is the host's spend, the share a query index reserves, and the total the
    two must stay within (for a personalized stream: the type closest to its own bound).
    """

    stream: str
    slot: int
    strategy: str
    at: float  # wall time of the release, epoch seconds
    close_latency: float  # seconds from the slot's close (its last partition) to its release
    window_spent: float
    window_reserved: float
    window_budget: float
    communication_bits: int | None = None  # local model: bits of the slot's reports and requests
    available_population: int | None = None  # population division: users who may still be asked


@dataclass
class Events:
    """Counts of what happened while a processor applied one input, by the labels they go under.

    A reason's counts are those of the reports or messages concerned: a rejected batch of 300
    reports adds 300 under its (stream, reason). A stream the input names but the config does not
    is counted under the stream ``""``, never under its name.
    """

    reports_accepted: Counter[str] = field(default_factory=Counter)  # by stream
    reports_rejected: Counter[tuple[str, str]] = field(default_factory=Counter)  # by (stream, reason)
    dead_letters: Counter[str] = field(default_factory=Counter)  # by reason
    forged_messages: Counter[tuple[str, str]] = field(default_factory=Counter)  # by (topic, reason)
    slots_closed: Counter[str] = field(default_factory=Counter)  # by stream
    missing_reports: Counter[str] = field(default_factory=Counter)  # by stream: asked users who never answered
    releases: list[Released] = field(default_factory=list)
    device_refusals: Counter[str] = field(default_factory=Counter)  # by stream: reports a device fleet refused
    device_requests_refused: Counter[tuple[str, str]] = field(default_factory=Counter)  # by (stream, reason)
