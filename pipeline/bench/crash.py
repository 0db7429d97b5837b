"""``wevent bench crash``: random SIGKILLs of the worker, the replay and devices, every release checked.

A trial starts the embedded broker, one worker and a replay of the bundled T-Drive sample into a
BA stream (``--mechanism``: any central mechanism; ``--model local``: an LPA stream answered by a
two-shard device fleet), with 2 ``reports`` and 2 stream partitions, then follows a random kill schedule drawn from the trial's
seed: one to three SIGKILLs of the worker at random moments, each restarted after a random delay
of 0 to 5 s; half the time a SIGKILL of the replay, which resumes from the slot after the last
release (``--from-slot``); in the local model one or two of a fleet shard. When every slot is
released, each release is compared with ``wevent simulate``'s on the same values with the same
derived noise. A trial passes if every release is identical and no slot was released twice with
different values; in the local model releases may also differ from the first one made from fewer
answers than the clean run's and than it says were asked (answers that missed their deadline while
a shard was down), which that release states (its ``n1``/``n2`` below its ``asked1``/``asked2``)
and the worker counts (``wevent_ldp_missing_reports_total``). ``--parallel`` runs
several trials at once, each with its own broker.

Crash trials
------------

**Crash trials.** `wevent bench crash --trials N --parallel K` replays the bundled sample into a
BA stream on the embedded broker, SIGKILLs the worker 1-3 times at random (restarted after 0-5 s)
and, half the time, the replay (resumed with `--from-slot`), and compares every release with
`wevent simulate`'s; `--model local` runs LPA with a two-shard device fleet and kills its shards
too. Each trial has its own broker, so K run at once, and ends identical, short by design, wrong
or stalled. A local release may differ by design when device answers missed their deadline while
a shard was down: the release says so, with `n1`/`n2` (the answers it was made from) below
`asked1`/`asked2` (the users each phase asked), and `wevent_ldp_missing_reports_total` counts them;
later releases may follow another path of the mechanism. Any other difference fails the trial.
`make test` runs 50 trials (one in four local; 10 slots, kills within 8 s, restarts within 3 s, a
4 s group session set with `wevent worker --session-seconds`), five at a time, in about 4
minutes; `WEVENT_CRASH_TRIALS=N` runs more. Measured: 50 trials, 43 identical, 7 short by design
(local), none wrong, none stalled. Short trials rarely hit a fault of the resume position, so a unit test
checks the seeks themselves, and `make test` also runs the committed-ahead case. 400 trials at
twice that load (ten at once) gave 364 identical, 36 short by design, none wrong, none stalled.
A failed trial prints where its group and tables stand (a part the broker cannot
answer says so in its place) and which of its processes, or its broker, exited by themselves.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..cli._help import add_command
from ..producers.fixtures import TDRIVE as SAMPLE_TDRIVE
from ..stream.settings import Settings

STREAM = "taxi"
SLOT_SECONDS = 300.0
GRID = "4x4"
LOCAL_BLOCK = 64
LOCAL_DEADLINE = 5.0
MECHANISM = {"central": "ba", "local": "lpa"}  # each model's mechanism unless a central one is named
# Options a trial's stream takes: BD and BA with grouping cut the 16 cells into 4 groups (by
# default they would be one group: d / 500 < 1), so M1's dissimilarity is a vector.
TRIAL_OPTIONS = {"bd-grouped": {"groups": 4}, "ba-grouped": {"groups": 4}}


@dataclass
class TrialResult:
    """What one trial did and how its releases compare with the clean run's.

    ``short`` are the slots from the first release made from fewer device answers than the clean
    run's (answers that missed their deadline: by design, and its ``n1``/``n2`` say so) on, which
    may follow another path of the mechanism; ``differing`` are the slots that differ otherwise."""

    seed: int
    slots: int
    model: str = "central"
    mechanism: str = "ba"
    kills: list[str] = field(default_factory=list)
    released: int = 0
    missing: list[int] = field(default_factory=list)
    short: list[int] = field(default_factory=list)
    differing: list[int] = field(default_factory=list)
    conflicts: list[int] = field(default_factory=list)
    exits: list[str] = field(default_factory=list)
    seconds: float = 0.0
    logs: str = ""
    positions: dict = field(default_factory=dict)

    @property
    def correct(self) -> bool:
        return self.released == self.slots and not self.differing and not self.conflicts

    @property
    def identical(self) -> bool:
        return self.correct and not self.short

    @property
    def verdict(self) -> str:
        """identical, short (by design), wrong (a release differs) or stalled (releases missing)."""
        if not self.correct:
            return "wrong" if self.differing or self.conflicts else "stalled"
        return "short" if self.short else "identical"

    def summary(self) -> str:
        if self.identical:
            verdict = "identical"
        elif self.correct:
            verdict = (f"identical before slot {self.short[0]}, whose release lacks device answers that missed their "
                       f"deadline (by design); {len(self.short)} release(s) differ from it on")
        else:
            verdict = (f"DIFFERENT: released {self.released}/{self.slots} (missing {self.missing[:10]}), differing "
                       f"slots {self.differing[:10]}, conflicting slots {self.conflicts[:10]}")
        exits = f"; exited by themselves: {'; '.join(self.exits)}" if self.exits else ""
        return (f"{self.model} trial ({self.mechanism}) seed {self.seed}: {len(self.kills)} kill(s) [{'; '.join(self.kills)}] in "
                f"{self.seconds:.0f} s: {verdict}{exits}")


def sample_values(slots: int):
    """The bundled sample on a 4x4 grid in 5-minute slots (as ``wevent run`` shows it), first ``slots``."""
    from wevent.producers.tdrive import read_tdrive

    return read_tdrive([SAMPLE_TDRIVE], "personalized", grid=(4, 4), slot_seconds=SLOT_SECONDS,
                       max_slots=slots).values


def trial_config(values, seed: int, model: str = "central", mechanism: str | None = None):
    """BA (or ``mechanism``) over the sample (central), or LPA with devices answering within 5 s (local)."""
    from ..stream.config import parse_config

    mechanism = mechanism or MECHANISM[model]
    stream = {"name": STREAM, "model": model, "mechanism": mechanism, "epsilon": 1.0, "window": 10,
              "domain": values.domain_size, "users": values.users, "slot_seconds": SLOT_SECONDS, "start": values.start,
              "options": TRIAL_OPTIONS.get(mechanism, {})}
    if model == "local":
        stream["options"] = {"block_size": LOCAL_BLOCK, "deadline_seconds": LOCAL_DEADLINE}
    return parse_config({"app": "wevent-crash", "seed": seed, "report_partitions": 2, "stream_partitions": 2,
                         "streams": [stream]})


def clean_releases(config, values, workdir: Path | None = None, settings: Settings = Settings()) -> dict[int, dict]:
    """slot -> {"release", "extras"} of an uninterrupted run: ``wevent simulate`` on the same values
    with the same noise (for the central model, the mechanism run in this process is the same, with
    the server's key as ``settings`` give it: by default, from the config's seed)."""
    stream = config.stream(STREAM)
    if stream.model == "central":
        from ..stream.agents.processors import logic_for

        mechanism = logic_for(config, stream, settings).new_mechanism()
        return {r.slot: {"release": r.release.tolist()} for r in mechanism.run(values.counts().astype(float))}
    from ..stream.runtime.child_processes import WEVENT_COMMAND

    if workdir is None:
        raise ValueError("simulating a local-model stream needs a working directory")
    dump, log = workdir / "values.npz", workdir / "simulated.jsonl"
    values.save(dump)
    subprocess.run([*WEVENT_COMMAND, "simulate", "-m", stream.mechanism, "--input", str(dump),
                    "-e", str(stream.epsilon), "-w", str(stream.window), "--seed", str(config.seed), "--stream", STREAM,
                    "--block-size", str(LOCAL_BLOCK), "--releases", str(log), "--json", "--no-progress"],
                   check=True, capture_output=True, timeout=300)
    return {r["slot"]: {"release": r["release"], "extras": r["extras"]} for r in map(json.loads, log.read_text().splitlines())}


@dataclass
class Schedule:
    """A trial's kills: (seconds after start, target, restart delay), drawn from its seed.

    One to three kills of the worker, the first within 2.5 s; half the time one of the replay; in
    the local model also one or two of a device fleet shard ("devices0", "devices1"). Each killed
    process is restarted after up to ``max_delay`` seconds (the replay after up to 2 s)."""

    events: list[tuple[float, str, float]]

    @classmethod
    def draw(cls, seed: int, horizon: float, local: bool = False, max_delay: float = 5.0) -> "Schedule":
        rng = np.random.default_rng([seed, 0xC7A5])
        # the first kill lands within 2.5 s: a worker alone takes longer to join its group, so no
        # trial can have released every slot before it (within 5 s, a quiet machine sometimes could)
        events = [(float(rng.uniform(1.0, min(2.5, horizon) if i == 0 else horizon)), "worker",
                   float(rng.uniform(0.0, max_delay))) for i in range(int(rng.integers(1, 4)))]
        if rng.random() < 0.5:
            events.append((float(rng.uniform(0.5, horizon / 2)), "replay", float(rng.uniform(0.0, 2.0))))
        if local:
            events += [(float(rng.uniform(1.0, horizon)), f"devices{rng.integers(0, 2)}",
                        float(rng.uniform(0.0, max_delay))) for _ in range(int(rng.integers(1, 3)))]
        return cls(sorted(events))


def run_trial(seed: int,  # noqa: C901 - one trial's script: start, feed, crash, restart, compare
              workdir: Path, *, model: str = "central", mechanism: str | None = None, slots: int = 24,
              speed: float = 900.0, horizon: float = 12.0, max_delay: float = 5.0, session_seconds: float = 10.0,
              timeout: float = 150.0, loglevel: str = "warn", settings: Settings = Settings()) -> TrialResult:
    """One trial in ``workdir`` (its config and logs stay there) of ``model``'s mechanism (a central
    one may be named); ``session_seconds`` is the workers' group session timeout (how long a killed
    worker's partitions wait); ``settings`` are what this process's environment gives (by default,
    none: the trials' configs have seeds)."""
    from ..stream.runtime.broker import EmbeddedBroker, create_topics, free_port
    from ..stream.runtime.child_processes import ChildProcess, DevicesProcess, WorkerProcess, write_config
    from ..stream.runtime.subscription import Releases

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    values = sample_values(slots)
    config = trial_config(values, seed, model, mechanism)
    expected = clean_releases(config, values, workdir, settings)
    result = TrialResult(seed, len(expected), model, config.stream(STREAM).mechanism)
    schedule = Schedule.draw(seed, horizon, local=model == "local", max_delay=max_delay)
    started = time.monotonic()
    with EmbeddedBroker(memory_limit_mb=settings.broker_memory_limit_mb()) as broker:
        create_topics(broker.bootstrap, config.topics())
        config_path = write_config(config, workdir)
        processes: dict[str, list[ChildProcess]] = {}  # target -> its processes, the live one last

        def start(target: str, from_slot: int = 1) -> None:
            log = workdir / f"{target}-{len(processes.get(target, []))}.log"
            process: ChildProcess
            if target == "worker":
                process = WorkerProcess(config_path, broker.bootstrap, free_port(), log, tansu_compat=True,
                                        datadir=workdir / f"data-{log.stem}", loglevel=loglevel,
                                        env={"WEVENT_SESSION_SECONDS": str(session_seconds)})
            elif target == "replay":
                process = ChildProcess(["replay", "tdrive", str(SAMPLE_TDRIVE), "--grid", GRID, "--slot-seconds",
                                        str(SLOT_SECONDS), "--max-slots", str(slots), "--config", str(config_path),
                                        "--stream", STREAM, "--bootstrap", broker.bootstrap, "--tansu-compat",
                                        "--from-slot", str(from_slot), "--speed", str(speed), "--no-progress"], log)
            else:  # a device fleet shard keeps its users' ledgers across restarts
                process = DevicesProcess(config_path, STREAM, workdir / "values.npz", broker.bootstrap, log,
                                         tansu_compat=True, new_ledger=target not in processes,
                                         shard=int(target[-1]), shards=2)
            processes.setdefault(target, []).append(process.start())

        start("worker")
        if model == "local":
            start("devices0")
            start("devices1")
        start("replay")
        pending = list(schedule.events)
        restarts: list[tuple[float, str]] = []
        ended: set = set()  # processes whose end is accounted for: killed by the schedule, or reported
        got: dict[int, dict] = {}
        try:
            with Releases(broker.bootstrap, streams=[STREAM]) as releases:
                while len(got) < len(expected) and time.monotonic() - started < timeout:
                    for record in releases.follow(idle_timeout=0.1):
                        got[record.slot] = {"release": record.release, "extras": record.extras}
                    now = time.monotonic() - started
                    while pending and pending[0][0] <= now:
                        at, target, delay = pending.pop(0)
                        if not processes[target][-1].alive:
                            continue  # a replay that already finished, or a kill still waiting for its restart
                        processes[target][-1].kill()
                        ended.add(processes[target][-1])
                        result.kills.append(f"{target} at {at:.1f} s, back after {delay:.1f} s")
                        restarts.append((now + delay, target))
                    for item in [r for r in restarts if r[0] <= now]:
                        restarts.remove(item)
                        # every slot up to the last release reached every partition before it
                        start(item[1], from_slot=min(max(got, default=0) + 1, slots))
                    for process in [group[-1] for group in processes.values()]:
                        code = process.returncode
                        if code not in (None, 0) and process not in ended:  # it exited by itself: a finding
                            ended.add(process)
                            last = process.log_tail(1).strip()
                            result.exits.append(f"{process.log_path.stem} at {now:.1f} s, exit code {code}: {last}")
                result.conflicts = sorted(slot for _, slot in releases.conflicts)
            if not broker.alive:
                result.exits.append(f"the embedded broker, {broker.describe_exit()}")
            if len(got) < len(expected) or any(not _same(got[s], expected[s]) for s in got):
                result.positions = positions(broker.bootstrap, config)
        finally:
            every = [p for group in processes.values() for p in group]
            for process in every:
                process.stop(5.0)
            result.logs = "\n".join(f"--- {p.log_path.name}\n{p.log_tail(20)}" for p in every)
    result.seconds = time.monotonic() - started
    with open(workdir / "releases.jsonl", "w") as out:  # what the trial saw beside the clean run, to inspect
        for slot in sorted(got):
            out.write(json.dumps({"slot": slot, "got": got[slot], "clean": expected[slot]}) + "\n")
    result.released = len(got)
    result.missing = sorted(set(expected) - set(got))
    unlike = sorted(s for s in got if not _same(got[s], expected[s]))
    if unlike and _short(got[unlike[0]], expected[unlike[0]]):
        # answers missed their deadline: that release says so, and every later
        # one may follow another path of the mechanism from it
        result.short = unlike
    else:
        result.differing = unlike
    return result


def run_trials(trials, root: Path, *, parallel: int = 1, **options):
    """The results of ``trials`` ((seed, model) pairs, or (seed, model, mechanism)), ``parallel`` at a
    time, each with its own broker and processes in ``root/<mechanism><seed>``, in their order;
    ``options`` go to :func:`run_trial`."""
    from concurrent.futures import ThreadPoolExecutor

    def one(trial):
        seed, model, mechanism = (*trial, None)[:3]
        mechanism = mechanism or MECHANISM[model]
        return run_trial(seed, Path(root) / f"{mechanism}{seed}", model=model, mechanism=mechanism, **options)

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        yield from pool.map(one, trials)


def _same(got: dict, expected: dict) -> bool:
    """The same release, with the same fields as the clean run's (local: answers, bits, budgets)."""
    extras = got.get("extras", {})
    return got["release"] == expected["release"] and all(extras.get(k) == v for k, v in expected.get("extras", {}).items())


def _short(got: dict, expected: dict) -> bool:
    """Whether a local-model release was made from fewer answers in a phase than the clean run's
    because asked devices did not answer in time: its ``n1``/``n2`` are below the clean run's and
    below the users it says that phase asked (``asked1``/``asked2``). Fewer answers with as many
    asked would be a lost answer, not a deadline."""
    extras, clean = got.get("extras", {}), expected.get("extras", {})
    return any(f"n{phase}" in clean and extras.get(f"n{phase}", 0) < min(clean[f"n{phase}"], extras.get(f"asked{phase}", 0))
               for phase in (1, 2))


def register(sub) -> None:
    p = add_command(
        sub, "crash", summary="random SIGKILLs of the worker, the replay and devices; releases against a clean run",
        description='Kill the worker, the replay and the devices at random (SIGKILL) during runs, and check that the releases are those of a clean run.',
        examples=[
        ('three trials of the central model', 'wevent bench crash --trials 3'),
        ('a local-model stream, two trials at once', 'wevent bench crash --model local --trials 4 --parallel 2')])
    p.add_argument("--trials", type=int, default=10, help="number of trials (default: 10)")
    p.add_argument("--model", choices=["central", "local"], default="central",
                   help="central: BA, or the --mechanism named; local: LPA with a two-shard device fleet "
                   "(default: central)")
    p.add_argument("--mechanism", "-m", choices=_central_mechanisms(), default=None,
                   help="the central model's mechanism (default: ba)")
    p.add_argument("--seed", type=int, default=0, help="seed of the first trial; trial i uses seed + i (default: 0)")
    p.add_argument("--slots", type=int, default=24, help="slots per trial (default: 24)")
    p.add_argument("--parallel", type=int, default=1, help="trials run at the same time (default: 1)")
    p.add_argument("--loglevel", default="warn", choices=["warn", "info", "debug"], help="the workers' log level")
    p.add_argument("--workdir", help="keep every trial's config and logs here (default: a temporary directory)")
    p.set_defaults(handler=handle)


def handle(args) -> int:
    from ..errors import UsageError

    if args.trials < 1 or not 2 <= args.slots or not 1 <= args.parallel <= 16:
        raise UsageError("--trials must be at least 1, --slots at least 2 and --parallel in 1..16")
    if args.mechanism and args.model != "central":
        raise UsageError("--mechanism names a central mechanism; --model local runs LPA")
    root = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="wevent-crash-"))
    verdicts = dict.fromkeys(("identical", "short", "wrong", "stalled"), 0)
    trials = [(seed, args.model, args.mechanism) for seed in range(args.seed, args.seed + args.trials)]
    for result in run_trials(trials, root, parallel=args.parallel, slots=args.slots, loglevel=args.loglevel,
                             settings=args.settings):
        verdicts[result.verdict] += 1
        print(result.summary(), flush=True)
        if not result.correct:
            print(f"  positions: {result.positions}", flush=True)
    print(f"{args.trials} trials: identical {verdicts['identical']}, short of device answers by design "
          f"{verdicts['short']}, wrong {verdicts['wrong']}, stalled {verdicts['stalled']} (logs in {root})")
    return 0 if verdicts["identical"] + verdicts["short"] == args.trials else 1


