"""Where a worker reads its sources from after a rebalance: every stateful source is sought.

Faust drops the records of a fetch that returns while a rebalance has stopped the flow, then asks
for the committed offsets again; aiokafka leaves a partition with nothing committed where its
fetches stand, past those records. A worker that did not seek such a partition itself stopped
reading it, or applied its later records without the dropped ones (the rebalance stall of the
crash trials). The broker side of Faust's consumer is replaced here by the committed offsets
and assignment a broker would give, so the seeks the app asks for can be read.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("faust")

from faust.transport.drivers import aiokafka as driver  # noqa: E402
from faust.types import TP  # noqa: E402

from wevent.bench.crash import sample_values, trial_config  # noqa: E402
from wevent.core import packing  # noqa: E402
from wevent.stream.runtime import worker  # noqa: E402
from wevent.topologies.app import build_app  # noqa: E402
from wevent.stream.settings import Settings


def broker_seeks(monkeypatch, seek) -> None:
    """Every seek the worker's consumer hands to its Kafka thread goes to ``seek(tp, offset)``
    instead (called in this thread: there is no Kafka thread here)."""
    async def call_thread(self, fun, *args):
        return fun(*args)

    monkeypatch.setattr(driver.AIOKafkaConsumerThread, "call_thread", call_thread)
    monkeypatch.setattr(driver.AIOKafkaConsumerThread, "seek", lambda self, tp, offset: seek(tp, offset))


@pytest.fixture(autouse=True)
def no_faust_sensors(monkeypatch):
    """Faust's Prometheus sensors register once per process; these tests build several apps."""
    monkeypatch.setattr(worker, "setup_prometheus_sensors", lambda app, **kwargs: None)


def test_every_stateful_source_is_sought_to_its_state_or_commit(monkeypatch):
    committed = {
        TP("reports", 0): None,  # nothing committed, though the state applied offsets 0..9
        TP("reports", 1): 5,     # committed ahead of the state (applied 0..2)
        TP("slots", 1): 7,       # committed behind the state (its stream's partition): the commit
        TP("wevent-crash-assembler-changelog", 0): None,  # read by recovery, not by an agent
    }
    seeks = []

    async def seek_to_committed(self):
        return dict(committed)

    def seek(tp, offset):
        seeks.append((tp.topic, tp.partition, offset))

    monkeypatch.setattr(driver.Consumer, "seek_to_committed", seek_to_committed)
    monkeypatch.setattr(driver.Consumer, "assignment", lambda self: set(committed))
    broker_seeks(monkeypatch, seek)
    config = trial_config(sample_values(4), seed=1)
    app = build_app(config, "127.0.0.1:9", Settings())
    assembler = app.tables["assembler"]
    assembler.data[b"taxi/0"] = packing.pack({"offsets": {"reports:0": 9}})
    assembler.data[b"taxi/1"] = packing.pack({"offsets": {"reports:1": 2}})
    measure = app.tables["dissimilarity-state"]
    measure.data[b"taxi"] = packing.pack({"offsets": {"slots:1": 20, "releases:1": 20}})

    offsets = asyncio.run(app.consumer.seek_to_committed())

    assert sorted(seeks) == [("reports", 0, 0), ("reports", 1, 3), ("slots", 1, 7)]
    assert offsets[TP("reports", 0)] == 0 and offsets[TP("reports", 1)] == 3 and offsets[TP("slots", 1)] == 7


def test_a_stateful_source_is_fetched_only_once_sought(monkeypatch):
    """Faust resumes the stream partitions and then seeks them. Its pause filters what aiokafka
    fetched meanwhile from the committed offsets, so a resume that took effect at once let the
    next fetch hand the agents records past their state's position before the seek moved back;
    applied, they made the inputs in between look applied (a kill on Apache Kafka released slots
    short of a partition's reports). A stateful source is resumed by the seek, not before it."""
    reports, changelog = TP("reports", 0), TP("wevent-crash-assembler-changelog", 0)
    events = []

    async def seek_to_committed(self):
        return {reports: 5, changelog: None}

    def seek(tp, offset):
        events.append(("seek", tp.topic, offset))

    monkeypatch.setattr(driver.Consumer, "seek_to_committed", seek_to_committed)
    monkeypatch.setattr(driver.Consumer, "assignment", lambda self: {reports, changelog})
    broker_seeks(monkeypatch, seek)
    app = build_app(trial_config(sample_values(4), seed=1), "127.0.0.1:9", Settings())
    app.tables["assembler"].data[b"taxi/0"] = packing.pack({"offsets": {"reports:0": 2}})
    consumer = app.consumer
    consumer.pause_partitions({reports, changelog})

    consumer.resume_partitions({reports, changelog})  # what Faust's recovery does first
    fetchable = consumer._get_active_partitions()
    assert changelog in fetchable and reports not in fetchable

    asyncio.run(consumer.seek_to_committed())  # then its perform_seek
    assert events == [("seek", "reports", 3)]
    assert reports in consumer._get_active_partitions()
