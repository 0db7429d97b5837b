"""Any Kafka client property, and SASL/OAUTHBEARER, against Apache Kafka.

One node with a plain listener and an OAUTHBEARER one (Kafka's unsecured JWS tokens:
:class:`~wevent.stream.runtime.apache_kafka.KafkaCluster`'s ``oauthbearer``); the OIDC provider is
a local token endpoint issuing such tokens by the client-credentials grant
(:mod:`tests.integration.oidc_endpoint`), the stand-in for one no test can reach. Every property
here reaches the clients through a properties file only, as a managed Kafka's file would.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import numpy as np
import pytest

from wevent.core.central import BudgetAbsorption
from wevent.core.randomness import DerivedRandomness, SecretKey
from wevent.stream.runtime.apache_kafka import KafkaCluster
from wevent.stream.runtime.broker import create_topics, free_port
from wevent.stream.runtime.child_processes import WorkerProcess, wait_until, write_config
from wevent.stream.runtime.kafka import KafkaReportSink, client_config
from wevent.stream.settings import PROPERTIES_FILE_ENV, Settings
from tests.integration.conftest import release_key
from tests.integration.oidc_endpoint import TokenEndpoint
from tests.helpers import stream_config

pytestmark = [pytest.mark.integration]

START = 1_201_910_400.0
USERS, SLOTS, DOMAIN, SEED = 400, 5, 4, 23
SECRETS = {"wevent-worker": "w0rker-s3cret", "wevent-producer": "pr0ducer-s3cret", "wevent-subscriber": "sub-s3cret"}


def config(app: str):
    return stream_config(app=app, seed=SEED, report_partitions=2, name="taxi", window=4, domain=DOMAIN, users=USERS,
                         start=START)


@pytest.fixture(scope="module")
def endpoint():
    with TokenEndpoint(SECRETS) as running:
        yield running


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    with KafkaCluster(1, tmp_path_factory.mktemp("oauth-kafka"), listeners={"PLAINTEXT": "PLAINTEXT",
                                                                             "OAUTH": "SASL_PLAINTEXT"},
                      oauthbearer="OAUTH") as cluster:
        yield cluster


def java_oidc(url: str, client: str, secret: str | None = None) -> str:
    """A client's properties as a Java client takes them: the OIDC login handler and JAAS line."""
    return ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
            "sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer."
            f"OAuthBearerLoginCallbackHandler\nsasl.oauthbearer.token.endpoint.url={url}\n"
            "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \\\n"
            f"    clientId=\"{client}\" clientSecret=\"{secret or SECRETS[client]}\";\n")


def librdkafka_oidc(url: str, client: str, secret: str | None = None) -> str:
    """The same in librdkafka's names."""
    return ("security.protocol=SASL_PLAINTEXT\nsasl.mechanisms=OAUTHBEARER\nsasl.oauthbearer.method=oidc\n"
            f"sasl.oauthbearer.token.endpoint.url={url}\nsasl.oauthbearer.client.id={client}\n"
            f"sasl.oauthbearer.client.secret={secret or SECRETS[client]}\n")


def written(path, text: str):
    path.write_text(text)
    return path


def test_a_property_only_in_the_file_reaches_the_workers_clients(kafka, tmp_path):
    """client.id, given in the properties file alone, is what the broker's group description shows
    for the worker's consumer (Faust's default would be ``faust-<version>``)."""
    from confluent_kafka.admin import AdminClient

    app, client_id = "wevent-client-id", f"wevent-probe-{uuid.uuid4().hex[:8]}"
    properties = written(tmp_path / "client.properties", f"# tuning only\nclient.id = {client_id}\n")
    worker = WorkerProcess(write_config(config(app), tmp_path), kafka.bootstrap, free_port(), tmp_path / "worker.log",
                           tansu_compat=False, env={PROPERTIES_FILE_ENV: str(properties)}).start()
    admin = AdminClient(client_config(kafka.bootstrap))

    def members() -> set[str]:
        try:
            group = admin.describe_consumer_groups([app])[app].result(10)
        except Exception:  # the group does not exist until the worker joins
            return set()
        return {member.client_id for member in group.members}

    try:
        assert wait_until(lambda: members() or not worker.alive, timeout=120), worker.log_tail()
        assert members() == {client_id}, worker.log_tail()
    finally:
        worker.stop()


