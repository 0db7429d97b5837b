"""``wevent bench stream``: slot close -> release latency through broker, worker and device fleet.

One broker (the embedded tansu unless ``--bootstrap``), one worker, and for the local model a
device fleet in ``--shards`` processes. Slot 1 warms up (group join, table recovery, the fleet's
first request) and is not timed; then every slot is sent and its release awaited before the next:

- central: the slot's reports (one per user, batched binary) go to ``reports``; once the broker has
  confirmed them the slot is closed: the watermark past the slot's end is sent to every partition;
- local: the slot is closed the same way (the reports come from the devices, asked by the worker).

The latency of a slot runs from its close (the watermark handed to the producer) to the moment
its release is read from ``releases``. Reports per second are the reports of the timed slots over
the time from each slot's first report (central) or close (local) to its release. Beside them the
same slots run in this process through the core alone, as ``wevent simulate`` runs them (the
histogram of the values, or the device reports, and the mechanism, with the same keys): the floor,
what the pipeline adds to is the ratio. The releases are compared with simulate's, and the bytes
the worker writes to its tables' changelogs are summed over the timed slots.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..cli._help import add_command
from ..cli._common import UsageError, bootstrap_servers, check_cells, integer, reachable_kafka, seed, slot_count, user_count
from .local import DriftingCategories

START = 1_300_000_000.0
SLOT_SECONDS = 60.0
DEFAULTS = {"central": ("ba", 100), "local": ("lpa", 117)}  # mechanism, d: the local one is Taobao's shape
RELEASE_TIMEOUT = 300.0


def register(sub) -> None:
    p = add_command(
        sub, "stream", summary="slot close -> release latency and reports/s through broker, worker and "
                       "device fleet, against simulate on the same slots",
        description='Measure slot close to release latency and reports per second through the broker, a worker and (local model) a device fleet.',
        examples=[
        ('both models at 50,000 users', 'wevent bench stream --users 50000 --slots 5'),
        ('the central model with DSAT', 'wevent bench stream --model central -m dsat --users 50000 --slots 5')])
    p.add_argument("--model", choices=("central", "local", "both"), default="both",
                   help="central (a report per user per slot), local (a device fleet) or both (default: both)")
    p.add_argument("--users", type=user_count, default=200_000, help="users N (default: 200000; Taobao: 1023154)")
    p.add_argument("--slots", type=slot_count, default=20, help="timed slots, after one warm-up slot (default: 20)")
    p.add_argument("--mechanism", "-m", help="mechanism of the streams of its model (default: ba central, lpa local)")
    p.add_argument("--domain", type=integer(2, 256),
                   help="categories d, 2..256 (default: 100 central, 117 local)")
    p.add_argument("--window", type=integer(1, 10_000), default=20, help="w (default: 20)")
    p.add_argument("--shards", type=integer(1, 64), default=2, help="device fleet processes (default: 2)")
    p.add_argument("--partitions", type=integer(1, 64), default=2,
                   help="partitions of the reports topic (default: 2)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the values and of the bench's keys (default: 0)")
    p.add_argument("--bootstrap", "-b", type=bootstrap_servers, help="a Kafka to use instead of the embedded broker")
    p.set_defaults(handler=handle)


@dataclass
class Timing:
    """What one model's timed slots measured."""

    model: str
    mechanism: str
    users: int
    domain: int
    latencies: np.ndarray  # seconds, slot close -> release read
    busy: float  # seconds from each slot's first report (or close) to its release, summed
    reports: int
    simulate: float  # seconds the core alone took for the same slots
    equal: int  # releases equal to simulate's
    changelog_bytes: dict[str, int]  # table -> bytes written to its changelog during the timed slots

    def lines(self) -> list[str]:
        slots = self.latencies.size
        p50, p99, worst = np.percentile(self.latencies, [50, 99, 100]) * 1000
        rate = self.reports / self.busy
        pipeline = self.busy / slots
        return [
            f"{self.model} {self.mechanism}, N = {self.users:,}, d = {self.domain}, {slots} timed slots:",
            f"  slot close -> release:  p50 {p50:.0f} ms, p99 {p99:.0f} ms, max {worst:.0f} ms",
            f"  reports:                {self.reports / slots:,.0f} per slot, {rate:,.0f} reports/s",
            f"  per slot:               pipeline {pipeline * 1000:.0f} ms, simulate {self.simulate / slots * 1000:.0f} ms "
            f"(ratio {self.busy / self.simulate:.1f} x)",
            f"  releases equal to simulate's: {self.equal} of {slots}",
            f"  changelog bytes per slot:     {sum(self.changelog_bytes.values()) / slots:,.0f} ("
            + ", ".join(f"{table} {size / slots:,.0f}" for table, size in
                        sorted(self.changelog_bytes.items(), key=lambda item: -item[1])) + ")",
        ]


