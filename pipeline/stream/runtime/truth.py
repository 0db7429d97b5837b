"""The running error of a stream's releases against the ground truth of a replayed feed.

Only a replay knows the truth, so this runs beside the replay (``wevent run``, or ``wevent replay
--truth-port``), never in a worker: a worker must not export any function of raw data. For the
same reason its port listens on 127.0.0.1 only, with no option to open it to the network.
"""

from __future__ import annotations

import threading

import numpy as np

from ..wire.records import ReleaseRecord


class TruthMonitor:
    """Mean absolute error of every release seen so far against the feed's true histograms.

    Central and personalized releases estimate counts; local-model releases estimate the share of
    the ``population`` users holding each value (users without a value hold none), so their truth
    is scaled to match.
    """

    def __init__(self, stream: str, feed, slot_offset: int = 0, population: int | None = None) -> None:
        self.stream = stream
        self.feed = feed
        self.slot_offset = slot_offset  # stream slot s is feed slot s - slot_offset
        self.population = population  # local model: releases are frequencies over these users
        self.total = 0.0
        self.cells = 0
        self._lock = threading.Lock()

    @classmethod
    def for_stream(cls, stream, feed) -> "TruthMonitor":
        """The monitor of ``stream`` (a StreamConfig) replayed from ``feed``, aligning their slot clocks."""
        return cls(stream.name, feed, slot_offset=round((feed.start - stream.start) / stream.slot_seconds),
                   population=stream.users if stream.model == "local" else None)

    def truth(self, slot: int, domain: int) -> np.ndarray | None:
        feed_slot = slot - self.slot_offset
        if not 1 <= feed_slot <= self.feed.slots:
            return None
        values = np.asarray(self.feed.values_at(feed_slot))
        counts = np.bincount(values[values >= 0], minlength=domain)[:domain].astype(float)
        return counts if self.population is None else counts / self.population

    def observe(self, record: ReleaseRecord) -> float | None:
        """The running error once ``record`` is scored (None: its slot is not in the feed)."""
        truth = self.truth(record.slot, len(record.release))
        if truth is None:
            return None
        with self._lock:
            self.total += float(np.abs(np.asarray(record.release) - truth).sum())
            self.cells += truth.size
            return self.total / self.cells
