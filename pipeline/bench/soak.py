"""``wevent bench soak``: a worker at full speed for a long run, and whether it holds its pace.

A central-model stream is fed by a fast producer (a few slots ahead of the releases, so the worker
always has work) for a given time, on the embedded broker or on a local Apache Kafka
(``--broker kafka``: one KRaft node started for the run, :mod:`wevent.stream.runtime.apache_kafka`).
Every second the releases so far and the worker's resident memory (VmRSS) are sampled, and the
broker's on the embedded broker, which keeps every record in memory. Three checks, each printed
as a PASS or FAIL line with its figures:

- pace: the release rate over the last window is at least 90% of the rate over the first;
- worker memory: its resident size grows less than 5% from the end of the first window (tables,
  buffers and caches are warm by then) to the end of the run;
- delivery: every report message was confirmed by the broker, none failed, and the broker and the
  worker ran to the end (the embedded broker's memory watchdog did not stop it).

A window is the first (or last) minute of the run, or its first (last) third if that is shorter.
A benchmark, it ends with status 0 either way: its lines say how the run went.

The run's broker and worker end with it, and its working directory is deleted at its end; a run
killed outright takes its children with it, and the next run (or ``wevent run``) deletes its
directory (:mod:`wevent.stream.runtime.workdir`).
"""

from __future__ import annotations

import shutil
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from ..cli._help import add_command
from ..errors import UsageError
from ..stream.config import parse_config
from ..stream.runtime.broker import EmbeddedBroker, create_topics, free_port, resident_mb
from ..stream.runtime.child_processes import WorkerProcess, write_config
from ..stream.runtime.kafka import DeliveryError, KafkaReportSink
from ..stream.runtime.subscription import Releases
from ..stream.runtime.workdir import make_workdir

START = 1_300_000_000.0
STREAM = "soak"
WINDOW_SECONDS = 60.0
MIN_PACE = 0.90  # last window's release rate over the first's
MAX_WORKER_GROWTH = 0.05  # of its resident size after the first window


def register(sub) -> None:
    p = add_command(
        sub, "soak", summary="a worker at full speed for a long run: its pace, its memory, every delivery",
        description="Run a central stream fed a few slots ahead of its releases for a given time, on the embedded "
                    "broker or on a local Apache Kafka, and print whether the release rate held, whether the "
                    "worker's memory stayed flat and whether every report message was delivered (PASS/FAIL lines "
                    "with their figures).",
        examples=[
        ('a one-minute run on the embedded broker', 'wevent bench soak --seconds 60'),
        ('ten minutes on Apache Kafka', 'wevent bench soak --seconds 600 --broker kafka'),
        ('a heavier feed', 'wevent bench soak --seconds 60 --users 50000')])
    p.add_argument("--seconds", type=float, default=180.0, help="length of the run (default: 180)")
    p.add_argument("--broker", choices=("embedded", "kafka"), default="embedded",
                   help="the embedded broker, or a one-node Apache Kafka started for the run (Java needed) "
                        "(default: embedded)")
    p.add_argument("--users", type=int, default=20_000, help="reports per slot (default: 20000)")
    p.add_argument("--ahead", type=int, default=3, help="slots the producer keeps ahead of the releases (default: 3)")
    p.add_argument("--partitions", type=int, default=2, help="partitions of the reports topic (default: 2)")
    p.set_defaults(handler=handle)


@dataclass
class Soak:
    """The samples of one run (seconds since the first release, releases so far, worker and broker
    MiB), and how its deliveries went."""

    times: list[float] = field(default_factory=list)
    releases: list[int] = field(default_factory=list)
    worker_memory: list[float] = field(default_factory=list)
    broker_memory: list[float] = field(default_factory=list)
    reports: int = 0
    messages: int = 0
    delivered: int = 0
    failure: str | None = None

    @property
    def window(self) -> float:
        return min(WINDOW_SECONDS, self.times[-1] / 3)

    def index_at(self, seconds: float) -> int:
        """The last sample taken at or before ``seconds``."""
        return max(int(np.searchsorted(self.times, seconds, side="right")) - 1, 0)

    def rate(self, start: float, end: float) -> float:
        """Releases per second between two times of the run."""
        i, j = self.index_at(start), self.index_at(end)
        return (self.releases[j] - self.releases[i]) / max(self.times[j] - self.times[i], 1e-9)

    def checks(self) -> list[tuple[bool, str, str]]:
        """(passed, name, figures) of each check."""
        w, end = self.window, self.times[-1]
        first, last = self.rate(0, w), self.rate(end - w, end)
        pace = last / first if first else 0.0
        warm = self.worker_memory[self.index_at(w)]
        growth = self.worker_memory[-1] / warm - 1 if warm else float("inf")
        delivered = self.failure is None and self.delivered == self.messages
        return [
            (pace >= MIN_PACE, "release rate",
             f"{last:.2f} slots/s over the last {w:.0f} s, {pace:.0%} of the first {w:.0f} s's {first:.2f} "
             f"(at least {MIN_PACE:.0%})"),
            (growth < MAX_WORKER_GROWTH, "worker memory",
             f"{warm:,.0f} MiB at {w:.0f} s, {self.worker_memory[-1]:,.0f} MiB at {end:.0f} s: {growth:+.1%} "
             f"(under {MAX_WORKER_GROWTH:.0%})"),
            (delivered, "delivery",
             f"{self.delivered:,} of {self.messages:,} report messages confirmed"
             + (f"; {self.failure}" if self.failure else ", none failed")),
        ]


