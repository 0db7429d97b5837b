"""Central streams over the bundled sample on Apache Kafka, with workers that tests kill, add
and restart, and every record of ``releases`` read back as a ``read_committed`` consumer sees it."""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections import Counter
from pathlib import Path

import numpy as np

from wevent.bench.crash import sample_values
from wevent.core.central import BudgetAbsorption
from wevent.core.randomness import DerivedRandomness
from wevent.stream.runtime.broker import ask_again, create_topics, free_port
from wevent.stream.wire.records import ReleaseRecord
from wevent.stream.config import parse_config
from wevent.stream.runtime.kafka import KafkaReportSink, consumer_config
from wevent.stream.runtime.child_processes import WorkerProcess, write_config
from wevent.stream.settings import Settings


class KafkaRun:
    """``streams`` BA streams over the first ``slots`` slots of the sample, on ``partitions``
    partitions of every topic, through workers this object starts and stops.

    Parameters
    ----------
    bootstrap
        The Apache Kafka cluster.
    directory
        Config, worker logs and data.
    guarantee, replication
        The config's ``processing_guarantee`` and ``replication_factor``.
    """

    def __init__(self, bootstrap: str, directory: Path, *, streams: int = 4, partitions: int = 4, slots: int = 16,
                 guarantee: str = "at_least_once", replication: int = 1, seed: int = 21) -> None:
        self.bootstrap = bootstrap
        self.directory = Path(directory)
        self.values = sample_values(slots)
        self.slots = slots
        self.names = spread_names(streams, partitions)
        self.config = parse_config({
            "app": "wevent-kafka", "seed": seed, "report_partitions": partitions, "stream_partitions": partitions,
            "processing_guarantee": guarantee, "replication_factor": replication,
            "streams": [{"name": name, "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 10,
                         "domain": self.values.domain_size, "users": self.values.users,
                         "slot_seconds": self.values.slot_seconds, "start": self.values.start}
                        for name in self.names]})
        self.config_path = write_config(self.config, self.directory)
        create_topics(bootstrap, self.config.topics(), replication=replication)
        self.workers: list[WorkerProcess] = []
        self.sinks = {name: KafkaReportSink(bootstrap, name, partitions) for name in self.names}
        self.sent = 0

    def start_worker(self) -> WorkerProcess:
        n = len(self.workers)
        worker = WorkerProcess(self.config_path, self.bootstrap, free_port(), self.directory / f"worker{n}.log",
                               tansu_compat=False, datadir=self.directory / f"data{n}").start()
        self.workers.append(worker)
        return worker

    def send(self, count: int) -> None:
        """The next ``count`` slots of every stream (delivered before this returns)."""
        for slot in range(self.sent + 1, self.sent + count + 1):
            for name, sink in self.sinks.items():
                stream = self.config.stream(name)
                sink.send_slot(slot, stream.slot_start(slot), stream.slot_end(slot), np.arange(self.values.users),
                               self.values.values[slot - 1])
        for sink in self.sinks.values():
            assert sink.producer.flush(60) == 0
        self.sent += count

    def releases_written(self) -> int:
        """Records on ``releases``, committed or not (the sum of its partitions' end offsets)."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(consumer_config(self.bootstrap) | {"isolation.level": "read_uncommitted"})
        try:
            partitions = ask_again(lambda seconds: consumer.list_topics("releases", timeout=seconds), 30).topics["releases"].partitions
            return sum(consumer.get_watermark_offsets(TopicPartition("releases", p), timeout=10, cached=False)[1]
                       for p in partitions)
        finally:
            consumer.close()

    def close(self) -> None:
        for sink in self.sinks.values():
            sink.close()

    def expected(self) -> dict[tuple[str, int], list[float]]:
        """(stream, slot) -> release of an uninterrupted run, computed in this process."""
        out = {}
        for name in self.names:
            stream = self.config.stream(name)
            mechanism = BudgetAbsorption(stream.epsilon, stream.window, stream.domain,
                                         randomness=DerivedRandomness(Settings().noise_key(self.config), name))
            for record in mechanism.run(self.values.counts().astype(float)):
                out[name, record.slot] = record.release.tolist()
        return out

    def read_releases(self, timeout: float = 240.0, idle: float = 5.0, slots: int | None = None) -> list[ReleaseRecord]:
        """Every record on ``releases`` a ``read_committed`` consumer sees (duplicates included),
        once each (stream, slot) of the first ``slots`` (default: all) has arrived and nothing more
        came for ``idle`` seconds."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(consumer_config(self.bootstrap) | {"group.id": f"read-{uuid.uuid4()}",
                                                               "isolation.level": "read_committed"})
        partitions = ask_again(lambda seconds: consumer.list_topics("releases", timeout=seconds), 30).topics["releases"].partitions
        consumer.assign([TopicPartition("releases", p, 0) for p in partitions])
        records: list[ReleaseRecord] = []
        wanted = len(self.names) * (slots or self.slots)
        deadline, last = time.monotonic() + timeout, time.monotonic()
        try:
            while time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and not message.error():
                    records.append(ReleaseRecord.from_json(message.value()))
                    last = time.monotonic()
                elif len({(r.stream, r.slot) for r in records}) >= wanted and time.monotonic() - last > idle:
                    break
        finally:
            consumer.close()
        return records

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {w.log_path.name}\n{w.log_tail(30)}" for w in self.workers)


def spread_names(count: int, partitions: int) -> list[str]:
    """``count`` stream names ("taxi<i>") on as many different stream partitions as possible, so
    that the streams spread over the workers."""
    from aiokafka.partitioner import murmur2

    names: list[str] = []
    used: set[int] = set()
    i = 0
    while len(names) < count:
        name, i = f"taxi{i}", i + 1
        partition = (murmur2(name.encode()) & 0x7FFFFFFF) % partitions
        if partition not in used:
            names.append(name)
            used = set() if len(used) + 1 == partitions else used | {partition}
    return names


def duplicates(records: list[ReleaseRecord]) -> int:
    """Records beyond the first of their (stream, slot)."""
    return sum(n - 1 for n in Counter((r.stream, r.slot) for r in records).values())


def check_releases(run: KafkaRun, records: list[ReleaseRecord]) -> None:
    """Every (stream, slot) released, every copy equal to the uninterrupted run's release."""
    expected = run.expected()
    got = {(r.stream, r.slot) for r in records}
    assert got == set(expected), f"missing {sorted(set(expected) - got)[:10]}\n{run.logs()}"
    wrong = [(r.stream, r.slot) for r in records if r.release != expected[r.stream, r.slot]]
    assert wrong == [], f"changed releases {wrong[:10]}"


def metrics(worker: WorkerProcess) -> str:
    """The worker's /metrics page ("" while its web server is not up)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{worker.web_port}/metrics", timeout=10) as response:
            return response.read().decode()
    except OSError:
        return ""
