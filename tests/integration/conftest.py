"""Real-broker fixtures: the embedded tansu broker or Apache Kafka, and `wevent worker` processes.

Every test that takes ``broker`` (or ``cluster_factory``) runs twice: on a fresh tansu broker,
with the clients' tansu workarounds (``tansu_compat``: one record per batch), and on the
session's Apache Kafka, emptied of topics and consumer groups first, with normal clients (batched,
lz4). A test marked ``tansu_only`` (its reason given) runs on tansu alone, one marked ``kafka_only``
on Kafka alone. Every worker a test
starts, on either broker, uses a consumer-group session of :data:`TEST_SESSION_SECONDS`: on Apache
Kafka, Faust's default of 60 s would hold a SIGKILLed worker's partitions for a minute.
"""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import KafkaException

from wevent.stream.runtime.broker import EmbeddedBroker, ask_again, create_topics, free_port
from wevent.stream.runtime.child_processes import WorkerProcess, write_config


class TansuBroker(EmbeddedBroker):
    """The embedded broker, as a test's ``broker``: clients need the tansu workarounds."""

    kind = "tansu"
    tansu_compat = True


class KafkaBroker:
    """The session's Apache Kafka as a test's ``broker``: normal clients, nothing left by other tests."""

    kind = "kafka"
    tansu_compat = False

    def __init__(self, cluster) -> None:
        self.cluster = cluster

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def empty(self, timeout: float = 60.0) -> None:
        """Delete every topic and consumer group other tests left; restart the broker empty when a
        group still has members (a SIGKILLed worker's stay until its session times out). A request
        the client loses to a transient failure is sent again."""
        ask_again(self._empty, timeout)

    def _empty(self, timeout: float) -> None:
        from confluent_kafka.admin import AdminClient

        from wevent.stream.runtime.kafka import client_config

        admin = AdminClient(client_config(self.bootstrap))
        groups = [g.group_id for g in admin.list_consumer_groups().result(timeout).valid]
        try:
            for future in (admin.delete_consumer_groups(groups).values() if groups else []):
                try:
                    future.result(timeout)
                except KafkaException as exc:  # gone since it was listed, or deleted by an interrupted request
                    if exc.args[0].name() != "GROUP_ID_NOT_FOUND":
                        raise
        except Exception as exc:
            if "NON_EMPTY_GROUP" not in str(exc):
                raise
            self.cluster.reset()
            return
        topics = [t for t in admin.list_topics(timeout=timeout).topics if not t.startswith("__")]
        for future in (admin.delete_topics(topics).values() if topics else []):
            try:
                future.result(timeout)
            except KafkaException as exc:  # deleted by the request a transient failure interrupted
                if exc.args[0].name() != "UNKNOWN_TOPIC_OR_PART":
                    raise
        deadline = time.monotonic() + timeout
        while any(not t.startswith("__") for t in admin.list_topics(timeout=timeout).topics):
            assert time.monotonic() < deadline, "Kafka still lists deleted topics"
            time.sleep(0.1)


def release_key(config) -> str:
    """The release public key (hex) that readers verify ``config``'s workers' releases with (its
    seed stands in for the server's key)."""
    from wevent.stream.settings import Settings
    from wevent.stream.wire.seals import release_seal

    return release_seal(Settings().noise_key(config)).public_hex


def compat_flags(broker) -> list[str]:
    """The command-line flags of a `wevent` client of ``broker``."""
    return ["--tansu-compat"] if broker.tansu_compat else []


TEST_SESSION_SECONDS = 10  # what tansu workers use anyway; Apache Kafka accepts 6 s and more


@pytest.fixture(autouse=True, scope="session")
def short_worker_sessions():
    """`wevent worker` children (WEVENT_SESSION_SECONDS) hand a killed worker's partitions on
    after :data:`TEST_SESSION_SECONDS`, as they do on tansu."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WEVENT_SESSION_SECONDS", str(TEST_SESSION_SECONDS))
        yield


def pytest_generate_tests(metafunc):
    if "broker_kind" not in metafunc.fixturenames:
        return
    tansu_only = metafunc.definition.get_closest_marker("tansu_only")
    kafka_only = metafunc.definition.get_closest_marker("kafka_only")
    metafunc.parametrize("broker_kind", ["tansu"] if tansu_only else ["kafka"] if kafka_only else ["tansu", "kafka"])


@pytest.fixture
def broker(broker_kind, request):
    if broker_kind == "tansu":
        with TansuBroker() as b:
            yield b
    else:
        kafka = KafkaBroker(request.getfixturevalue("apache_kafka"))
        kafka.empty()
        yield kafka


class Cluster:
    """A broker plus worker processes running one config; workers are stopped at teardown."""

    def __init__(self, broker, config, tmp_path: Path) -> None:
        self.broker = broker
        self.config = config
        self.tmp_path = tmp_path
        self.config_path = write_config(config, tmp_path)
        self.workers: list[WorkerProcess] = []
        create_topics(broker.bootstrap, config.topics(), replication=config.replication_factor)

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    @property
    def tansu_compat(self) -> bool:
        return self.broker.tansu_compat

    def start_worker(self) -> WorkerProcess:
        n = len(self.workers)
        # The tests count accepted and refused reports, which a worker exports only when asked
        # (test_worker_metrics_raw_data checks the default).
        worker = WorkerProcess(self.config_path, self.bootstrap, free_port(), self.tmp_path / f"worker{n}.log",
                               tansu_compat=self.tansu_compat, datadir=self.tmp_path / f"data{n}",
                               report_counts=True).start()
        self.workers.append(worker)
        return worker

    def metrics(self, worker: WorkerProcess) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{worker.web_port}/metrics", timeout=10) as response:
            return response.read().decode()

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {w.log_path.name}\n{w.log_tail(40)}" for w in self.workers)


@pytest.fixture
def cluster_factory(broker, tmp_path):
    clusters = []

    def make(config):
        cluster = Cluster(broker, config, tmp_path)
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        cluster.stop()


def metric_value(text: str, name: str, **labels) -> float:
    """The value of one Prometheus sample (0 when absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            head, _, value = line.rpartition(" ")
            got = head[len(name):].strip("{}")
            if ",".join(sorted(got.split(","))) == want or (not labels and not got):
                return float(value)
    return 0.0


def assert_local_releases_equal_simulate(got: dict, dump: Path, mechanism: str, stream: str, *, seed: int,
                                         window: int, block: int, slots: int, log: Path, oracle: str = "ada") -> list:
    """`wevent simulate` of ``mechanism`` on the same values dump, key and device blocks: every slot's
    release and extras (n1, n2, ...) must equal what the stream released (``got``: slot -> record)."""
    import subprocess
    import sys

    from wevent.stream.wire.records import ReleaseRecord

    subprocess.run([sys.executable, "-m", "wevent.cli", "simulate", "-m", mechanism, "--input", str(dump), "-e", "1",
                    "-w", str(window), "--seed", str(seed), "--stream", stream, "--block-size", str(block),
                    "--oracle", oracle, "--releases", str(log), "--json"], check=True, capture_output=True, timeout=300)
    simulated = [ReleaseRecord.from_json(line) for line in log.read_text().splitlines()]
    assert [r.slot for r in simulated] == list(range(1, slots + 1))
    for record in simulated:
        assert got[record.slot].release == record.release, f"{stream} slot {record.slot}"
        assert got[record.slot].extras == record.extras, f"{stream} slot {record.slot}"
    return simulated
