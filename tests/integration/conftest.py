"""Real-broker fixtures: the embedded tansu broker and `wevent worker` processes."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

from pipeline.stream.broker import EmbeddedBroker, create_topics, free_port
from pipeline.stream.child_processes import WorkerProcess, write_config


@pytest.fixture
def broker():
    with EmbeddedBroker() as b:
        yield b


class Cluster:
    """A broker plus worker processes running one config; workers are stopped at teardown."""

    def __init__(self, broker: EmbeddedBroker, config, tmp_path: Path) -> None:
        self.broker = broker
        self.config = config
        self.tmp_path = tmp_path
        self.config_path = write_config(config, tmp_path)
        self.workers: list[WorkerProcess] = []
        create_topics(broker.bootstrap, config.topics())

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def start_worker(self) -> WorkerProcess:
        n = len(self.workers)
        worker = WorkerProcess(self.config_path, self.bootstrap, free_port(), self.tmp_path / f"worker{n}.log",
                               tansu_compat=True, datadir=self.tmp_path / f"data{n}").start()
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

    from pipeline.stream.codecs import ReleaseRecord

    subprocess.run([sys.executable, "-m", "pipeline.cli", "simulate", "-m", mechanism, "--input", str(dump), "-e", "1",
                    "-w", str(window), "--seed", str(seed), "--stream", stream, "--block-size", str(block),
                    "--oracle", oracle, "--releases", str(log), "--json"], check=True, capture_output=True, timeout=300)
    simulated = [ReleaseRecord.from_json(line) for line in log.read_text().splitlines()]
    assert [r.slot for r in simulated] == list(range(1, slots + 1))
    for record in simulated:
        assert got[record.slot].release == record.release, f"{stream} slot {record.slot}"
        assert got[record.slot].extras == record.extras, f"{stream} slot {record.slot}"
    return simulated