def _central_mechanisms() -> list[str]:
    from ..core.registry import mechanisms

    return sorted(name for name, cls in mechanisms().items() if cls.model == "central")


def positions(bootstrap: str, config) -> dict[str, object]:
    """Where a failed trial stands: the group's committed offset of each partition and its high
    watermark, the offset each table state records as applied (from the last changelog record of
    each key) and the broker's consumer groups. A part the broker cannot answer (it may be what
    stalled the trial) says so in its place instead of hiding the trial's own verdict."""
    found: dict[str, object] = {}
    for name, read in (("committed", _committed), ("states", _states), ("groups", _groups)):
        try:
            found[name] = read(bootstrap, config)
        except Exception as exc:  # noqa: BLE001 - a diagnostic: show what could not be read
            found[name] = f"unavailable: {type(exc).__name__}: {exc}"
    return found


def _committed(bootstrap: str, config) -> dict[str, str]:
    from confluent_kafka import Consumer, TopicPartition

    from ..stream.runtime.kafka import consumer_config

    committed = {}
    consumer = Consumer(consumer_config(bootstrap) | {"group.id": config.app})
    try:
        tps = [TopicPartition(topic, p) for topic, n in config.topics().items() for p in range(n)]
        for tp in consumer.committed(tps, timeout=30):
            high = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=30)[1]
            committed[f"{tp.topic}:{tp.partition}"] = f"{tp.offset} of {high}"  # a stall, or data never sent?
    finally:
        consumer.close()
    return committed


def _states(bootstrap: str, config) -> dict[str, object]:
    from ..core import packing
    from ..stream.wire.topics import changelog

    states: dict[str, object] = {}
    for table in ("assembler", "dissimilarity-state"):
        last = dict(_keyed(bootstrap, changelog(config.app, table)))  # the newest value of each key
        for key, value in last.items():
            if value is None:  # a tombstone: the table deleted the key
                states[f"{table} {key}"] = "deleted"
                continue
            try:
                states[f"{table} {key}"] = packing.unpack(value)["offsets"]
            except Exception as exc:  # noqa: BLE001 - a diagnostic: show what could not be read
                states[f"{table} {key}"] = f"unreadable: {exc}"
    return states


def _groups(bootstrap: str, config) -> list[str]:
    from confluent_kafka.admin import AdminClient

    from ..stream.runtime.kafka import client_config

    return [g.group_id for g in AdminClient(client_config(bootstrap)).list_consumer_groups().result(30).valid]


def _keyed(bootstrap: str, topic: str) -> list[tuple[str, bytes | None]]:
    from confluent_kafka import Consumer, TopicPartition

    from ..stream.runtime.kafka import consumer_config

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
