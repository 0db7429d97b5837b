"""``wevent bench ingest``: central-model reports per second through a real broker and worker.

Three measurements in one run, against the embedded broker, a local Apache Kafka
(``--apache-kafka``: one KRaft node started for the run, :mod:`wevent.stream.runtime.apache_kafka`) or
any Kafka (``--bootstrap``):

1. batched binary: every slot's reports packed into report batches (up to 65,536 reports per
   message), sent as fast as possible; the rate is reports sent / time until the last release;
2. one JSON message per report, the same way, on a smaller stream (it is far slower);
3. latency: slots paced well below capacity; each slot's delay from sending its watermarks to
   receiving its release, p50 and p99.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..cli._help import add_command
from ..cli._common import bootstrap_servers, partition_count, reachable_kafka, slot_count, user_count
from ..stream.runtime.broker import EmbeddedBroker, create_topics, free_port
from ..stream.wire.reports import json_report, report_partition
from ..stream.config import parse_config
from ..stream.runtime.kafka import KafkaReportSink
from ..stream.runtime.child_processes import WorkerProcess, write_config
from ..stream.runtime.subscription import Releases

if TYPE_CHECKING:
    from ..stream.runtime.apache_kafka import KafkaCluster

START = 1_300_000_000.0


def register(sub) -> None:
    p = add_command(
        sub, "ingest", summary="reports/s through broker and worker: batched binary vs one JSON per report",
        description='Measure reports per second through the broker and a worker: batched binary reports against one JSON message per report, and the slot-close to release latency of paced slots.',
        examples=[
        ('against the embedded broker, smaller runs', 'wevent bench ingest --users 100000 --slots 5 --json-reports 5000 --latency-slots 10'),
        ('against a Kafka of your own', 'wevent bench ingest -b localhost:9092')])
    p.add_argument("--users", type=user_count, default=1_000_000,
                   help="reports per slot in the batched run (default: 1000000)")
    p.add_argument("--slots", type=slot_count, default=20, help="slots in the batched run (default: 20)")
    p.add_argument("--json-reports", type=user_count, default=20_000, help="reports in the JSON run (default: 20000)")
    p.add_argument("--latency-slots", type=slot_count, default=40, help="paced slots for the latency run (default: 40)")
    p.add_argument("--partitions", type=partition_count, default=2, help="partitions of the reports topic (default: 2)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--bootstrap", "-b", type=bootstrap_servers, help="a Kafka to use instead of the embedded broker")
    where.add_argument("--apache-kafka", action="store_true",
                       help="start a one-node Apache Kafka (KRaft; Java and Maven needed) for the run")
    p.set_defaults(handler=handle)


def _config(users: int, partitions: int):
    def stream(name, n):
        return {"name": name, "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 20, "domain": 100,
                "users": n, "slot_seconds": 60, "start": START}

    return parse_config({"seed": 1, "report_partitions": partitions, "stream_partitions": 1,
                         "streams": [stream("batched", users), stream("json", users), stream("paced", users)]})


def _wait_for(releases: Releases, stream: str, slot: int, timeout: float = 600) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for record in releases.follow(idle_timeout=0.2):
            if record.stream == stream and record.slot >= slot:
                return time.monotonic()
    raise RuntimeError(f"no release of {stream} slot {slot} within {timeout:.0f} s")


def handle(args) -> int:
    settings = args.settings
    config = _config(args.users, args.partitions)
    kafka: KafkaCluster | None = None
    broker: EmbeddedBroker | None = None
    if args.apache_kafka:
        from ..stream.runtime.apache_kafka import KafkaCluster

        kafka = KafkaCluster(1).start()
        bootstrap = kafka.bootstrap
    elif settings.kafka_bootstrap(args.bootstrap):
        bootstrap = reachable_kafka(args.bootstrap, settings)
    else:
        broker = EmbeddedBroker(memory_limit_mb=settings.broker_memory_limit_mb()).start()
        bootstrap = broker.bootstrap
    tansu = broker is not None
    workdir = Path(tempfile.mkdtemp(prefix="wevent-bench-"))
    worker = None
    rng = np.random.default_rng(0)
    try:
        credentials = settings.kafka_credentials()
        create_topics(bootstrap, config.topics(), credentials=credentials)
        worker = WorkerProcess(write_config(config, workdir), bootstrap, free_port(), workdir / "worker.log",
                               tansu_compat=tansu, datadir=workdir / "data").start()
        with Releases(bootstrap, credentials=credentials) as releases:
            # warm-up: one small slot, so group join and table recovery are not timed
            warm = KafkaReportSink(bootstrap, "paced", args.partitions, tansu_compat=tansu, credentials=credentials)
            stream = config.stream("paced")
            warm.send_slot(1, stream.slot_start(1), stream.slot_end(1), np.arange(100), rng.integers(0, 100, 100))
            warm.producer.flush()
            _wait_for(releases, "paced", 1, timeout=120)

            users = np.arange(args.users)
            values = rng.integers(0, 100, (args.slots, args.users))
            sink = KafkaReportSink(bootstrap, "batched", args.partitions, tansu_compat=tansu, credentials=credentials)
            stream = config.stream("batched")
            started = time.monotonic()
            for slot in range(1, args.slots + 1):
                sink.send_slot(slot, stream.slot_start(slot), stream.slot_end(slot), users, values[slot - 1])
            sink.producer.flush()
            batched_rate = args.slots * args.users / (_wait_for(releases, "batched", args.slots) - started)

            stream = config.stream("json")
            json_sink = KafkaReportSink(bootstrap, "json", args.partitions, tansu_compat=tansu, credentials=credentials)
            n = args.json_reports
            json_users = rng.choice(args.users, n, replace=False)
            json_values = rng.integers(0, 100, n)
            json_partitions = report_partition(json_users, args.partitions)
            started = time.monotonic()
            for user, value, partition in zip(json_users.tolist(), json_values.tolist(), json_partitions.tolist()):
                json_sink._produce(json_report("json", user, stream.slot_start(1), value), partition)
            json_sink.watermark(stream.slot_end(1))
            json_sink.producer.flush()
            json_rate = n / (_wait_for(releases, "json", 1) - started)

            stream = config.stream("paced")
            delays = []
            per_slot = min(args.users, 100_000)
            for slot in range(2, args.latency_slots + 2):
                warm.send_slot(slot, stream.slot_start(slot), stream.slot_end(slot), users[:per_slot],
                               rng.integers(0, 100, per_slot))
                warm.producer.flush()
                sent = time.monotonic()
                delays.append(_wait_for(releases, "paced", slot, timeout=60) - sent)
                time.sleep(0.2)
    finally:
        if worker:
            worker.stop()
        if broker:
            broker.stop()
        if kafka:
            kafka.stop()
    p50, p99 = np.percentile(delays, [50, 99])
    described = ("embedded tansu (one record per batch)" if tansu else
                 f"local Apache Kafka {kafka.version} (batched, lz4)" if kafka else bootstrap)
    print(f"broker: {described}; "
          f"{args.partitions} report partitions, one worker")
    print(f"batched binary:      {batched_rate:>12,.0f} reports/s  ({args.slots} slots x {args.users:,} reports)")
    print(f"one JSON per report: {json_rate:>12,.0f} reports/s  ({args.json_reports:,} reports)")
    print(f"ratio:               {batched_rate / json_rate:>12,.1f} x")
    print(f"slot close -> release latency (watermarks sent -> release received, {len(delays)} paced slots of "
          f"{per_slot:,} reports): p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms")
    return 0
