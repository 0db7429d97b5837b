"""A real `wevent devices` process killed with SIGKILL and restarted keeps its users' spend."""

from __future__ import annotations

import time

import numpy as np
import pytest

from pipeline.core.data import UserValues
from pipeline.stream.broker import create_topics
from pipeline.stream.codecs import Envelope, request_seal, seal
from pipeline.stream.config import parse_config
from pipeline.stream.kafka import consumer_config, producer_config
from pipeline.stream.processes import DevicesProcess, wait_until, write_config
from pipeline.stream.subscription import read_topic
from tests.integration.test_central_pipeline import START, categorical_feed

pytestmark = [pytest.mark.integration]

USERS, SLOTS, DOMAIN, WINDOW = 500, 20, 4, 10
GROUP = "wevent-devices-kept-0of1"  # the consumer group `wevent devices` joins for shard 0/1 of "kept"


def answers(bootstrap) -> dict[tuple[int, int], list[dict]]:
    found: dict[tuple[int, int], list[dict]] = {}
    for value in read_topic(bootstrap, "ldp.reports"):
        envelope = Envelope.decode(value)
        found.setdefault((envelope["slot"], envelope["phase"]), []).append(envelope.fields)
    return found


def committed(bootstrap) -> int:
    """The fleet's committed offset on ldp.requests (what a restarted fleet resumes from)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(consumer_config(bootstrap, group=GROUP))
    try:
        offsets = consumer.committed([TopicPartition("ldp.requests", 0)], timeout=10)
        return max(offsets[0].offset, 0)
    finally:
        consumer.close()


def test_a_fleet_killed_and_restarted_keeps_its_users_spend(broker, tmp_path):
    config = parse_config({"seed": 5, "report_partitions": 1, "stream_partitions": 1, "streams": [{
        "name": "kept", "model": "local", "mechanism": "lpa", "epsilon": 1.0, "window": WINDOW, "domain": DOMAIN,
        "users": USERS, "slot_seconds": 60, "start": START, "options": {"block_size": 64}}]})
    create_topics(broker.bootstrap, config.topics())
    dump = tmp_path / "values.npz"
    UserValues(categorical_feed(users=USERS, slots=SLOTS, domain=DOMAIN, seed=6), DOMAIN, slot_seconds=60,
               start=START).save(dump)
    config_path = write_config(config, tmp_path)
    ledger = tmp_path / "ledger"

    def start_fleet(n):
        return DevicesProcess(config_path, "kept", dump, broker.bootstrap, tmp_path / f"devices{n}.log",
                              tansu_compat=True, ledger_dir=ledger).start()

    from confluent_kafka import Producer

    producer = Producer(producer_config(broker.bootstrap, tansu_compat=True))
    sent = 0

    def ask(slot, phase, users, epsilon):
        nonlocal sent
        request = {"stream": "kept", "slot": slot, "phase": phase, "epsilon": epsilon, "oracle": "grr",
                   "domain_size": DOMAIN, "population": USERS, "users": np.asarray(users, dtype=np.int64),
                   "bound": None}
        signed = seal("ldp.requests", "kept", Envelope("request", request).encode(), request_seal(config.noise_key()))
        producer.produce("ldp.requests", signed, key=b"kept")
        producer.flush()
        sent += 1

    fleet = start_fleet(0)
    try:
        for slot in (1, 2, 3):  # users 10..39 spend 0.6 each, ten a slot
            ask(slot, 1, range(10 * slot, 10 * slot + 10), 0.6)
        assert wait_until(lambda: len(answers(broker.bootstrap)) == 3, 60), fleet.log_tail()
        # Killed once the requests are behind its committed offset: a restarted fleet does not read
        # them again, so only its ledger file can remember what the users spent.
        assert wait_until(lambda: committed(broker.bootstrap) == sent, 60), fleet.log_tail()
        fleet.kill()
        fleet = start_fleet(1)
        ask(4, 1, [10, 25, 35, 45], 0.6)  # users 10, 25, 35 would reach 1.2 in the window: refused
        ask(2, 1, range(20, 30), 0.9)  # another request for a charged (slot, phase): refused
        ask(3, 1, range(30, 40), 0.6)  # slot 3's request again, byte-identical: the same reports
        # The requests are read in order: once the repeat is answered, the others have been handled.
        assert wait_until(lambda: len(answers(broker.bootstrap).get((3, 1), [])) == 2, 60), fleet.log_tail()
        got = answers(broker.bootstrap)
    finally:
        fleet.stop()
    assert [int(u) for a in got[(4, 1)] for u in a["users"]] == [45]
    first, again = got[(3, 1)]
    assert np.array_equal(first["users"], again["users"]) and np.array_equal(first["reports"], again["reports"])
    assert len(got[(2, 1)]) == 1
    assert "was charged for another request" in fleet.log_path.read_text()
