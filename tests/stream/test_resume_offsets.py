"""Where a restarted worker reads each source partition from: its states' offsets.

A committed offset can be ahead of the state recovered from a changelog; the states decide."""

from __future__ import annotations

import zlib

import numpy as np

from wevent.stream.wire.records import ReleaseRecord
from wevent.stream.wire.reports import ReportBatch, Watermark
from wevent.stream.wire.messages import decode_message
from wevent.stream.wire.seals import unseal
from wevent.stream.config import parse_config
from wevent.stream.agents.processors import Processors
from wevent.stream.settings import Settings
from tests.stream.harness import InProcessPipeline

START = 1_201_910_400.0


def two_streams():
    spec = {"model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 5, "domain": 4, "users": 40,
            "slot_seconds": 60, "start": START}
    return parse_config({"seed": 3, "report_partitions": 2, "stream_partitions": 2,
                         "streams": [{"name": "a", **spec}, {"name": "b", **spec}]})


def key_partition(key: str) -> int:
    return zlib.crc32(key.encode()) % 2


def test_the_assembler_resumes_after_the_lowest_offset_every_stream_applied():
    config = two_streams()
    assembler = Processors.build(config, Settings()).assembler
    table = {}

    def apply(raw, offset):
        _, updates, _ = assembler.process(raw, "reports", 0, offset, table.get, 0.0)
        table.update(updates)

    load = table.get
    assert assembler.resume_offset("reports", 0, load, key_partition) == 0  # no state: from the start
    apply(ReportBatch("a", np.array([0]), np.array([1]), np.array([round(START * 1000)])).encode(), 7)
    # stream b has no state on this partition yet: everything it may have missed is read again
    assert assembler.resume_offset("reports", 0, load, key_partition) == 0
    apply(Watermark("b", START + 60).encode(), 9)
    apply(Watermark("a", START + 60).encode(), 12)
    assert assembler.resume_offset("reports", 0, load, key_partition) == 10  # b applied up to 9, a up to 12
    assert assembler.resume_offset("reports", 1, load, key_partition) == 0
    assert assembler.resume_offset("slots", 0, load, key_partition) is None  # not its input


class RecordingPipeline(InProcessPipeline):
    """Keeps every message with its (topic, partition, offset), to read one again."""

    def __init__(self, config) -> None:
        super().__init__(config)
        self.history = {}

    def produce(self, topic, value, key=None, partition=None):
        p = self.partition(topic, key) if partition is None else partition
        self.history[(topic, p, self.offsets[(topic, p)])] = value
        super().produce(topic, value, key, p)


def test_m1_resumes_after_its_last_input_and_m2_at_it():
    config = two_streams()
    pipeline = RecordingPipeline(config)
    users = np.arange(40)
    for slot in (1, 2, 3):
        for name in ("a", "b"):
            s = config.stream(name)
            pipeline.send_slot(name, s.slot_start(slot), s.slot_end(slot), users, users % 4)
    pipeline.run()
    m1, m2 = pipeline.processors.dissimilarity, pipeline.processors.publication

    def last_offset(topic: str, p: int) -> int:
        """The lowest over the partition's streams of the offset of each stream's last message."""
        last = {}
        for (t, q, offset), value in pipeline.history.items():
            if (t, q) == (topic, p):
                body = unseal(value)[0]
                stream = ReleaseRecord.from_json(body).stream if topic == "releases" else decode_message(body).stream
                last[stream] = max(last.get(stream, -1), offset)
        return min(last.values())

    for p in {pipeline.partition("releases", name) for name in ("a", "b")}:
        def where(topic):
            return lambda key: pipeline.partition(topic, key)

        assert m1.resume_offset("releases", p, pipeline.tables["m1"].get, where("releases")) == last_offset("releases", p) + 1
        last = last_offset("dissimilarity", p)
        assert m2.resume_offset("dissimilarity", p, pipeline.tables["m2"].get, where("dissimilarity")) == last
        # M2 reads that input again: it re-emits the very release it caused
        outputs, _, _ = m2.process(pipeline.history[("dissimilarity", p, last)], "dissimilarity", p, last,
                                   pipeline.tables["m2"].get, 0.0)
        assert [o.value for o in outputs if o.topic == "releases"][0] in pipeline.log["releases"]
