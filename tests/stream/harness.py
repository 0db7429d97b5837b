"""An in-process run of the processors: their outputs are fed back as inputs, FIFO, no broker.

It exercises exactly the code the Faust agents run (``Processor.process``), with table state in
dicts and topic offsets counted per (topic, partition), and exports each input's events to the
Prometheus metrics as the worker does. Devices read requests and sign their
answers as ``wevent devices`` does, with the server's public key and the devices' key.
"""

from __future__ import annotations

import zlib
from collections import defaultdict, deque

import numpy as np

from wevent.stream.runtime import prometheus
from wevent.stream.wire.records import ReleaseRecord
from wevent.stream.wire.reports import ReportBatch, Watermark, report_partition
from wevent.stream.wire.seals import report_seal, request_seal
from wevent.stream.config import AppConfig
from wevent.stream.agents.processors import Processors
from wevent.producers.device_fleet import SignedRequests, signed_reports
from wevent.stream.settings import Settings


class InProcessPipeline:
    def __init__(self, config: AppConfig, fleets: dict | None = None, reports_first: bool = False) -> None:
        self.config = config
        self.reports_first = reports_first  # the devices' answers reach the collector before their request
        self.processors = Processors.build(config, Settings())
        self.tables = {"assembler": {}, "m1": {}, "m2": {}, "collector": {}}
        self.fleets = fleets or {}  # stream -> wevent.producers.device_fleet.DeviceFleet answering its requests
        self.requests = {name: SignedRequests(name, request_seal(Settings().noise_key(config)).public()) for name in self.fleets}
        self.device_seal = report_seal(Settings().device_key(config)) if self.fleets else None
        self.offsets = defaultdict(int)
        self.log = defaultdict(list)  # topic -> every message value produced, in order
        self.queue = deque()

    def partition(self, topic: str, key: str | None) -> int:
        n = self.config.topics()[topic]
        return zlib.crc32(key.encode()) % n if key else 0

    def produce(self, topic: str, value: bytes, key: str | None = None, partition: int | None = None) -> None:
        p = self.partition(topic, key) if partition is None else partition
        offset = self.offsets[(topic, p)]
        self.offsets[(topic, p)] += 1
        self.log[topic].append(value)
        self.queue.append((topic, p, offset, value))

    def inject(self, topic: str, value: bytes, key: str | None = None) -> None:
        """A message from outside the pipeline (a forger): delivered like any other, but not logged,
        so that :meth:`releases` are the releases the workers published."""
        p = self.partition(topic, key)
        self.queue.append((topic, p, self.offsets[(topic, p)], value))
        self.offsets[(topic, p)] += 1

    def send_slot(self, stream: str, slot_start: float, slot_end: float, users, values) -> None:
        if self.config.stream(stream).model == "local":  # the values stay with the devices: the clock only
            for p in range(self.config.report_partitions):
                self.produce("reports", Watermark(stream, slot_end).encode(), partition=p)
            return
        users = np.asarray(users)
        for p in range(self.config.report_partitions):
            chosen = report_partition(users, self.config.report_partitions) == p
            batch = ReportBatch(stream, users[chosen], np.asarray(values)[chosen], np.full(int(chosen.sum()), round(slot_start * 1000)))
            self.produce("reports", batch.encode(), partition=p)
        for p in range(self.config.report_partitions):
            self.produce("reports", Watermark(stream, slot_end).encode(), partition=p)

    @property
    def routes(self) -> dict:
        """topic -> (the table, the processor) its messages go to."""
        return {"reports": ("assembler", self.processors.assembler), "slots": ("m1", self.processors.dissimilarity),
                "releases": ("m1", self.processors.dissimilarity), "dissimilarity": ("m2", self.processors.publication),
                "ldp.requests": ("collector", self.processors.collector),
                "ldp.reports": ("collector", self.processors.collector)}

    def run(self, now: float = 0.0) -> None:
        routes = self.routes
        answered = set()
        while self.queue:
            topic, p, offset, value = self.queue.popleft()
            if topic == "ldp.requests" and (topic, p, offset) not in answered:
                self.answer(value)
                if self.reports_first:
                    answered.add((topic, p, offset))
                    self.queue.append((topic, p, offset, value))
                    continue
            if topic not in routes:
                continue
            table_name, processor = routes[topic]
            table = self.tables[table_name]
            outputs, updates, events = processor.process(value, topic, p, offset, table.get, now)
            prometheus.export(events)
            store(table, updates)
            for out in outputs:
                self.produce(out.topic, out.value, out.key)

    def answer(self, value: bytes) -> None:
        """The devices read the request too (after the collector, or before: both orders happen)."""
        for name, fleet in self.fleets.items():
            request = self.requests[name].read(value)
            if request is not None:
                for message in signed_reports(fleet.answer(request), self.device_seal):
                    self.produce("ldp.reports", message, key=name)

    def releases(self, stream: str) -> list[ReleaseRecord]:
        seen = {}
        for value in self.log["releases"]:
            record = ReleaseRecord.from_json(value)
            if record.stream == stream:
                seen.setdefault(record.slot, record)
        return [seen[s] for s in sorted(seen)]


def store(table: dict, updates: dict) -> None:
    """Apply a processor's updates to a table as the Faust agents do: in order, None deletes."""
    for key, value in updates.items():
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
