"""wevent on an Apache Kafka with TLS, SASL/SCRAM-SHA-512 and ACLs: each role works with its
credentials and is refused outside its grants; clients without valid credentials are refused.

Every client here is configured the way the app configures its own, from the WEVENT_KAFKA_*
variables (:class:`wevent.stream.settings.KafkaCredentials`).
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import numpy as np
import pytest

from wevent.core.central import BudgetAbsorption
from wevent.core.randomness import DerivedRandomness, SecretKey
from wevent.stream.config import parse_config
from wevent.stream.runtime.kafka import KafkaReportSink, consumer_config, producer_config
from wevent.stream.runtime.child_processes import WorkerProcess, wait_until, write_config
from wevent.stream.runtime.broker import free_port
from wevent.stream.runtime.subscription import Releases
from tests.integration.secure_kafka import credentials, environment, start_secure_kafka

pytestmark = [pytest.mark.integration]

START = 1_201_910_400.0
USERS, SLOTS, DOMAIN, SEED = 500, 6, 4, 21
CONFIG = parse_config({"seed": SEED, "report_partitions": 2, "stream_partitions": 1, "streams": [{
    "name": "taxi", "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 4, "domain": DOMAIN,
    "users": USERS, "slot_seconds": 60, "start": START}]})
MARKER = b'{"probe":1}'


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    secure = start_secure_kafka(tmp_path_factory.mktemp("secure-kafka"), CONFIG.topics())
    try:
        _write_markers(secure)
        yield secure
    finally:
        secure.cluster.stop()


def _write_markers(secure) -> None:
    """One record in every topic (by the admin), for the roles to read or be refused."""
    from confluent_kafka import Producer

    producer = Producer(secure.admin_config())
    for topic in CONFIG.topics():
        producer.produce(topic, MARKER, partition=0)
    assert producer.flush(30) == 0


def produce(bootstrap: str, env: dict, topic: str) -> str | None:
    """None once the broker took a record on ``topic``, else the error's name."""
    from confluent_kafka import Producer

    producer = Producer(producer_config(bootstrap, tansu_compat=False, credentials=credentials(env))
                        | {"message.timeout.ms": 20_000})
    outcome = []
    producer.produce(topic, MARKER, partition=0, on_delivery=lambda error, _: outcome.append(error))
    producer.flush(30)
    assert outcome, f"no delivery report for {topic}"
    return None if outcome[0] is None else outcome[0].name()


def consume(bootstrap: str, env: dict, topic: str, group: str) -> bytes | str:
    """The first record of ``topic`` read in consumer group ``group`` (a fresh one after a
    trailing "-": the groups a role may use by prefix), else the error's name."""
    from confluent_kafka import Consumer, KafkaError

    consumer = Consumer(consumer_config(bootstrap, group + uuid.uuid4().hex if group.endswith("-") else group,
                                        credentials=credentials(env)))
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or (message.error() and message.error().code() == KafkaError._PARTITION_EOF):
                continue
            return message.error().name() if message.error() else message.value()
        return "no record within 30 s"
    finally:
        consumer.close()


