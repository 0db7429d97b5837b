"""The local Apache Kafka (KRaft): installs once, starts, serves clients and Kafka's own tools,
keeps acknowledged records across a SIGKILL, and leaves no process behind."""

from __future__ import annotations

import subprocess

import pytest

from wevent.stream.runtime.apache_kafka import KafkaCluster, default_cache, install_kafka
from wevent.stream.runtime.broker import create_topics
from wevent.stream.runtime.kafka import consumer_config, producer_config

pytestmark = [pytest.mark.integration]


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    failures = []
    producer = Producer(producer_config(bootstrap, tansu_compat=False) | {"acks": "all"})
    for value in values:
        producer.produce(topic, value, on_delivery=lambda error, _: error and failures.append(error))
    assert producer.flush(60) == 0
    assert failures == []


def consume(bootstrap: str, topic: str, count: int, timeout: float = 60.0) -> list[bytes]:
    """The first ``count`` values of ``topic``, read with a fresh consumer group."""
    import time
    import uuid

    from confluent_kafka import Consumer

    consumer = Consumer(consumer_config(bootstrap, f"test-{uuid.uuid4()}"))
    consumer.subscribe([topic])
    values, deadline = [], time.monotonic() + timeout
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                values.append(message.value())
    finally:
        consumer.close()
    return values


def test_install_is_cached_with_its_marker(apache_kafka):
    home = install_kafka()
    assert home == default_cache()
    assert (home / ".installed").read_text().strip() == apache_kafka.version
    jars = {path.name for path in (home / "libs").glob("*.jar")}
    assert f"kafka_2.13-{apache_kafka.version}.jar" in jars
    assert any(name.startswith("slf4j-reload4j") for name in jars)  # logging has a binding


def test_clients_and_kafkas_own_console_consumer(apache_kafka):
    create_topics(apache_kafka.bootstrap, {"smoke": 2})
    sent = [f"record {i}".encode() for i in range(50)]
    produce(apache_kafka.bootstrap, "smoke", sent)
    assert sorted(consume(apache_kafka.bootstrap, "smoke", len(sent))) == sorted(sent)
    tool = subprocess.run(apache_kafka.java_cmd("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server",
                                                apache_kafka.bootstrap, "--topic", "smoke", "--from-beginning",
                                                "--max-messages", str(len(sent))),
                          capture_output=True, text=True, timeout=120)
    assert tool.returncode == 0, tool.stderr
    assert sorted(tool.stdout.splitlines()) == sorted(v.decode() for v in sent)


def test_a_transactional_topic_is_read_to_its_end(apache_kafka):
    """read_topic stops at each partition's high watermark, which a transaction marker (never
    delivered) can hold: committed messages all come, an aborted one does not."""
    from confluent_kafka import Producer

    from wevent.stream.runtime.subscription import read_topic

    create_topics(apache_kafka.bootstrap, {"transactional": 2})
    producer = Producer(producer_config(apache_kafka.bootstrap, tansu_compat=False) | {"transactional.id": "reader-test"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce("transactional", f"committed {i}".encode(), partition=i % 2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce("transactional", b"aborted", partition=0)
    producer.flush(30)
    producer.abort_transaction(30)
    assert sorted(read_topic(apache_kafka.bootstrap, "transactional")) == [f"committed {i}".encode() for i in range(5)]


@pytest.mark.slow
def test_durable_single_node_keeps_acknowledged_records_across_sigkill(tmp_path):
    with KafkaCluster(1, tmp_path / "kafka") as cluster:
        create_topics(cluster.bootstrap, {"durable": 3})
        sent = [f"before {i}".encode() for i in range(200)]
        produce(cluster.bootstrap, "durable", sent)
        process = cluster.processes[0]
        cluster.kill(0)
        assert process.returncode == -9
        cluster.start(0)
        more = [f"after {i}".encode() for i in range(100)]
        produce(cluster.bootstrap, "durable", more)
        assert sorted(consume(cluster.bootstrap, "durable", 300)) == sorted(sent + more)
    assert cluster.processes[0].poll() is not None
    assert (tmp_path / "kafka" / "node0" / "data" / "meta.properties").exists()  # a given directory stays


@pytest.mark.slow
def test_three_nodes_stop_without_leftovers(kafka_cluster3):
    cluster = kafka_cluster3()
    assert len(cluster.bootstrap.split(",")) == 3
    create_topics(cluster.bootstrap, {"replicated": 4})
    produce(cluster.bootstrap, "replicated", [b"x"] * 10)
    cluster.stop()
    assert all(process.poll() is not None for process in cluster.processes)
