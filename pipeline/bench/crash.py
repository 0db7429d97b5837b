"""``wevent bench crash``: random SIGKILLs of the worker and the replay, every release checked.

A trial starts the embedded broker, one worker and a replay of the bundled T-Drive sample into a
BA stream (2 ``reports`` partitions, 2 stream partitions), then follows a random kill schedule
drawn from the trial's seed: one to three SIGKILLs of the worker at random moments, each restarted
after a random delay of 0 to 5 s, and sometimes a SIGKILL of the replay, which resumes from the
slot after the last release (``--from-slot``). When every slot is released, each release is
compared with the mechanism run on the same values with the same derived noise (what
``wevent simulate`` computes). A trial passes only if every release is identical and no slot was
released twice with different values.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

SAMPLE_TDRIVE = Path(__file__).resolve().parents[2] / "producers" / "fixtures" / "tdrive"
STREAM = "taxi"
SLOT_SECONDS = 300.0
GRID = "4x4"


@dataclass
class TrialResult:
    """What one trial did and whether its releases equal the clean run's."""

    seed: int
    slots: int
    kills: list[str] = field(default_factory=list)
    released: int = 0
    missing: list[int] = field(default_factory=list)
    differing: list[int] = field(default_factory=list)
    conflicts: list[int] = field(default_factory=list)
    seconds: float = 0.0
    logs: str = ""
    positions: dict = field(default_factory=dict)

    @property
    def identical(self) -> bool:
        return self.released == self.slots and not self.differing and not self.conflicts

    def summary(self) -> str:
        verdict = "identical" if self.identical else (
            f"DIFFERENT: released {self.released}/{self.slots} (missing {self.missing[:10]}), differing slots {self.differing[:10]}, "
            f"conflicting slots {self.conflicts[:10]}")
        return f"trial seed {self.seed}: {len(self.kills)} kill(s) [{'; '.join(self.kills)}] in {self.seconds:.0f} s: {verdict}"


def sample_values(slots: int):
    """The bundled sample on a 4x4 grid in 5-minute slots (as ``wevent run`` shows it), first ``slots``."""
    from producers.tdrive import read_tdrive

    return read_tdrive([SAMPLE_TDRIVE], "personalized", grid=(4, 4), slot_seconds=SLOT_SECONDS,
                       max_slots=slots).values


def trial_config(values, seed: int):
    from ..stream.config import parse_config

    stream = {"name": STREAM, "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 10,
              "domain": values.domain_size, "users": values.users, "slot_seconds": SLOT_SECONDS,
              "start": values.start}
    return parse_config({"app": "wevent-crash", "seed": seed, "report_partitions": 2, "stream_partitions": 2,
                         "streams": [stream]})


def clean_releases(config, values) -> dict[int, list[float]]:
    """slot -> release of an uninterrupted run: the mechanism on the true counts, same noise."""
    from ..core.central import BudgetAbsorption
    from ..core.randomness import DerivedRandomness

    stream = config.stream(STREAM)
    counts = values.counts().astype(float)
    mechanism = BudgetAbsorption(stream.epsilon, stream.window, stream.domain,
                                 randomness=DerivedRandomness(config.noise_key(), STREAM))
    return {r.slot: r.release.tolist() for r in mechanism.run(counts)}


@dataclass
class Schedule:
    """A trial's kills: (seconds after start, target, restart delay), drawn from its seed."""

    events: list[tuple[float, str, float]]

    @classmethod
    def draw(cls, seed: int, horizon: float) -> "Schedule":
        rng = np.random.default_rng([seed, 0xC7A5])
        events = [(float(rng.uniform(1.0, horizon)), "worker", float(rng.uniform(0.0, 5.0)))
                  for _ in range(int(rng.integers(1, 4)))]
        if rng.random() < 0.5:
            events.append((float(rng.uniform(0.5, horizon / 2)), "replay", float(rng.uniform(0.0, 2.0))))
        return cls(sorted(events))


