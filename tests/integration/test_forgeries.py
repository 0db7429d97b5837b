"""Forged internal messages against a real broker and a real worker: anyone can write to tansu."""

from __future__ import annotations

import time

import numpy as np
import pytest

from wevent.core.central import BudgetAbsorption
from wevent.core.central.dissimilarity import Dissimilarity
from wevent.stream.wire.records import DeadLetter, ReleaseRecord
from wevent.stream.wire.messages import MeasuredMessage
from wevent.stream.config import parse_config
from wevent.stream.runtime.kafka import KafkaReportSink, producer_config
from wevent.stream.runtime.subscription import Releases, read_topic
from wevent.stream.settings import Settings
from wevent.stream.wire.seals import release_seal
from tests.integration.conftest import metric_value
from tests.integration.test_central_pipeline import DOMAIN, categorical_feed, expected_releases, stream_spec

pytestmark = [pytest.mark.integration]

USERS, SLOTS = 600, 12


def feed_ba(cluster, config, users: int, slots: int) -> np.ndarray:
    """``slots`` slots of a categorical feed of ``users`` into stream ``ba`` (on 2 report partitions)."""
    values = categorical_feed(users=users, slots=slots)
    stream = config.stream("ba")
    sink = KafkaReportSink(cluster.bootstrap, "ba", 2, tansu_compat=cluster.tansu_compat)
    for slot in range(1, slots + 1):
        sink.send_slot(slot, stream.slot_start(slot), stream.slot_end(slot), np.arange(users), values[slot - 1])
    sink.close()
    return values


def test_forged_releases_and_dissimilarities_neither_stall_nor_change_a_stream(cluster_factory):
    """Before the first report: a release of slot 1,000,000 (M1 waited for it for ever), a
    tombstone on releases, and a dissimilarity for every slot with a million users in every cell
    (M2 published them)."""
    config = parse_config({"seed": 5, "report_partitions": 2, "stream_partitions": 1,
                           "streams": [stream_spec("ba", "ba", users=USERS)]})
    cluster = cluster_factory(config)
    worker = cluster.start_worker()
    from confluent_kafka import Producer

    forger = Producer(producer_config(cluster.bootstrap, tansu_compat=cluster.tansu_compat))
    release = ReleaseRecord("ba", 1_000_000, [0.0] * DOMAIN, "publish", "ba", 1.0, 10, 0.5, 0.5, 1.0)
    forger.produce("releases", release.to_bytes(), key=b"ba")
    forger.produce("releases", None, key=b"ba")  # a tombstone: a message without a value
    for slot in range(1, SLOTS + 1):
        measured = MeasuredMessage("ba", slot, 0.0, np.full((1, DOMAIN), 10**6, dtype=np.int64),
                                   Dissimilarity(slot, 1e9, 0.05, 200.0))
        forger.produce("dissimilarity", measured.encode(), key=b"ba")
    assert forger.flush(30) == 0
    values = feed_ba(cluster, config, USERS, SLOTS)
    got = {}
    key = release_seal(Settings().noise_key(config)).public()
    with Releases(cluster.bootstrap, streams=["ba"], key=key) as releases:  # a subscriber drops the forger's record
        deadline = time.monotonic() + 180
        while len(got.keys() & set(range(1, SLOTS + 1))) < SLOTS and time.monotonic() < deadline:
            for record in releases.follow(idle_timeout=1.0):
                got.setdefault(record.slot, record)
        assert releases.published.dropped == {"unsigned": 1, "not JSON": 1}
    for result in expected_releases(BudgetAbsorption, "ba", values):
        assert got[result.slot].release == result.release.tolist(), f"slot {result.slot}\n{cluster.logs()}"
    text = cluster.metrics(worker)
    assert metric_value(text, "wevent_forged_messages_total", topic="releases", reason="unauthenticated") == 1
    assert metric_value(text, "wevent_forged_messages_total", topic="dissimilarity", reason="unauthenticated") == SLOTS
    letters = [DeadLetter.from_json(v) for v in read_topic(cluster.bootstrap, "deadletter")]
    assert sorted((d.reason, d.topic) for d in letters) == sorted(
        [("malformed", "releases"), ("unauthenticated", "releases")] + [("unauthenticated", "dissimilarity")] * SLOTS)
