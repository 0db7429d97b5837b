"""`wevent replay` reports only what the broker confirmed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from wevent.stream.runtime.broker import EmbeddedBroker, create_topics
from wevent.stream.config import parse_config
from wevent.stream.runtime.child_processes import wait_until, write_config
from wevent.stream.runtime.subscription import read_topic

pytestmark = [pytest.mark.integration]

TDRIVE = Path(__file__).resolve().parents[2] / "producers" / "fixtures" / "tdrive"
PROFILE = ["--grid", "4x4", "--slot-seconds", "300"]  # 288 slots of 300 s, d = 16


def replay_command(config_path: Path, bootstrap: str, *extra: str, tansu_compat: bool = True) -> list[str]:
    return [sys.executable, "-m", "wevent.cli", "replay", "tdrive", str(TDRIVE), *PROFILE, "--config",
            str(config_path), "--bootstrap", bootstrap, *(["--tansu-compat"] if tansu_compat else []), "--no-progress",
            *extra]


FEED_START = 1201968059.0  # the bundled sample's first slot, in ``PROFILE``


def write_taxi_config(directory: Path, first_slot: int = 1):
    """A central stream the bundled sample (``PROFILE``) fits from its slot ``first_slot`` on, and
    the file it is written to."""
    config = parse_config({"seed": 1, "report_partitions": 2, "stream_partitions": 1, "streams": [{
        "name": "taxi", "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 20, "domain": 16,
        "users": 248, "slot_seconds": 300.0,
        "start": FEED_START + (first_slot - 1) * 300.0}]})
    return config, write_config(config, directory)


def wait_for_deliveries(broker, replay) -> None:
    """Until the broker holds ten of the replay's messages: it has confirmed the first ones (it answers
    a connection's requests in order), and the replay goes on for about 29 s more."""
    assert wait_until(lambda: replay.poll() is not None or len(read_topic(broker.bootstrap, "reports")) >= 10, 60, 0.2)
    assert replay.poll() is None, replay.communicate()


@pytest.fixture
def taxi_config(tmp_path):
    return write_taxi_config(tmp_path)


def test_the_success_line_counts_the_confirmed_messages(broker, taxi_config):
    config, path = taxi_config
    create_topics(broker.bootstrap, config.topics())
    sent = subprocess.run(replay_command(path, broker.bootstrap, "--from-slot", "280", "--json",
                                         tansu_compat=broker.tansu_compat), capture_output=True,
                          text=True, timeout=120)
    assert sent.returncode == 0, sent.stderr
    summary = json.loads(sent.stdout)
    assert summary["messages_delivered"] == len(read_topic(broker.bootstrap, "reports")) > 9 * 2


def test_a_broker_killed_mid_replay_fails_the_replay_in_one_line(tmp_path, taxi_config):
    config, path = taxi_config
    broker = EmbeddedBroker().start()
    try:
        create_topics(broker.bootstrap, config.topics())
        # 288 slots of 300 s at 3,000 times real time: about 29 s of replay; the broker dies once it
        # has confirmed some of it.
        replay = subprocess.Popen(replay_command(path, broker.bootstrap, "--speed", "3000", "--delivery-timeout", "5"),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for_deliveries(broker, replay)
        broker.process.kill()
        broker.process.wait()
        out, err = replay.communicate(timeout=60)
    finally:
        broker.stop()
    assert replay.returncode == 75, (out, err)  # not delivered within the delivery timeout: try again later
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("wevent replay: failed: ") and "not delivered" in lines[0], err
    assert "delivered to Kafka" not in out, out


def test_a_broker_restarted_empty_mid_replay_fails_the_replay(tmp_path, taxi_config):
    config, path = taxi_config
    broker = EmbeddedBroker().start()
    try:
        create_topics(broker.bootstrap, config.topics())
        replay = subprocess.Popen(replay_command(path, broker.bootstrap, "--speed", "3000", "--delivery-timeout", "30"),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for_deliveries(broker, replay)  # confirmed messages for the new broker to lose
        broker.process.kill()
        broker.process.wait()
        time.sleep(2)
        broker = EmbeddedBroker(broker.port).start()  # in-memory: what the replay sent so far is gone
        create_topics(broker.bootstrap, config.topics())
        out, err = replay.communicate(timeout=120)
    finally:
        broker.stop()
    assert replay.returncode == 3, (out, err)  # the broker lost what it confirmed: start again from scratch
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "it lost messages" in lines[0], err


def test_a_sender_faster_than_the_broker_waits_for_it_instead_of_timing_out():
    """100,002 small messages as fast as they can be produced, with a delivery timeout of 5 s: the
    sink waits for the broker's confirmations instead of queueing them all, so none waits long.

    Unbounded, librdkafka queues up to 100,000 messages; the embedded broker confirms one record
    per batch at a few thousand messages per second here, so the last of them waited 15 s and
    more, and tens of thousands failed after 5 s with a broker that was taking every message.
    """
    from wevent.stream.runtime.kafka import MAX_UNCONFIRMED_MESSAGES, KafkaReportSink

    config = parse_config({"seed": 1, "report_partitions": 2, "stream_partitions": 1, "streams": [{
        "name": "tiny", "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 20, "domain": 4,
        "users": 2, "slot_seconds": 60.0, "start": 0.0}]})
    stream = config.stream("tiny")
    users, values = np.arange(2), np.array([1, 3])
    broker = EmbeddedBroker().start()
    try:
        create_topics(broker.bootstrap, config.topics())
        sink = KafkaReportSink(broker.bootstrap, "tiny", 2, tansu_compat=True, delivery_timeout=5.0)
        most_unconfirmed = 0
        for slot in range(1, 25_001):  # a watermark and a batch to each partition: 4 messages
            sink.send_slot(slot, stream.slot_start(slot), stream.slot_end(slot), users, values)
            most_unconfirmed = max(most_unconfirmed, sink.unconfirmed)
        sink.close()
    finally:
        broker.stop()
    assert sink.delivered == sink.messages_sent == 100_002 and sink.failed == 0
    assert 0 < most_unconfirmed <= MAX_UNCONFIRMED_MESSAGES
