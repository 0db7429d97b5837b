"""What a worker's /readyz sees, checked against a real broker."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from wevent.stream.runtime import prometheus as metrics
from wevent.stream.runtime.broker import EmbeddedBroker, create_topics
from wevent.stream.runtime.health import BrokerWatch
from wevent.stream.runtime.kafka import consumer_config, producer_config
from tests.helpers import stream_config

pytestmark = [pytest.mark.integration]

STALL = 1.0


class Clock:
    """Seconds that pass only when the test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def config(name: str):
    return stream_config(app=f"wevent-{name}", report_partitions=2, stream_partitions=2, name=name, window=20)


def reasons(problems) -> list[str]:
    return [p["reason"] for p in problems]


def test_stalled_consumer_and_stalled_stream_then_progress(broker):
    # A stream name per broker: the gauge the watch reads lives as long as this process, and the
    # run on the other broker must not find it set already.
    name = f"watched-{broker.kind}"
    cfg = config(name)
    create_topics(broker.bootstrap, cfg.topics())
    clock = Clock()
    watch = BrokerWatch(broker.bootstrap, cfg, STALL, clock)
    p = watch.stream_partition[name]
    owned = {("slots", p), ("dissimilarity", p), ("reports", 0)}
    try:
        assert watch.check(owned) == []
        producer = Producer(producer_config(broker.bootstrap, tansu_compat=broker.tansu_compat))
        for _ in range(3):
            producer.produce("slots", b"slot", partition=p)
        assert producer.flush(10) == 0

        clock.now = 0.5
        assert watch.check(owned) == []  # input has just arrived
        clock.now = 0.5 + STALL + 0.1
        problems = watch.check(owned)
        assert reasons(problems) == ["consumer stalled", "stream stalled"], problems
        assert problems[0]["partition"] == f"slots[{p}]" and problems[0]["lag"] == 3
        assert problems[1]["stream"] == name

        group = Consumer(consumer_config(broker.bootstrap, cfg.app))
        group.commit(offsets=[TopicPartition("slots", p, 3)], asynchronous=False)  # the worker took the slots...
        group.close()
        clock.now += 0.5
        assert reasons(watch.check(owned)) == ["stream stalled"]  # ...but released nothing
        metrics.last_released_slot.labels(name).set(1)
        clock.now += 0.5
        assert watch.check(owned) == []
    finally:
        watch.close()


def test_an_unreachable_broker_then_a_broker_that_lost_everything(tmp_path):
    cfg = config("lost")
    broker = EmbeddedBroker().start()
    clock = Clock()
    watch = None
    try:
        create_topics(broker.bootstrap, cfg.topics())
        watch = BrokerWatch(broker.bootstrap, cfg, STALL, clock)
        assert watch.check(set()) == [] and watch.lost is None
        broker.process.kill()
        broker.process.wait()
        assert reasons(watch.check(set())) == ["broker unreachable"]
        broker = EmbeddedBroker(broker.port).start()  # in-memory: empty
        assert reasons(watch.check(set())) == ["broker lost state"] and watch.lost is None  # seen once
        problems = watch.check(set())
        assert watch.lost and "are gone" in watch.lost, problems
    finally:
        if watch:
            watch.close()
        broker.stop()
