"""Many producers of one stream against a real broker and worker: 2 producers (a `wevent replay
--producer-id` and a JSON producer far behind it) and 10 (one slow, one that dies, one that
restarts; JSON and WRB1 mixed). Every report is counted and the releases equal `wevent
simulate`'s on the union of what the producers sent."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest

from wevent.core.data import ABSENT, UserValues
from wevent.producers.synthetic import synthetic_feed
from wevent.stream.runtime.kafka import KafkaReportSink
from wevent.stream.runtime.subscription import Releases, read_topic
from wevent.stream.wire.reports import Watermark, decode_report_message
from tests.integration.conftest import compat_flags, metric_value
from tests.helpers import stream_config

pytestmark = [pytest.mark.integration]

START = 1_201_910_400.0
USERS, SLOTS, DOMAIN, PARTITIONS, SEED = 300, 20, 4, 3, 5


def producers_config(**fields):
    return stream_config(seed=SEED, report_partitions=PARTITIONS, domain=DOMAIN, users=USERS, start=START, **fields)


class Sent:
    """The union of what the producers sent: ``values[slot - 1, user]`` (ABSENT: nothing)."""

    def __init__(self) -> None:
        self.values = np.full((SLOTS, USERS), ABSENT, dtype=np.int64)

    def send(self, sink: KafkaReportSink, slot: int, users: np.ndarray, values: np.ndarray) -> None:
        """One slot of ``sink`` (``values``: every user's), delivered before this returns, so that the
        partitions hold the producers' messages in the order the test sends them."""
        sink.send_slot(slot, STREAM.slot_start(slot), STREAM.slot_end(slot), users, values[users])
        assert sink.producer.flush(30) == 0
        self.values[slot - 1, users] = values[users]

    def reports(self, sink: KafkaReportSink, slot: int, users: np.ndarray, values: np.ndarray) -> None:
        """Reports of ``slot`` without the watermark that closes it."""
        sink.send_reports(STREAM.slot_start(slot), users, values[users])
        assert sink.producer.flush(30) == 0
        self.values[slot - 1, users] = values[users]


STREAM = producers_config().stream("s")


def sink(cluster, name: str, wire: str) -> KafkaReportSink:
    return KafkaReportSink(cluster.bootstrap, "s", PARTITIONS, tansu_compat=cluster.tansu_compat, producer=name,
                           wire=wire)


def released(cluster, timeout: float = 240.0) -> dict[int, object]:
    got = {}
    with Releases(cluster.bootstrap, streams=["s"]) as releases:
        deadline = time.monotonic() + timeout
        while len(got) < SLOTS and time.monotonic() < deadline:
            for record in releases.follow(idle_timeout=1.0):
                got[record.slot] = record
                if len(got) == SLOTS:
                    break
        assert not releases.conflicts, f"two different releases for {releases.conflicts}"
    assert sorted(got) == list(range(1, SLOTS + 1)), cluster.logs()
    return got


def assert_simulate_on_the_union(got: dict, sent: Sent, tmp_path) -> None:
    """`wevent simulate` of the stream's mechanism on the union of the producers' data."""
    dump, log = tmp_path / "union.npz", tmp_path / "simulated.jsonl"
    UserValues(sent.values, DOMAIN, user_ids=[str(u) for u in range(USERS)], slot_seconds=60, start=START).save(dump)
    subprocess.run([sys.executable, "-m", "wevent.cli", "simulate", "-m", "ba", "--input", str(dump), "-e", "1",
                    "-w", "10", "--seed", str(SEED), "--stream", "s", "--releases", str(log), "--json"],
                   check=True, capture_output=True, timeout=120)
    simulated = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["slot"] for r in simulated] == list(range(1, SLOTS + 1))
    for record in simulated:
        assert got[record["slot"]].release == record["release"], f"slot {record['slot']}"


def assert_every_report_counted(cluster, worker, sent: Sent, duplicates: int = 0) -> None:
    text = cluster.metrics(worker)
    assert metric_value(text, "wevent_reports_accepted_total", stream="s") == np.count_nonzero(sent.values != ABSENT)
    rejected = {reason: metric_value(text, "wevent_reports_rejected_total", stream="s", reason=reason)
                for reason in ("late", "duplicate", "too_many_producers", "watermark_too_far_ahead")}
    assert rejected == {"late": 0, "duplicate": duplicates, "too_many_producers": 0, "watermark_too_far_ahead": 0}