def test_a_worker_and_subscribe_over_oauthbearer_release_what_simulate_does(kafka, endpoint, tmp_path):
    """A real `wevent worker` (Faust: aiokafka with the token provider) given Java's form of the
    OIDC settings, the replay (librdkafka's own OIDC) and `wevent subscribe`, each through a
    properties file and the OAUTHBEARER listener only; the releases equal `wevent simulate`'s."""
    streams = config("wevent-oauth")
    create_topics(kafka.bootstrap, streams.topics())
    oauth = kafka.bootstrap_for("OAUTH")
    worker_file = written(tmp_path / "worker.properties", java_oidc(endpoint.url, "wevent-worker"))
    producer_file = written(tmp_path / "producer.properties", librdkafka_oidc(endpoint.url, "wevent-producer"))
    subscriber_file = written(tmp_path / "subscriber.properties", java_oidc(endpoint.url, "wevent-subscriber"))
    values = np.random.default_rng(SEED).integers(0, DOMAIN, (SLOTS, USERS))
    worker = WorkerProcess(write_config(streams, tmp_path), oauth, free_port(), tmp_path / "worker.log",
                           tansu_compat=False, env={PROPERTIES_FILE_ENV: str(worker_file)}).start()
    try:
        sink = KafkaReportSink(oauth, "taxi", streams.report_partitions,
                               credentials=Settings(kafka_properties_file=str(producer_file)).kafka_credentials())
        stream = streams.stream("taxi")
        for slot in range(1, SLOTS + 1):
            sink.send_slot(slot, stream.slot_start(slot), stream.slot_end(slot), np.arange(USERS), values[slot - 1])
        sink.close()
        subscribed = subprocess.run([sys.executable, "-m", "wevent.cli", "subscribe", "--bootstrap", oauth,
                                     "--kafka-properties", str(subscriber_file), "--json", "--limit", str(SLOTS),
                                     "--release-key", release_key(streams)],
                                    capture_output=True, text=True, timeout=240)
    finally:
        worker.stop()
    assert subscribed.returncode == 0, subscribed.stderr + worker.log_tail()
    got = {r["slot"]: r["release"] for r in map(json.loads, subscribed.stdout.splitlines())}
    mechanism = BudgetAbsorption(1.0, 4, DOMAIN, randomness=DerivedRandomness(SecretKey.from_seed(SEED), "taxi"))
    counts = np.stack([np.bincount(v, minlength=DOMAIN) for v in values]).astype(float)
    assert [got.get(t) for t in range(1, SLOTS + 1)] == [r.release.tolist() for r in mechanism.run(counts)]
    assert all(endpoint.requests.get(client, 0) >= 1 for client in SECRETS), endpoint.requests
    assert "AUTHENTICATION" not in worker.log_tail(200).upper(), worker.log_tail()


@pytest.mark.parametrize("command", ["subscribe", "worker"])
def test_a_client_secret_the_endpoint_refuses_is_one_line(kafka, endpoint, tmp_path, command):
    """A wrong secret: the token endpoint answers 401 and the command says so in one line (exit 2),
    before it connects to Kafka."""
    properties = written(tmp_path / "bad.properties", java_oidc(endpoint.url, "wevent-subscriber", "guess"))
    arguments = {"subscribe": ["subscribe", "--limit", "1", "--no-verify"],
                 "worker": ["worker", "--config", str(write_config(config("wevent-refused"), tmp_path)),
                            "--web-port", str(free_port())]}[command]
    done = subprocess.run([sys.executable, "-m", "wevent.cli", *arguments, "--bootstrap", kafka.bootstrap_for("OAUTH"),
                           "--kafka-properties", str(properties)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.count("\n") == 1 and "refused client 'wevent-subscriber': HTTP 401" in done.stderr, done.stderr