def stream_config(model: str, mechanism: str, users: int, domain: int, window: int) -> dict:
    stream = {"name": f"{model}-{uuid.uuid4().hex[:8]}", "model": model, "mechanism": mechanism, "epsilon": 1.0,
              "window": window, "domain": domain, "users": users, "slot_seconds": SLOT_SECONDS, "start": START}
    if model == "local":
        stream["options"] = {"deadline_seconds": 30.0}  # a loaded 2-core machine: no answer is cut off
    return stream


def _mechanisms(args) -> dict[str, str]:
    """model -> mechanism: ``--mechanism`` for the streams of its model, the default for the others."""
    from ..core.registry import mechanisms

    models = ("central", "local") if args.model == "both" else (args.model,)
    chosen = {model: DEFAULTS[model][0] for model in models}
    if args.mechanism:
        cls = mechanisms().get(args.mechanism)
        if cls is None:
            raise UsageError(f"--mechanism must name a mechanism, got {args.mechanism!r}")
        model = cls.model
        if model not in chosen:
            raise UsageError(f"--mechanism {args.mechanism} is a {model}-model mechanism; --model is {args.model}")
        chosen[model] = args.mechanism
    return chosen


def handle(args) -> int:
    from ..core.data import UserValues
    from ..stream.runtime.broker import EmbeddedBroker, create_topics, free_port
    from ..stream.config import parse_config
    from ..stream.runtime.child_processes import ChildProcess, DevicesProcess, WorkerProcess, write_config

    check_cells(slots=args.slots + 1, users=args.users)  # the values of every slot are held at once
    chosen = _mechanisms(args)
    streams = [stream_config(model, mechanism, args.users, args.domain or DEFAULTS[model][1], args.window)
               for model, mechanism in chosen.items()]
    config = parse_config({"app": f"wevent-bench-{uuid.uuid4().hex[:8]}", "seed": args.seed,
                           "report_partitions": args.partitions, "stream_partitions": 1, "streams": streams})
    settings = args.settings
    bootstrap = reachable_kafka(args.bootstrap, settings) if settings.kafka_bootstrap(args.bootstrap) else None
    credentials = settings.kafka_credentials()
    workdir = Path(tempfile.mkdtemp(prefix="wevent-bench-stream-"))
    values = {s.name: _values(args.users, s.domain, args.slots + 1, args.seed) for s in config.streams}
    processes: list[ChildProcess] = []
    broker = None
    if not bootstrap:
        broker = EmbeddedBroker(memory_limit_mb=settings.broker_memory_limit_mb()).start()
        bootstrap = broker.bootstrap
    try:
        create_topics(bootstrap, config.topics(), credentials=credentials)
        config_path = write_config(config, workdir)
        processes.append(WorkerProcess(config_path, bootstrap, free_port(), workdir / "worker.log",
                                       tansu_compat=broker is not None, datadir=workdir / "data").start())
        timings = []
        for stream in config.streams:
            if stream.model == "local":
                dump = workdir / f"{stream.name}.npz"
                UserValues(values[stream.name], stream.domain, slot_seconds=SLOT_SECONDS, start=START).save(dump)
                processes += [DevicesProcess(config_path, stream.name, dump, bootstrap, workdir / f"devices{k}.log",
                                             tansu_compat=broker is not None, new_ledger=True, shard=k,
                                             shards=args.shards).start()
                              for k in range(args.shards)]
            timings.append(_measure(config, stream, values[stream.name], bootstrap, broker is not None, processes,
                                    settings))
    finally:
        for process in reversed(processes):
            process.stop()
        if broker:
            broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)  # the config, the values, the logs
    print(f"broker: {'embedded tansu (one record per batch)' if broker else bootstrap}; one worker, "
          f"{args.partitions} report partitions" + (f", {args.shards} device fleet shards" if "local" in chosen else ""))
    for timing in timings:
        print("\n".join(timing.lines()))
    return 0


def _values(users: int, domain: int, slots: int, seed_: int) -> np.ndarray:
    """Every user's category at every slot: (slots, users) uint8, drifting through the day."""
    source = DriftingCategories(users, domain, slots, seed_)
    return np.stack([source.at(t)[:] for t in range(1, slots + 1)])