def refused(bootstrap: str, env: dict, timeout: float = 30.0) -> list[str]:
    """The errors a client gets from the broker at ``bootstrap`` before any metadata: [] if it connects.

    A TLS and SCRAM handshake with a JVM broker on a loaded machine can take several seconds, so
    the client asks again until it connects, until the broker has told it why not (an error), or
    for ``timeout`` seconds."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    errors = []
    config = consumer_config(bootstrap, credentials=credentials(env)) | {"error_cb": lambda error: errors.append(error.name())}
    client = AdminClient(config)
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.list_topics(timeout=4)
            return []
        except KafkaException as exc:
            client.poll(1)  # serves the error callbacks
            if errors or time.monotonic() > deadline:
                return errors + [exc.args[0].name()]


def test_each_role_works_within_its_grants_and_only_there(kafka):
    sasl_ssl, sasl_plain, mtls = kafka.bootstrap("SASL_SSL"), kafka.bootstrap("SASL_PLAINTEXT"), kafka.bootstrap("MTLS")
    denied = "TOPIC_AUTHORIZATION_FAILED"
    producer = kafka.scram_env("producer")
    assert produce(sasl_ssl, producer, "reports") is None
    assert produce(sasl_ssl, producer, "releases") == denied
    # it has no consumer group either: refused for the one or the other
    assert consume(sasl_ssl, producer, "reports", "wevent-probe") in (denied, "GROUP_AUTHORIZATION_FAILED")

    device = kafka.scram_env("device", protocol="SASL_PLAINTEXT")  # SASL without TLS
    assert consume(sasl_plain, device, "ldp.requests", "wevent-devices-") == MARKER
    assert produce(sasl_plain, device, "ldp.reports") is None
    assert produce(sasl_plain, device, "reports") == denied
    assert consume(sasl_plain, device, "releases", "wevent-devices-") == denied
    assert consume(sasl_plain, device, "ldp.requests", "wevent") == "GROUP_AUTHORIZATION_FAILED"

    for env, bootstrap in ((kafka.scram_env("subscriber"), sasl_ssl), (kafka.tls_env("subscriber-tls"), mtls)):
        assert consume(bootstrap, env, "releases", "wevent-subscribe-") == MARKER
        assert consume(bootstrap, env, "audit", "wevent-subscribe-") == MARKER
        assert consume(bootstrap, env, "reports", "wevent-subscribe-") == denied
        assert consume(bootstrap, env, "ldp.reports", "wevent-subscribe-") == denied
        assert produce(bootstrap, env, "releases") == denied


def test_clients_without_valid_credentials_are_refused(kafka):
    sasl_ssl, mtls = kafka.bootstrap("SASL_SSL"), kafka.bootstrap("MTLS")
    assert refused(sasl_ssl, kafka.scram_env("subscriber")) == []
    assert refused(mtls, kafka.tls_env("subscriber-tls")) == []
    assert "_AUTHENTICATION" in refused(sasl_ssl, kafka.scram_env("subscriber", password="guess"))
    assert refused(sasl_ssl, kafka.scram_env(None))  # TLS, but no SASL
    assert refused(mtls, kafka.tls_env(None))  # no client certificate
    assert refused(sasl_ssl, {"WEVENT_KAFKA_SECURITY_PROTOCOL": "PLAINTEXT"})
    # the system's CAs do not know the test's CA: the broker's certificate is refused
    assert refused(sasl_ssl, {k: v for k, v in kafka.scram_env("subscriber").items() if k != "WEVENT_KAFKA_SSL_CAFILE"})


def test_bad_settings_are_one_line_before_any_connection(kafka, tmp_path):
    env = {"WEVENT_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "WEVENT_KAFKA_USERNAME": "subscriber",
           "WEVENT_KAFKA_PASSWORD": "x", "WEVENT_KAFKA_SSL_CAFILE": str(kafka.authority.ca_file)}
    with environment(env):
        import os

        result = subprocess.run([sys.executable, "-m", "wevent.cli", "subscribe", "--bootstrap",
                                 kafka.bootstrap("SASL_PLAINTEXT"), "--limit", "1", "--no-verify"], capture_output=True,
                                text=True,
                                env=dict(os.environ), timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "WEVENT_KAFKA_SSL_CAFILE" in result.stderr, result.stderr


def test_a_worker_with_its_credentials_releases_a_stream(kafka, tmp_path):
    """A real `wevent worker` over SASL_SSL as the worker role; the replay as the producer role;
    the releases read as the subscriber role equal `wevent simulate`'s."""
    rng = np.random.default_rng(SEED)
    values = rng.integers(0, DOMAIN, (SLOTS, USERS))
    worker = WorkerProcess(write_config(CONFIG, tmp_path), kafka.bootstrap("SASL_SSL"), free_port(),
                           tmp_path / "worker.log", tansu_compat=False, env=kafka.scram_env("worker"))
    worker.start()
    try:
        sink = KafkaReportSink(kafka.bootstrap("SASL_SSL"), "taxi", CONFIG.report_partitions,
                               credentials=credentials(kafka.scram_env("producer")))
        stream = CONFIG.stream("taxi")
        for slot in range(1, SLOTS + 1):
            sink.send_slot(slot, stream.slot_start(slot), stream.slot_end(slot), np.arange(USERS), values[slot - 1])
        sink.close()
        releases = Releases(kafka.bootstrap("SASL_SSL"), streams=["taxi"],
                            credentials=credentials(kafka.scram_env("subscriber")))
        got = {}
        with releases:
            wait_until(lambda: got.update({r.slot: r for r in releases.follow(idle_timeout=1.0)}) or len(got) >= SLOTS
                       or not worker.alive, timeout=120)
        assert sorted(got) == list(range(1, SLOTS + 1)), worker.log_tail()
    finally:
        worker.stop()
    mechanism = BudgetAbsorption(1.0, 4, DOMAIN, randomness=DerivedRandomness(SecretKey.from_seed(SEED), "taxi"))
    counts = np.stack([np.bincount(v, minlength=DOMAIN) for v in values]).astype(float)
    assert [got[t].release for t in range(1, SLOTS + 1)] == [r.release.tolist() for r in mechanism.run(counts)]
    assert "AUTHORIZATION" not in worker.log_tail(200).upper(), worker.log_tail()