def test_two_producers_a_replay_and_a_json_producer_far_behind_it(cluster_factory, tmp_path):
    """`wevent replay synthetic --producer-id app-1` sends users 0-149 (WRB1) from start to end
    while a JSON producer of users 150-299 has only said where it starts; that one then sends its
    20 slots. Within an idleness of 25 slots the partitions wait for it: nothing is late. (Before
    producers had ids, the replay's watermarks closed every slot and all 3,000 of its reports were
    late.)"""
    config = producers_config(idle_producer_seconds=25 * 60)
    cluster = cluster_factory(config)
    worker = cluster.start_worker()
    sent, values = Sent(), np.random.default_rng(SEED).integers(0, DOMAIN, (SLOTS, USERS))
    late_one = sink(cluster, "app-2", "json")
    late_one.watermark(START)
    assert late_one.producer.flush(30) == 0
    replay = subprocess.run([sys.executable, "-m", "wevent.cli", "replay", "synthetic", "--users", "150", "--slots",
                             str(SLOTS), "--slot-seconds", "60", "--start", str(START), "--config",
                             str(cluster.config_path), "--bootstrap", cluster.bootstrap, *compat_flags(cluster),
                             "--producer-id", "app-1", "--no-progress", "--json"],
                            capture_output=True, text=True, timeout=120)
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout)["producer_id"] == "app-1"
    feed = synthetic_feed("personalized", users=150, slots=SLOTS, slot_seconds=60.0, start=START)
    sent.values[:, :150] = np.stack([feed.values_at(slot) for slot in range(1, SLOTS + 1)])
    for slot in range(1, SLOTS + 1):
        sent.send(late_one, slot, np.arange(150, USERS), values[slot - 1])
    late_one.close()
    got = released(cluster)
    assert_every_report_counted(cluster, worker, sent)
    assert_simulate_on_the_union(got, sent, tmp_path)
    marks = [m for m in map(decode_report_message, read_topic(cluster.bootstrap, "reports"))
             if isinstance(m, Watermark)]
    assert {m.producer for m in marks} == {"app-1", "app-2"}
    assert len(marks) == PARTITIONS * 2 * (SLOTS + 1)  # each: its first watermark, then one per slot


LAG, DIES, RESTART, DOWN = 3, 8, 10, 3


def test_ten_producers_one_slow_one_dead_one_restarted(cluster_factory, tmp_path):
    """Users u mod 10 == k for producer gw-k, JSON for even k and WRB1 for odd, slot by slot in
    turn: seven in step, gw-7 three slots behind, gw-8 dead after slot 8 (slot 9's reports sent to
    partition 0 only), gw-9 crashed after slot 10's reports (no watermark) and back three slots
    later under its id, sending slot 11 again (its reports then duplicates). The default idleness
    (10 slots) lets the partitions pass gw-8 once the others are ten slots beyond it."""
    config = producers_config()
    cluster = cluster_factory(config)
    worker = cluster.start_worker()
    sent, values = Sent(), np.random.default_rng(SEED + 1).integers(0, DOMAIN, (SLOTS, USERS))
    users = [np.arange(k, USERS, 10) for k in range(10)]
    sinks = [sink(cluster, f"gw-{k}", "json" if k % 2 == 0 else "wrb1") for k in range(10)]
    for producer in sinks:
        producer.watermark(START)
        assert producer.producer.flush(30) == 0
    for tick in range(1, SLOTS + LAG + 1):
        for k, producer in enumerate(sinks):
            if k < 7 and tick <= SLOTS:
                sent.send(producer, tick, users[k], values[tick - 1])
            elif k == 7 and 1 <= tick - LAG <= SLOTS:
                sent.send(producer, tick - LAG, users[k], values[tick - LAG - 1])
            elif k == 8 and tick <= DIES:
                sent.send(producer, tick, users[k], values[tick - 1])
            elif k == 8 and tick == DIES + 1:  # dies mid-slot: partition 0 has its reports, no partition a watermark
                part0 = users[k][users[k] % PARTITIONS == 0]
                sent.reports(producer, tick, part0, values[tick - 1])
            elif k == 9 and tick <= RESTART:
                sent.send(producer, tick, users[k], values[tick - 1])
            elif k == 9 and tick == RESTART + 1:  # crashes after the slot's reports
                sent.reports(producer, tick, users[k], values[tick - 1])
            elif k == 9 and tick == RESTART + 1 + DOWN:  # a new process, the same id, from slot 11 again
                sinks[9] = restarted = sink(cluster, "gw-9", "wrb1")
                for slot in range(RESTART + 1, tick + 1):
                    sent.send(restarted, slot, users[k], values[slot - 1])
            elif k == 9 and RESTART + 1 + DOWN < tick <= SLOTS:
                sent.send(producer, tick, users[k], values[tick - 1])
    got = released(cluster)
    assert_every_report_counted(cluster, worker, sent, duplicates=users[9].size)
    assert_simulate_on_the_union(got, sent, tmp_path)
    for k, producer in enumerate(sinks):
        if k != 8:
            producer.close()