def _config(users: int, partitions: int):
    return parse_config({"seed": 1, "report_partitions": partitions, "stream_partitions": 1, "streams": [
        {"name": STREAM, "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 20, "domain": 100,
         "users": users, "slot_seconds": 60, "start": START}]})


def soak(args, bootstrap: str, broker: EmbeddedBroker | None) -> Soak:
    """One run against the Kafka at ``bootstrap`` (``broker``: the embedded one, whose memory is
    sampled and whose watchdog may stop it): a worker, a producer and the sampler."""
    config = _config(args.users, args.partitions)
    tansu = broker is not None
    workdir = make_workdir("soak")
    result = Soak()
    worker = None
    done = threading.Event()
    released = 0
    try:
        create_topics(bootstrap, config.topics())
        worker = WorkerProcess(write_config(config, workdir), bootstrap, free_port(), workdir / "worker.log",
                               tansu_compat=tansu, datadir=workdir / "data").start()
        stream = config.stream(STREAM)
        sink = KafkaReportSink(bootstrap, STREAM, args.partitions, tansu_compat=tansu)
        rng = np.random.default_rng(0)
        users = np.arange(args.users)
        sent = 0
        started = 0.0

        def running() -> bool:
            return (broker is None or broker.alive) and worker.alive

        def sample() -> None:
            assert worker.process is not None, "the worker is sampled once started"
            result.times.append(time.monotonic() - started)
            result.releases.append(released)
            result.worker_memory.append(resident_mb(worker.process.pid))
            result.broker_memory.append(broker.resident_mb() if broker else 0.0)

        def sampler() -> None:
            while not done.wait(1.0) and running():
                sample()

        with Releases(bootstrap, streams=[STREAM]) as releases:
            deadline = time.monotonic() + 120  # group join and first release
            while running():
                while sent < released + args.ahead:
                    sent += 1
                    sink.send_slot(sent, stream.slot_start(sent), stream.slot_end(sent), users,
                                   rng.integers(0, 100, args.users))
                sink.producer.poll(0)
                for record in releases.follow(idle_timeout=0.5):
                    released = max(released, record.slot)
                    break
                now = time.monotonic()
                if not started and released:
                    started = now
                    sample()
                    threading.Thread(target=sampler, daemon=True).start()
                    deadline = now + args.seconds
                if now > deadline:
                    if not started:
                        raise RuntimeError(f"no release within 120 s; the worker's last log line: {worker.last_line()}")
                    break
        if not started:
            raise RuntimeError(f"the run ended before its first release: {worker.describe_exit()}, "
                               f"{broker.failure if broker and broker.failure else worker.last_line()}")
        done.set()
        sample()
        try:
            sink.close()
        except DeliveryError as exc:
            result.failure = str(exc)
        if not running():
            result.failure = (broker.failure if broker and broker.failure else
                              f"the worker ended early ({worker.describe_exit()}): {worker.last_line()}"
                              if not worker.alive else "the broker ended early")
        result.reports, result.messages, result.delivered = sink.reports_sent, sink.messages_sent, sink.delivered
    finally:
        done.set()
        if worker:
            worker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def handle(args) -> int:
    if args.seconds < 10 or min(args.users, args.ahead, args.partitions) < 1:
        raise UsageError("--seconds must be at least 10, and --users, --ahead and --partitions at least 1")
    if args.broker == "kafka":
        from ..stream.runtime.apache_kafka import KafkaCluster

        with KafkaCluster(1) as kafka:
            run = soak(args, kafka.bootstrap, None)
        where = "Apache Kafka, one local KRaft node"
    else:
        broker = EmbeddedBroker(memory_limit_mb=args.settings.broker_memory_limit_mb()).start()
        try:
            run = soak(args, broker.bootstrap, broker)
        finally:
            broker.stop()
        where = f"embedded tansu (in memory, its watchdog at {broker.memory_limit_mb:,} MiB)"
    end = run.times[-1]
    print(f"broker: {where}; one central BA stream, {args.users:,} reports per slot, {args.partitions} report "
          f"partitions, producer {args.ahead} slots ahead; {end:.0f} s from the first release")
    print(f"throughput: {run.releases[-1] - run.releases[0]:,} slots released, "
          f"{run.rate(0, end) * args.users:,.0f} reports/s; {run.reports:,} reports in {run.messages:,} messages")
    if args.broker == "embedded":
        growth = 60 * (run.broker_memory[-1] - run.broker_memory[0]) / max(end, 1e-9)
        print(f"broker memory: {run.broker_memory[0]:,.0f} MiB at the first release, {run.broker_memory[-1]:,.0f} MiB "
              f"at the end, {growth:,.0f} MiB per minute, "
              f"{growth * 2**20 / max(60 * run.rate(0, end) * args.users, 1):,.1f} bytes per report")
    for passed, name, figures in run.checks():
        print(f"{'PASS' if passed else 'FAIL'} {name}: {figures}")
    return 0
