"""Producers of one stream as README describes them, for the in-process pipeline and the oracle
their union makes.

A :class:`Producer` owns some users. Its first message to every partition is a watermark at the
start of the first slot it sends; then, per slot, its users' reports go to the partitions that own
them (user mod P) and a watermark at the slot's end to every partition. It writes the JSON form
from the report schema's fields (as a producer in another language would, not through our codec)
or WRB1 (batches and binary watermarks). Every report it sends is noted in the shared
:class:`Union`, the data ``wevent simulate`` is run on.
"""

from __future__ import annotations

import json

import numpy as np

from wevent.core.data import ABSENT
from wevent.stream.wire.messages import PartialMessage
from wevent.stream.wire.reports import ReportBatch, Watermark, report_partition

WIRES = ("json", "wrb1")


class Union:
    """What the producers of a stream sent, slot by slot: ``values[slot - 1, user]`` (ABSENT: nothing)."""

    def __init__(self, slots: int, users: int) -> None:
        self.values = np.full((slots, users), ABSENT, dtype=np.int64)

    def counts(self, domain: int) -> np.ndarray:
        """Each slot's histogram of the values sent."""
        return np.stack([np.bincount(row[row != ABSENT], minlength=domain) for row in self.values])

    @property
    def reports(self) -> int:
        return int(np.count_nonzero(self.values != ABSENT))


class Producer:
    """One producer of ``stream`` into ``pipeline`` (anything with ``produce(topic, value, partition=)``
    and a ``config``), owning ``users``, named ``name`` (None: anonymous), writing ``wire``."""

    def __init__(self, pipeline, stream: str, users: np.ndarray, name: str | None, wire: str, union: Union) -> None:
        assert wire in WIRES
        self.pipeline, self.stream, self.name, self.wire, self.union = pipeline, stream, name, wire, union
        self.config = pipeline.config.stream(stream)
        self.partitions = pipeline.config.report_partitions
        self.users = np.asarray(users, dtype=np.int64)
        self.announced = False

    def watermark(self, time: float) -> None:
        if self.wire == "json":
            fields = {"version": 1, "type": "watermark", "stream": self.stream, "time": time}
            value = json.dumps(fields | ({"producer": self.name} if self.name else {})).encode()
        else:
            value = Watermark(self.stream, time, self.name).encode_wrb1()
        for p in range(self.partitions):
            self.pipeline.produce("reports", value, partition=p)
        self.announced = True

    def reports(self, slot: int, values: np.ndarray, partitions: range | list[int] | None = None) -> None:
        """Its users' reports of ``slot`` (``values``: every user's value) to ``partitions`` (default: all)."""
        time = self.config.slot_start(slot)
        owner = report_partition(self.users, self.partitions)
        for p in range(self.partitions) if partitions is None else partitions:
            users = self.users[owner == p]
            sent = values[users]
            if self.wire == "json":
                for user, value in zip(users.tolist(), sent.tolist()):
                    report = {"version": 1, "stream": self.stream, "user": user, "time": time, "value": value}
                    self.pipeline.produce("reports", json.dumps(report).encode(), partition=p)
            else:
                batch = ReportBatch(self.stream, users, sent, np.full(users.size, round(time * 1000)))
                self.pipeline.produce("reports", batch.encode(), partition=p)
            self.union.values[slot - 1, users] = sent

    def send(self, slot: int, values: np.ndarray) -> None:
        """One slot: the first watermark if none went out yet, the reports, the slot's watermark."""
        if not self.announced:
            self.watermark(self.config.slot_start(slot))
        self.reports(slot, values)
        self.watermark(self.config.slot_end(slot))


def partial_counts(pipeline, stream: str, slots: int, domain: int) -> np.ndarray:
    """Each slot's histogram as the assemblers counted it: their partials summed over partitions
    (a partial sent again after a crash must be the same)."""
    partials: dict[tuple[int, int], np.ndarray] = {}
    for value in pipeline.log["slots"]:
        partial = PartialMessage.decode(value)
        if partial.stream == stream:
            first = partials.setdefault((partial.slot, partial.partition), partial.counts)
            assert np.array_equal(first, partial.counts), f"two partials of slot {partial.slot}"
    counts = np.zeros((slots, domain), dtype=np.int64)
    for (slot, _), partial_of_slot in partials.items():
        counts[slot - 1] += partial_of_slot.sum(axis=0)
    return counts
