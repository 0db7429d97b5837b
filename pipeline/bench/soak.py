"""``wevent bench soak``: the embedded broker's memory over a long run, with and without its limit.

A central-model stream is fed by a fast producer (a few slots ahead of the releases, so the worker
always has work) for a given time, twice in one run of the benchmark:

1. unbounded: the embedded broker without its memory watchdog, the baseline. tansu keeps every
   record in memory (it ignores topic retention and cannot delete records), so its resident
   memory grows with everything written: reports, internal topics and table changelogs;
2. bounded: the same, with the watchdog's limit set halfway between the baseline's memory at
   start and at end, so it bites mid-run: the broker is stopped at the limit, with one line.

Every second the broker's resident memory (VmRSS) and the releases so far are sampled; printed
are the memory at start, middle and end, its growth per minute, and the release rate in the first
and last third of the run (a flat rate means the worker keeps up whatever the run's length).

Each run's broker and worker end with it, and its working directory is deleted at its end; a run
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
from ..stream.runtime.broker import EmbeddedBroker, create_topics, free_port
from ..stream.config import parse_config
from ..stream.runtime.kafka import KafkaReportSink
from ..stream.runtime.child_processes import WorkerProcess, write_config
from ..stream.runtime.subscription import Releases
from ..stream.runtime.workdir import make_workdir

START = 1_300_000_000.0
STREAM = "soak"


def register(sub) -> None:
    p = add_command(
        sub, "soak", summary="the embedded broker's memory over a long run, with and without its limit",
        description="Run a central stream fed a few slots ahead of its releases for a given time, twice (with and without the embedded broker's memory limit), and print the broker's memory over time.",
        examples=[
        ('two one-minute runs', 'wevent bench soak --seconds 60'),
        ('a heavier feed', 'wevent bench soak --seconds 60 --users 50000')])
    p.add_argument("--seconds", type=float, default=180.0, help="length of each of the two runs (default: 180)")
    p.add_argument("--users", type=int, default=20_000, help="reports per slot (default: 20000)")
    p.add_argument("--ahead", type=int, default=3, help="slots the producer keeps ahead of the releases (default: 3)")
    p.add_argument("--partitions", type=int, default=2, help="partitions of the reports topic (default: 2)")
    p.set_defaults(handler=handle)


@dataclass
class Soak:
    """The samples of one run: seconds since the first release, broker MiB, releases so far."""

    limit_mb: float | None
    times: list[float] = field(default_factory=list)
    memory: list[float] = field(default_factory=list)
    releases: list[int] = field(default_factory=list)
    failure: str | None = None

    def at(self, fraction: float) -> int:
        return min(int(round(fraction * (len(self.times) - 1))), len(self.times) - 1)

    def growth_per_minute(self) -> float:
        return 60 * (self.memory[-1] - self.memory[0]) / max(self.times[-1] - self.times[0], 1e-9)

    def rate(self, first: float, last: float) -> float:
        """Releases per second between two fractions of the run."""
        i, j = self.at(first), self.at(last)
        return (self.releases[j] - self.releases[i]) / max(self.times[j] - self.times[i], 1e-9)


def _config(users: int, partitions: int):
    return parse_config({"seed": 1, "report_partitions": partitions, "stream_partitions": 1, "streams": [
        {"name": STREAM, "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 20, "domain": 100,
         "users": users, "slot_seconds": 60, "start": START}]})


def soak(args, limit_mb: float | None) -> Soak:
    """One run: broker (with the watchdog at ``limit_mb``, or none), worker and producer."""
    config = _config(args.users, args.partitions)
    broker = EmbeddedBroker(memory_limit_mb=limit_mb, watch=limit_mb is not None).start()
    workdir = make_workdir("soak")
    result = Soak(limit_mb)
    worker = None
    done = threading.Event()
    released = 0
    try:
        create_topics(broker.bootstrap, config.topics())
        worker = WorkerProcess(write_config(config, workdir), broker.bootstrap, free_port(), workdir / "worker.log",
                               tansu_compat=True, datadir=workdir / "data").start()
        stream = config.stream(STREAM)
        sink = KafkaReportSink(broker.bootstrap, STREAM, args.partitions, tansu_compat=True)
        rng = np.random.default_rng(0)
        users = np.arange(args.users)
        sent = 0
        started = None

        def sample() -> None:
            while not done.wait(1.0) and broker.alive:
                memory = broker.resident_mb()
                if memory:  # 0 once the watchdog has stopped the broker
                    result.times.append(time.monotonic() - started)
                    result.memory.append(memory)
                    result.releases.append(released)

        with Releases(broker.bootstrap, streams=[STREAM]) as releases:
            deadline = time.monotonic() + 120  # group join and first release
            while broker.alive:
                while sent < released + args.ahead:
                    sent += 1
                    sink.send_slot(sent, stream.slot_start(sent), stream.slot_end(sent), users,
                                   rng.integers(0, 100, args.users))
                sink.producer.flush(1.0)
                for record in releases.follow(idle_timeout=0.5):
                    released = max(released, record.slot)
                    break
                now = time.monotonic()
                if started is None and released:
                    started = now
                    result.times.append(0.0)
                    result.memory.append(broker.resident_mb())
                    result.releases.append(released)
                    threading.Thread(target=sample, daemon=True).start()
                    deadline = now + args.seconds
                if now > deadline:
                    if started is None:
                        raise RuntimeError(f"no release within 120 s; the worker's last log line: {worker.last_line()}")
                    break
    finally:
        done.set()
        result.failure = broker.failure
        if worker:
            worker.stop()
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def handle(args) -> int:
    if args.seconds < 10 or min(args.users, args.ahead, args.partitions) < 1:
        raise UsageError("--seconds must be at least 10, and --users, --ahead and --partitions at least 1")
    baseline = soak(args, None)
    middle = (baseline.memory[0] + baseline.memory[-1]) / 2
    bounded = soak(args, round(middle))
    print(f"broker: embedded tansu (in memory); one central BA stream, {args.users:,} reports per slot, "
          f"{args.partitions} report partitions, producer {args.ahead} slots ahead; {args.seconds:.0f} s per run")
    print(f"{'run':<26}{'start MiB':>10}{'middle MiB':>11}{'end MiB':>9}{'MiB/min':>9}{'lasted s':>9}"
          f"{'releases/s first third':>24}{'last third':>11}")
    for name, run in (("unbounded (baseline)", baseline), (f"limit {bounded.limit_mb:,.0f} MiB", bounded)):
        print(f"{name:<26}{run.memory[0]:>10,.0f}{run.memory[run.at(0.5)]:>11,.0f}{run.memory[-1]:>9,.0f}"
              f"{run.growth_per_minute():>9,.0f}{run.times[-1]:>9.0f}"
              f"{run.rate(0, 1 / 3):>24.1f}{run.rate(2 / 3, 1):>11.1f}")
    reports_per_minute = 60 * baseline.rate(0, 1) * args.users
    growth = baseline.growth_per_minute()
    print(f"baseline: {reports_per_minute / 60:,.0f} reports/s; the broker grows {growth:,.0f} MiB per minute, "
          f"{growth * 2**20 / max(reports_per_minute, 1):,.1f} bytes per report")
    outcome = f"stopped: {bounded.failure}" if bounded.failure else "the limit was never reached"
    print(f"bounded: peak {max(bounded.memory):,.0f} MiB = {max(bounded.memory) / baseline.memory[-1]:.2f} x the "
          f"baseline's end; {outcome}")
    return 0