def _measure(config, stream, values: np.ndarray, bootstrap: str, tansu: bool, processes, settings) -> Timing:
    """Warm up with slot 1, then time slots 2.. one at a time; simulate them (with the keys and
    Kafka credentials of ``settings``); compare."""
    from ..stream.runtime.kafka import KafkaReportSink
    from ..stream.runtime.subscription import Releases

    local = stream.model == "local"
    credentials = settings.kafka_credentials()
    sink = KafkaReportSink(bootstrap, stream.name, config.report_partitions, tansu_compat=tansu, clock_only=local,
                           credentials=credentials)
    users = np.arange(stream.users)
    slots = values.shape[0]
    latencies, busy, reports, got = [], 0.0, 0, {}
    with Releases(bootstrap, streams=[stream.name], tansu_compat=tansu, credentials=credentials) as releases:
        offsets = {}
        for slot in range(1, slots + 1):
            if slot == 2:  # the warm-up is over
                offsets = _changelog_ends(bootstrap, config.app, credentials)
            started = time.monotonic()
            if not local:
                sink.send_reports(stream.slot_start(slot), users, values[slot - 1])
                sink.producer.flush()  # every report is at the broker: now the slot closes
            closed = time.monotonic()
            sink.watermark(stream.slot_end(slot))
            sink.producer.flush()
            record = _wait_for(releases, slot, processes)
            arrived = time.monotonic()
            got[slot] = record
            if slot > 1:
                latencies.append(arrived - closed)
                busy += arrived - (closed if local else started)
                reports += record.extras.get("reports", 0) if local else stream.users
        changelog_bytes = _changelog_bytes(bootstrap, config.app, offsets, credentials)
    sink.close()
    simulated, seconds = _simulate(config, stream, values, settings)
    equal = sum(_same(got[slot], simulated[slot - 1]) for slot in range(2, slots + 1))
    return Timing(stream.model, stream.mechanism, stream.users, stream.domain, np.array(latencies), busy, reports,
                  seconds, equal, changelog_bytes)


def _wait_for(releases, slot: int, processes):
    """The release of ``slot``; an error if it does not come, or a process the bench started died."""
    deadline = time.monotonic() + RELEASE_TIMEOUT
    while time.monotonic() < deadline:
        for record in releases.follow(idle_timeout=0.05):
            if record.slot == slot:
                return record
        for process in processes:
            if not process.alive:
                raise RuntimeError(f"{process.name} stopped; its log ends with:\n{process.log_tail()}")
    raise RuntimeError(f"no release of slot {slot} within {RELEASE_TIMEOUT:.0f} s")


def _simulate(config, stream, values: np.ndarray, settings) -> tuple[list, float]:
    """The core alone on the same values and keys, as ``wevent simulate`` runs it: every slot's
    release record, and the seconds the slots after the first took (histogram or device reports
    included)."""
    from ..core.data import histograms
    from ..core.local import Devices, LocalMechanism
    from ..core.randomness import DerivedRandomness
    from ..stream.wire.records import ReleaseRecord, local_release_record
    from ..stream.agents.processors import logic_for

    mechanism = logic_for(config, stream, settings).new_mechanism()
    local = stream.model == "local"
    if isinstance(mechanism, LocalMechanism):  # the devices' side, which the fleet runs: its own key, the stream's blocks
        mechanism.devices = Devices(DerivedRandomness(settings.device_key(config), stream.name),
                                     block_size=stream.block_size)
    records, seconds = [], 0.0
    for slot in range(1, values.shape[0] + 1):
        started = time.perf_counter()
        data = values[slot - 1] if local else histograms(values[slot - 1 : slot], stream.domain)[0].astype(float)
        result = mechanism.step(data)
        if slot > 1:
            seconds += time.perf_counter() - started
        records.append(local_release_record(stream.name, mechanism, result, 0.0) if local
                       else ReleaseRecord.from_step(stream.name, mechanism, result, 0.0))
    return records, seconds


def _same(got, simulated) -> bool:
    return got.release == simulated.release and all(got.extras.get(k) == v for k, v in simulated.extras.items())


def _changelog_ends(bootstrap: str, app: str, credentials) -> dict:
    """(topic, partition) -> end offset of every changelog topic of the app's tables."""
    from confluent_kafka import Consumer, TopicPartition

    from ..stream.runtime.kafka import consumer_config

    consumer = Consumer(consumer_config(bootstrap, credentials=credentials))
    try:
        topics = consumer.list_topics(timeout=30).topics
        return {(name, p): consumer.get_watermark_offsets(TopicPartition(name, p), timeout=30, cached=False)[1]
                for name, topic in topics.items() if name.startswith(app) and name.endswith("-changelog")
                for p in topic.partitions}
    finally:
        consumer.close()


def _changelog_bytes(bootstrap: str, app: str, since: dict, credentials) -> dict[str, int]:
    """table -> bytes of keys and values written to its changelog after the offsets ``since``."""
    from confluent_kafka import Consumer, TopicPartition

    from ..stream.runtime.kafka import consumer_config

    ends = _changelog_ends(bootstrap, app, credentials)
    written: dict[str, int] = {}
    consumer = Consumer(consumer_config(bootstrap, credentials=credentials))
    try:
        for (topic, partition), end in ends.items():
            start = since.get((topic, partition), 0)
            if end <= start:
                continue
            consumer.assign([TopicPartition(topic, partition, start)])
            while (message := consumer.poll(10)) is not None:
                if not message.error():
                    table = topic[len(app) + 1 : -len("-changelog")]
                    written[table] = written.get(table, 0) + len(message.key() or b"") + len(message.value() or b"")
                if message.offset() >= end - 1:
                    break
    finally:
        consumer.close()
    return written
