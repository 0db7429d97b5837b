"""A worker's fetch hands over only the partitions Faust reads, and none while Faust reads none.

A restarted worker holds every source partition until it is sought, so Faust's set of partitions
to read is empty for the time of the seeks; Faust pauses everything at a rebalance too. aiokafka
took an empty set for "every partition": a fetch that answered then handed Faust the held
partitions' records, which Faust dropped, with aiokafka's position past them. The seeks were
undone and the worker never read those inputs again (a crash-and-restart run that stopped
releasing). Here a real broker answers a real aiokafka consumer through the worker's fetch.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from wevent.bench.crash import sample_values, trial_config
from wevent.stream.runtime import worker
from wevent.stream.runtime.broker import create_topics
from wevent.stream.runtime.kafka import producer_config
from wevent.stream.settings import Settings
from wevent.topologies.app import build_app

pytestmark = [pytest.mark.integration]

HELD, READ = TopicPartition("held", 0), TopicPartition("held", 1)


def produce(broker, partition: int, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer(producer_config(broker.bootstrap, tansu_compat=broker.tansu_compat))
    for n in range(count):
        producer.produce("held", f"record {n}".encode(), partition=partition)
    assert producer.flush(30) == 0


async def buffered(client: AIOKafkaConsumer, tp: TopicPartition, timeout: float = 30.0) -> None:
    """Until aiokafka's own background fetch holds records of ``tp`` (fetched, not handed over)."""
    deadline = time.monotonic() + timeout
    while tp not in client._fetcher._records:
        assert time.monotonic() < deadline, f"aiokafka fetched nothing of {tp} in {timeout:g} s"
        await asyncio.sleep(0.05)


def test_a_fetch_hands_over_no_partition_faust_does_not_read(broker, monkeypatch):
    monkeypatch.setattr(worker, "setup_prometheus_sensors", lambda app, **kwargs: None)  # once per process
    create_topics(broker.bootstrap, {"held": 2})
    produce(broker, HELD.partition, 5)
    fetch = build_app(trial_config(sample_values(4), seed=1), broker.bootstrap, Settings()).consumer._thread._fetch_records

    async def scenario() -> tuple[dict, int, dict]:
        client = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                                  fetch_max_wait_ms=100)
        await client.start()
        try:
            client.assign([HELD, READ])
            client.seek(HELD, 0)
            client.seek(READ, 0)
            await buffered(client, HELD)
            reading = {READ}  # HELD is held until sought
            waiting = asyncio.ensure_future(fetch(client, reading, timeout=3.0))
            await asyncio.sleep(0.3)
            reading.clear()  # everything paused while the fetch waits
            await asyncio.get_running_loop().run_in_executor(None, produce, broker, READ.partition, 1)
            while_paused = await waiting
            position = await client.position(HELD)
            reading.add(HELD)  # sought, then read
            return while_paused, position, await fetch(client, reading, timeout=10.0)
        finally:
            await client.stop()

    while_paused, position, once_read = asyncio.run(scenario())
    assert while_paused == {}, {tp: [r.offset for r in records] for tp, records in while_paused.items()}
    assert position == 0  # nothing consumed: the records are still to be handed over
    assert [record.offset for record in once_read[HELD]] == [0, 1, 2, 3, 4]
    assert READ not in once_read
