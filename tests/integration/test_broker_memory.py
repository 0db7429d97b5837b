"""The embedded broker's memory is bounded: past its limit it is stopped, with one line saying why.

tansu keeps every record in memory and drops none (it ignores topic retention and fails
DeleteRecords), so the bound is the watchdog's limit, not retention.
"""

from __future__ import annotations

import os

import pytest
from confluent_kafka import Producer

from wevent.errors import UsageError
from wevent.stream.runtime.broker import EmbeddedBroker, create_topics
from wevent.stream.settings import MEMORY_LIMIT_ENV, Settings
from wevent.stream.runtime.child_processes import wait_until

CHUNK = 10  # MiB written between two checks
MESSAGE = os.urandom(100 * 1024)  # incompressible, so the broker holds every byte


def write(broker: EmbeddedBroker, mebibytes: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "batch.num.messages": 1, "log_level": 0})
    for _ in range(mebibytes * 10):
        producer.produce("reports", MESSAGE, partition=0)
        producer.poll(0)
    producer.flush(5)  # a broker the watchdog stopped mid-write never acknowledges


@pytest.mark.integration
def test_the_watchdog_stops_the_broker_at_its_memory_limit(capsys):
    limit = 100  # MiB; an empty tansu holds about 20
    broker = EmbeddedBroker(memory_limit_mb=limit)
    with broker:
        create_topics(broker.bootstrap, {"reports": 1})
        write(broker, CHUNK)
        assert broker.alive and broker.failure is None  # below the limit: untouched
        for _ in range(3 * limit // CHUNK):  # three times what the limit holds, if it never acted
            if not broker.alive:
                break
            write(broker, CHUNK)
            if broker.resident_mb() >= limit:
                wait_until(lambda: not broker.alive, timeout=10)
        assert not broker.alive
        assert f"its memory limit of {limit} MiB ({MEMORY_LIMIT_ENV})" in broker.failure
    assert capsys.readouterr().err == ""  # the reason is the owner's to print (wevent run: one line)


def test_the_limit_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "512")
    limit = Settings.from_environ(os.environ).broker_memory_limit_mb()
    assert limit == 512
    assert EmbeddedBroker(memory_limit_mb=limit).memory_limit_mb == 512
    assert EmbeddedBroker(watch=False).memory_limit_mb is None
    for bad in ("0", "-5", "lots"):
        monkeypatch.setenv(MEMORY_LIMIT_ENV, bad)
        with pytest.raises(UsageError, match=MEMORY_LIMIT_ENV):
            Settings.from_environ(os.environ).broker_memory_limit_mb()


@pytest.mark.integration
@pytest.mark.tansu_only("it checks that tansu cannot delete records; Apache Kafka can")
def test_tansu_cannot_drop_records_so_the_limit_is_the_bound(broker):
    """If a newer tansu drops records below an offset, trimming what every group has read can
    replace the stop at the limit: this test fails then, to say so."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    create_topics(broker.bootstrap, {"reports": 1})
    write(broker, 1)
    futures = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0}).delete_records(
        [TopicPartition("reports", 0, 5)], request_timeout=5)
    for future in futures.values():
        # the broker's handler panics and drops the connection: an error, or no answer at all
        with pytest.raises((KafkaException, TimeoutError)):
            future.result(8)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "probe", "log_level": 0})
    try:
        assert consumer.get_watermark_offsets(TopicPartition("reports", 0), timeout=10) == (0, 10)
    finally:
        consumer.close()
