"""Exactly-once on Apache Kafka, refused on tansu, and what it buys: how many duplicate
(stream, slot) records a ``read_committed`` consumer of ``releases`` sees when workers are
SIGKILLed, with ``at_least_once`` and with ``exactly_once``.

Under at-least-once a worker that takes a stream over reads M2's last applied input again and
re-emits its release, identical to the first copy. Under exactly-once M2 first reads which
releases committed transactions hold on ``releases`` and sends only those they do not
(:class:`wevent.stream.agents.publish.PublicationProcessor`): a ``read_committed`` consumer sees
every (stream, slot) once.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from wevent.stream.runtime.broker import EmbeddedBroker, create_topics, free_port
from wevent.stream.config import parse_config
from wevent.stream.runtime.child_processes import wait_until, write_config
from wevent.stream.runtime.kafka import consumer_config
from wevent.stream.wire.topics import MEASUREMENTS, RELEASES, REPORTS, SLOTS
from tests.integration.kafka_runs import KafkaRun, check_releases, duplicates

pytestmark = [pytest.mark.integration]

KILLS = 2  # a worker SIGKILLed, and another started, in every third of the slots


def test_exactly_once_on_tansu_is_refused_in_one_line(tmp_path):
    config = parse_config({"seed": 1, "processing_guarantee": "exactly_once", "streams": [{
        "name": "s", "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 5, "domain": 4, "users": 10,
        "slot_seconds": 60, "start": 0}]})
    with EmbeddedBroker() as broker:
        create_topics(broker.bootstrap, config.topics())
        done = subprocess.run([sys.executable, "-m", "wevent.cli", "worker", "--config",
                               str(write_config(config, tmp_path)), "--bootstrap", broker.bootstrap, "--tansu-compat",
                               "--web-port", str(free_port())],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "needs Kafka transactions" in done.stderr, done.stderr


def inputs_committed(run: KafkaRun) -> bool:
    """Whether the workers' consumer group has committed every message on the topics its central
    streams' agents read (its committed offsets at their end offsets)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(consumer_config(run.bootstrap) | {"group.id": run.config.app})  # reads offsets, never joins
    try:
        inputs = [TopicPartition(topic, p) for topic in (REPORTS, SLOTS, MEASUREMENTS, RELEASES)
                  for p in range(run.config.topics()[topic])]
        # an empty partition has nothing to commit (its committed offset stays negative: none)
        return all(tp.offset >= end for tp in consumer.committed(inputs, timeout=30)
                   if (end := consumer.get_watermark_offsets(tp, timeout=10, cached=False)[1]) > 0)
    finally:
        consumer.close()


@pytest.fixture
def kafka(apache_kafka):
    from tests.integration.conftest import KafkaBroker

    KafkaBroker(apache_kafka).empty()
    return apache_kafka


@pytest.mark.slow
@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_a_takeover_after_the_commit_publishes_nothing_again(kafka, tmp_path, guarantee):
    """A worker SIGKILLed once every release it sent is committed: its successor reads each
    stream's last measurement again. At-least-once re-emits each stream's last release (one
    identical duplicate per stream, by design); exactly-once finds them committed and sends none."""
    run = KafkaRun(kafka.bootstrap, tmp_path, streams=2, partitions=2, slots=8, guarantee=guarantee)
    try:
        worker = run.start_worker()
        run.send(5)
        committed = run.read_releases(slots=5)  # read_committed: every release so far is committed
        if guarantee == "at_least_once":  # its inputs' offsets too, which Faust commits every few seconds
            assert wait_until(lambda: inputs_committed(run), 60, 1.0), run.logs()
        worker.kill()
        run.start_worker()
        run.send(run.slots - run.sent)  # after the successor's replays, in each partition's order
        run.close()
        records = run.read_releases()
    finally:
        run.stop()
    assert sorted({(r.stream, r.slot) for r in committed}) == [(n, t) for n in sorted(run.names) for t in range(1, 6)]
    assert duplicates(committed) == 0
    check_releases(run, records)
    assert duplicates(records) == (len(run.names) if guarantee == "at_least_once" else 0), run.logs()


@pytest.mark.slow
@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_worker_kills_change_no_release(kafka, tmp_path, guarantee):
    """Every release equals an uninterrupted run's, under either guarantee, after workers killed
    while they write releases; under exactly-once none is seen twice."""
    run = KafkaRun(kafka.bootstrap, tmp_path, streams=2, partitions=2, slots=12, guarantee=guarantee)
    try:
        worker = run.start_worker()
        third = run.slots // (KILLS + 1)
        for _ in range(KILLS):
            # Killed while it writes releases: after the first new one, before it can commit them all.
            written = run.releases_written()
            run.send(third)
            assert wait_until(lambda: run.releases_written() > written, 120), run.logs()
            worker.kill()
            worker = run.start_worker()
        run.send(run.slots - run.sent)
        run.close()
        # A re-emitted release precedes its partition's last slot (one live worker writes each
        # partition in slot order), so the usual short idle wait after the last slot sees them all.
        records = run.read_releases()
    finally:
        run.stop()
    check_releases(run, records)  # duplicates included: each equals the uninterrupted run's release
    print(f"{guarantee}: {duplicates(records)} duplicate (stream, slot) records after {KILLS} worker kills")
    if guarantee == "exactly_once":
        assert duplicates(records) == 0, run.logs()