def run_trial(seed: int, workdir: Path, *, slots: int = 24, speed: float = 900.0, horizon: float = 12.0,
              timeout: float = 300.0, loglevel: str = "warn") -> TrialResult:
    """One trial in ``workdir`` (its config and logs stay there)."""
    from ..stream.broker import EmbeddedBroker, create_topics, free_port
    from ..stream.processes import ChildProcess, WorkerProcess, write_config
    from ..stream.subscription import Releases

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    values = sample_values(slots)
    config = trial_config(values, seed)
    expected = clean_releases(config, values)
    result = TrialResult(seed, len(expected))
    schedule = Schedule.draw(seed, horizon)
    started = time.monotonic()
    with EmbeddedBroker() as broker:
        create_topics(broker.bootstrap, config.topics())
        config_path = write_config(config, workdir)
        workers: list = []
        replays: list = []

        def start_worker():
            n = len(workers)
            workers.append(WorkerProcess(config_path, broker.bootstrap, free_port(), workdir / f"worker{n}.log",
                                         tansu_compat=True, datadir=workdir / f"data{n}", loglevel=loglevel).start())

        def start_replay(from_slot: int):
            arguments = ["replay", "tdrive", str(SAMPLE_TDRIVE), "--grid", GRID, "--slot-seconds", str(SLOT_SECONDS),
                         "--max-slots", str(slots), "--config", str(config_path), "--stream", STREAM,
                         "--bootstrap", broker.bootstrap, "--tansu-compat", "--from-slot", str(from_slot),
                         "--speed", str(speed), "--no-progress"]
            replays.append(ChildProcess(arguments, workdir / f"replay{len(replays)}.log").start())

        start_worker()
        start_replay(1)
        pending = list(schedule.events)
        restarts: list[tuple[float, str]] = []
        got: dict[int, list[float]] = {}
        try:
            with Releases(broker.bootstrap, streams=[STREAM]) as releases:
                while len(got) < len(expected) and time.monotonic() - started < timeout:
                    for record in releases.follow(idle_timeout=0.1):
                        got[record.slot] = record.release
                    now = time.monotonic() - started
                    while pending and pending[0][0] <= now:
                        at, target, delay = pending.pop(0)
                        process = (workers if target == "worker" else replays)[-1]
                        if not process.alive:
                            continue  # a replay that already finished: nothing to kill
                        process.kill()
                        result.kills.append(f"{target} at {at:.1f} s, back after {delay:.1f} s")
                        restarts.append((now + delay, target))
                    for item in [r for r in restarts if r[0] <= now]:
                        restarts.remove(item)
                        if item[1] == "worker":
                            start_worker()
                        else:  # every slot up to the last release reached every partition before it
                            start_replay(min(max(got, default=0) + 1, slots))
                result.conflicts = sorted(slot for _, slot in releases.conflicts)
            if len(got) < len(expected) or any(got[s] != expected[s] for s in got):
                result.positions = positions(broker.bootstrap, config)
        finally:
            for process in workers + replays:
                process.stop(5.0)
            result.logs = "\n".join(f"--- {p.log_path.name}\n{p.log_tail(20)}" for p in workers + replays)
    result.seconds = time.monotonic() - started
    result.released = len(got)
    result.missing = sorted(set(expected) - set(got))
    result.differing = sorted(slot for slot, release in got.items() if release != expected[slot])
    return result


def register(sub) -> None:
    p = sub.add_parser("crash", help="random SIGKILLs of the worker and the replay; releases against a clean run")
    p.add_argument("--trials", type=int, default=10, help="number of trials (default: 10)")
    p.add_argument("--seed", type=int, default=0, help="seed of the first trial; trial i uses seed + i (default: 0)")
    p.add_argument("--slots", type=int, default=24, help="slots per trial (default: 24)")
    p.add_argument("--loglevel", default="warn", choices=["warn", "info", "debug"], help="the workers' log level")
    p.add_argument("--workdir", help="keep every trial's config and logs here (default: a temporary directory)")
    p.set_defaults(handler=handle)


def handle(args) -> int:
    from ..errors import UsageError

    if args.trials < 1 or not 2 <= args.slots:
        raise UsageError("--trials must be at least 1 and --slots at least 2")
    root = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="wevent-crash-"))
    identical = 0
    for i in range(args.trials):
        result = run_trial(args.seed + i, root / f"trial{args.seed + i}", slots=args.slots, loglevel=args.loglevel)
        identical += result.identical
        print(result.summary(), flush=True)
        if not result.identical:
            print(f"  positions: {result.positions}", flush=True)
    print(f"identical in {identical} of {args.trials} trials (logs in {root})")
    return 0 if identical == args.trials else 1


def positions(bootstrap: str, config) -> dict[str, dict]:
    """Where a failed trial stands: the group's committed offset of each source partition, and the
    offset each table state records as applied (from the last changelog record of each key)."""
    from confluent_kafka import Consumer, TopicPartition

    from ..core import state as packing
    from ..stream.kafka import consumer_config
    from ..stream.subscription import read_topic

    committed = {}
    consumer = Consumer(consumer_config(bootstrap) | {"group.id": config.app})
    try:
        tps = [TopicPartition(topic, p) for topic, n in config.topics().items() for p in range(n)]
        for tp in consumer.committed(tps, timeout=30):
            committed[f"{tp.topic}:{tp.partition}"] = tp.offset
    finally:
        consumer.close()
    states = {}
    for table in ("assembler", "dissimilarity-state"):
        last = {}
        for key, value in _keyed(bootstrap, f"{config.app}-{table}-changelog"):
            last[key] = value
        for key, value in last.items():
            try:
                states[f"{table} {key}"] = packing.unpack(value)["offsets"]
            except Exception as exc:  # noqa: BLE001 - a diagnostic: show what could not be read
                states[f"{table} {key}"] = f"unreadable: {exc}"
    from confluent_kafka.admin import AdminClient

    from ..stream.kafka import client_config

    groups = [g.group_id for g in AdminClient(client_config(bootstrap)).list_consumer_groups().result(30).valid]
    return {"committed": committed, "states": states, "groups": groups}


def _keyed(bootstrap: str, topic: str) -> list[tuple[str, bytes]]:
    from confluent_kafka import Consumer, TopicPartition

    from ..stream.kafka import consumer_config

    consumer = Consumer(consumer_config(bootstrap))
    found = []
    try:
        metadata = consumer.list_topics(topic, timeout=30)
        for p in metadata.topics[topic].partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, p, low)])
            while (message := consumer.poll(3)) is not None:
                if not message.error():
                    found.append(((message.key() or b"").decode(errors="replace"), message.value()))
    finally:
        consumer.close()
    return found
