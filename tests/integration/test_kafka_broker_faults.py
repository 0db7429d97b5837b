"""Broker faults on Apache Kafka: one of three brokers (replication 3, min.insync.replicas 2,
acks=all) SIGKILLed mid-stream and restarted; the single broker of a durable one-node cluster
SIGKILLed and restarted. Nothing acknowledged is lost, no release changes, and the worker
carries on by itself."""

from __future__ import annotations

import time

import pytest

from wevent.stream.runtime.apache_kafka import KafkaCluster
from wevent.stream.runtime.child_processes import wait_until
from tests.integration.kafka_runs import KafkaRun, check_releases, duplicates

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OUTAGE = 10.0  # seconds a killed broker stays down


def ride_out(run: KafkaRun, cluster: KafkaCluster, node: int) -> list:
    """Send a third of the slots, kill ``node``, send the next third while it is down (unless it
    is the only one), restart it, send the rest; every release record read back."""
    worker = run.start_worker()
    third = run.slots // 3
    run.send(third)
    # Mid-stream: the worker is up and has released the first third.
    assert wait_until(lambda: run.releases_written() >= third * len(run.names), 120), run.logs()
    cluster.kill(node)
    if cluster.nodes > 1:
        run.send(third)  # acks=all still succeeds: two in-sync replicas remain
    time.sleep(OUTAGE)
    cluster.start(node)
    run.send(run.slots - run.sent)
    run.close()
    records = run.read_releases()
    check_releases(run, records)
    assert worker.alive, run.logs()  # it rode out the outage by itself
    return records


def test_one_of_three_brokers_killed_and_restarted(kafka_cluster3, tmp_path):
    cluster = kafka_cluster3(extra_properties={"min.insync.replicas": 2})
    run = KafkaRun(cluster.bootstrap, tmp_path, streams=2, partitions=2, slots=12, replication=3)
    try:
        records = ride_out(run, cluster, node=1)
    finally:
        run.stop()
    print(f"3 brokers, one killed: {duplicates(records)} duplicate (stream, slot) records")


def test_the_single_durable_broker_killed_and_restarted(tmp_path):
    with KafkaCluster(1, tmp_path / "kafka") as cluster:
        run = KafkaRun(cluster.bootstrap, tmp_path, streams=2, partitions=2, slots=12)
        try:
            records = ride_out(run, cluster, node=0)
        finally:
            run.stop()
    print(f"1 durable broker, killed: {duplicates(records)} duplicate (stream, slot) records")
