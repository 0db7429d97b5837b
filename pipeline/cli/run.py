"""``wevent run``: the whole system on one machine, with live releases in the terminal.

Starts the embedded broker (unless a Kafka is configured), creates the topics, starts a worker,
replays the feed (the bundled sample by default) into ``reports`` and prints every release as it
arrives; metrics are served on the worker's web port. With ``--slots N --release-log FILE`` it
stops after N slots and writes every release as one JSON line.

Keys: the worker gets the server's noise key and the device fleet the devices' key, each through
its environment only. They come from ``WEVENT_NOISE_KEY`` and ``WEVENT_DEVICE_KEY`` when set;
otherwise from a seed (``--seed`` or the config's ``seed``: experiments only, both keys are then
public functions of it); otherwise they are two independent random keys drawn for this run.

Everything the run started (broker, worker, devices) is stopped, and its working directory (the
config, the devices' true values, the logs) deleted, on every exit: the end of the run, an
error, and SIGINT, SIGTERM or SIGHUP.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import sys
import tempfile
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np

from producers.replay import replay as replay_feed

from ._common import (
    LOOPBACK,
    UsageError,
    bootstrap_servers,
    epsilon_value,
    integer,
    real,
    readable_file,
    seed,
    serve_metrics,
    slot_count,
    window_length,
    writable_file,
)

PORT = integer(0, 65_535)  # 0: a free port


def register(sub) -> None:
    p = sub.add_parser("run", help="run broker, worker and a feed replay; print releases live")
    p.add_argument("--config", "-c", type=readable_file, help="stream config file; default: one central stream over the feed")
    p.add_argument("--stream", help="stream of the config that the feed is replayed into (default: the first)")
    p.add_argument("--feed", type=readable_file, help="a .npz dump of user values to replay (default: the bundled sample feed)")
    p.add_argument("--mechanism", "-m", default="ba", help="mechanism of the default stream (default: ba); a "
                   "local-model one (lpa, ...) runs the devices too, pbd/pba get a generated requirement mix")
    p.add_argument("--epsilon", "-e", type=epsilon_value, default=1.0,
                   help="epsilon of the default stream (default: 1)")
    p.add_argument("--window", "-w", type=window_length, default=20, help="w of the default stream (default: 20)")
    p.add_argument("--slots", type=slot_count, help="stop after this many slots (default: the whole feed)")
    p.add_argument("--release-log", type=writable_file, help="write every release as one JSON line to this file")
    p.add_argument("--audit-log", type=writable_file,
                   help="write every audit record (who was charged what) as one JSON line to this file")
    p.add_argument("--speed", type=real(0, 1e9), default=1200.0,
                   help="replay speed as a multiple of real time; 0 = as fast as possible (default: 1200, "
                   "a 5-minute slot every 0.25 s)")
    p.add_argument("--seed", type=seed, help="derive the keys from this seed, for reproducible "
                   "experiments only: anyone who knows it can remove the noise (default: the config's seed; "
                   "without one, $WEVENT_NOISE_KEY and $WEVENT_DEVICE_KEY, else fresh random keys)")
    p.add_argument("--bootstrap", "-b", type=bootstrap_servers, help="use this Kafka instead of the embedded broker (or $WEVENT_BOOTSTRAP)")
    p.add_argument("--metrics-port", type=PORT, default=0, help="worker web port for /metrics (default: a free port)")
    p.add_argument("--truth-port", type=PORT, default=0, help="port serving the releases' error against the feed's "
                   f"ground truth as /metrics, on {LOOPBACK} only (default: a free port)")
    p.add_argument("--quiet", "-q", action="store_true", help="do not print each release")
    p.set_defaults(handler=handle)


SAMPLE_TDRIVE = Path(__file__).resolve().parents[2] / "producers" / "fixtures" / "tdrive"


def demo_feed():
    """The bundled sample: a day of a few hundred Beijing taxis (T-Drive format), counted on a 4x4
    grid over the papers' bounding box in 5-minute slots (d = 16, about 15 taxis per cell)."""
    from producers.replay import MatrixFeed
    from producers.tdrive import read_tdrive

    data = read_tdrive([SAMPLE_TDRIVE], "personalized", grid=(4, 4), slot_seconds=300.0).values
    data.name = "taxi"
    return MatrixFeed(data)


def mechanism_class(name: str) -> type:
    from ..core.registry import mechanisms

    cls = mechanisms().get(name)
    if cls is None:
        raise UsageError(f"unknown mechanism {name!r}")
    return cls


def default_config(feed, args):
    """One stream over the feed; its model follows from the mechanism (a local one runs devices)."""
    from ..core.local import LocalMechanism
    from ..core.personalized import PersonalizedMechanism
    from ..stream.config import parse_config

    cls = mechanism_class(args.mechanism)
    stream = {"name": feed.name, "model": "central", "mechanism": args.mechanism, "epsilon": args.epsilon,
              "window": args.window, "domain": feed.domain_size, "users": feed.users,
              "slot_seconds": feed.slot_seconds, "start": feed.start, "labels": list(feed.labels)}
    if issubclass(cls, LocalMechanism):
        stream["model"] = "local"
    elif issubclass(cls, PersonalizedMechanism):  # a generated mix tied to --epsilon/--window (the strictest pair)
        stream.update(model="personalized", options={"requirements": {"mix": "groups", "epsilon": args.epsilon,
                                                                      "window": args.window}})
        del stream["epsilon"], stream["window"]
    return parse_config({"app": "wevent", "report_partitions": 2, "stream_partitions": 1, "streams": [stream]})


def run_keys(config, seed: int | None, *, devices: bool, external_kafka: bool) -> tuple[dict[str, str], dict[str, str]]:
    """The worker's and the devices' environments: the server's key, and the devices' key (hex) if
    the run has ``devices``, each with the other side's public key (the devices check requests
    with the server's; a worker with a local-model stream checks reports with the devices').

    Each comes from its environment variable when set, else from the seed (``seed``, else the
    config's), else from the operating system's entropy. With a seed the two keys are separate
    keyed hashes of it (:meth:`SecretKey.from_seed` with purposes ``server`` and ``devices``),
    neither derived from the other; without one they are independent random keys. A seed is
    announced in one line on stderr: it makes the noise public.

    Random keys only suit the embedded broker, whose topics and tables end with the run. An
    external Kafka keeps the streams' state: a slot re-processed after a crash must draw the same
    noise as before, so its key must outlive the run.
    """
    from ..core.randomness import SecretKey
    from ..stream.codecs import REPORT_KEY_ENV, REQUEST_KEY_ENV, report_seal, request_seal
    from ..stream.config import DEVICE_KEY_ENV, NOISE_KEY_ENV

    # A worker with any local-model stream checks device reports with the devices' public key,
    # given as such or derived here from the devices' key (which this run's devices also need).
    checks_reports = any(s.model == "local" for s in config.streams)
    device_key_needed = devices or (checks_reports and not os.environ.get(REPORT_KEY_ENV))
    seeded = replace(config, seed=config.seed if seed is None else seed)
    keys, from_seed = {}, []
    wanted = {NOISE_KEY_ENV: seeded.noise_key} | ({DEVICE_KEY_ENV: seeded.device_key} if device_key_needed else {})
    for variable, key_of in wanted.items():
        if os.environ.get(variable) or seeded.seed is not None:
            keys[variable] = key_of().hex()
            from_seed += [] if os.environ.get(variable) else [variable]
        elif external_kafka:
            raise UsageError(f"an external Kafka keeps the streams' state across runs, so their keys must last too: "
                             f"set {variable} (64 hex characters)")
        else:
            keys[variable] = SecretKey.generate().hex()
    if from_seed:
        print(f"wevent run: seed {seeded.seed}: reproducible noise for experiments only, anyone who knows the seed "
              f"can remove it (without a seed, keys are drawn at random or read from {' and '.join(from_seed)})",
              file=sys.stderr)
    worker = {NOISE_KEY_ENV: keys.pop(NOISE_KEY_ENV)}
    if checks_reports:  # each side checks the other's signatures with a public key only
        worker[REPORT_KEY_ENV] = (report_seal(SecretKey.from_hex(keys[DEVICE_KEY_ENV])).public_hex
                                  if DEVICE_KEY_ENV in keys else os.environ[REPORT_KEY_ENV])
    if not devices:
        return worker, {}
    keys[REQUEST_KEY_ENV] = request_seal(SecretKey.from_hex(worker[NOISE_KEY_ENV])).public_hex
    return worker, keys


class Failed(Exception):
    """A part of the run failed for good (the broker died): one line, exit status 1."""


class Stopped(Exception):
    """A termination signal arrived: the run unwinds and stops what it started."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Signals:
    """SIGINT, SIGTERM and SIGHUP raise :class:`Stopped` in the main thread while installed.

    The children run in their own sessions (a terminal's Ctrl-C must not reach them before the
    run decides the order of shutdown), so nothing stops them but this process. While a child is
    being started (``deferred``) a signal waits until its handle is kept; once the run is
    stopping (``ignoring``) further signals are dropped so that the shutdown completes.
    """

    HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.previous = {}
        self.pending: int | None = None
        self.deferring = False
        self.ignoring = False

    def install(self) -> "Signals":
        self.previous = {signum: signal.signal(signum, self._handle) for signum in self.HANDLED}
        return self

    def restore(self) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum, frame) -> None:
        if self.ignoring:
            return
        if self.deferring:
            self.pending = self.pending or signum
            return
        self.ignoring = True
        raise Stopped(signum)

    @contextlib.contextmanager
    def deferred(self):
        self.deferring = True
        try:
            yield
        finally:
            self.deferring = False
        if self.pending and not self.ignoring:
            self.ignoring = True
            raise Stopped(self.pending)


class ReplayThread:
    """The feed's replay into Kafka, in a thread of this process; ``stop`` ends it within a slot.

    It is stopped before the broker, so that its producer does not go on calling a broker that is gone.
    A replay that fails (its messages not delivered) keeps its error in ``failure`` for the run to report.
    """

    def __init__(self, feed, sink, speed: float) -> None:
        self.stopping = threading.Event()
        self.failure: Exception | None = None
        self.sink = sink
        self.thread = threading.Thread(target=self._replay, args=(feed, sink, speed), daemon=True, name="replay")

    def _replay(self, feed, sink, speed: float) -> None:
        from ..stream.kafka import DeliveryError

        try:
            replay_feed(feed, sink, 1, speed, progress=self._until_stopped, sleep=self.stopping.wait)
        except DeliveryError as exc:
            self.failure = exc

    def _until_stopped(self, slots, total):
        return itertools.takewhile(lambda _: not self.stopping.is_set(), slots)

    def start(self) -> "ReplayThread":
        self.thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self.stopping.set()
        self.sink.abandon()  # the run is ending: what is still queued need not wait for a broker
        self.thread.join(timeout)


def describe(stream, feed, slots: int) -> str:
    budget = (f"epsilon = {stream.epsilon:g} per window of w = {stream.window} slots" if stream.epsilon is not None
              else "every user's own (w_i, epsilon_i)")
    return (f"stream {stream.name!r}: {stream.mechanism}, {budget}, slots of {stream.slot_seconds:g} s; "
            f"{feed.users} users, d = {stream.domain}; replaying {slots} slots")


def handle(args) -> int:
    from producers.replay import MatrixFeed
    from ..core.data import UserValues
    from ..stream.broker import resolve_bootstrap
    from ..stream.config import load_config
    from ..stream.kafka import check_feed_fits

    if not args.config:
        mechanism_class(args.mechanism)
    feed = MatrixFeed(UserValues.load(args.feed)) if args.feed else demo_feed()
    config = load_config(args.config) if args.config else default_config(feed, args)
    stream = config.stream(args.stream) if args.stream else config.streams[0]
    if stream is None:
        raise UsageError(f"the config has no stream {args.stream!r}")
    check_feed_fits(feed, stream)
    keys = run_keys(config, args.seed, devices=stream.model == "local",
                    external_kafka=resolve_bootstrap(args.bootstrap) is not None)
    slots = min(args.slots or feed.slots, feed.slots)
    if args.slots and args.slots > feed.slots:
        print(f"the feed has only {feed.slots} slots", file=sys.stderr)

    signals, started, workdir = Signals(), [], None  # started: broker, worker, devices, replay; stopped in reverse
    grace = {}  # how long each process gets to stop

    def start(process):
        with signals.deferred():  # a signal now waits until the process is in `started`
            started.append(process)
            return process.start()

    try:
        with signals.install().deferred():
            workdir = Path(tempfile.mkdtemp(prefix="wevent-run-"))  # mode 0700: the config, the devices' values, logs
        return _run(args, replace(config, seed=None), stream, feed, slots, keys, workdir, start)
    except Stopped as stop:
        print(f"wevent run: {stop}: stopping", file=sys.stderr)
        return 128 + stop.signum
    except Failed as failure:
        print(f"wevent run: failed: {failure}", file=sys.stderr)
        grace = {"timeout": 2.0}  # without a broker the worker cannot leave its group cleanly: no use waiting
        return 1
    finally:
        signals.ignoring = True  # the shutdown below completes whatever arrives now
        for process in reversed(started):
            process.stop(**grace)
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        signals.restore()


def _run(args, config, stream, feed, slots: int, keys, workdir: Path, start) -> int:
    """Start the processes (through ``start``), replay the feed and follow the releases."""
    from ..stream.broker import EmbeddedBroker, create_topics, free_port, resolve_bootstrap
    from ..stream.kafka import sink_for
    from ..stream.processes import DevicesProcess, WorkerProcess, write_config
    from ..stream.subscription import Releases, format_release
    from ..stream.truth import TruthMonitor

    worker_env, devices_env = keys
    bootstrap = resolve_bootstrap(args.bootstrap)
    broker = None if bootstrap else start(EmbeddedBroker())
    bootstrap = bootstrap or broker.bootstrap
    create_topics(bootstrap, config.topics())
    port = args.metrics_port or free_port()
    truth_port = args.truth_port or free_port()
    config_path = write_config(config, workdir)  # without a seed: the keys travel in the environment only
    worker = start(WorkerProcess(config_path, bootstrap, port, workdir / "worker.log", tansu_compat=broker is not None,
                                 datadir=workdir / "data", env=worker_env))
    children = [worker]
    if stream.model == "local":  # the users' devices hold the values and answer the server's requests
        values = workdir / "values.npz"
        _first_slots(feed, slots).data.save(values)
        devices = DevicesProcess(config_path, stream.name, values, bootstrap, workdir / "devices.log",
                                 tansu_compat=broker is not None)
        devices.env.update(devices_env)
        children.append(start(devices))
    serve_metrics(truth_port, LOOPBACK)  # the error against the truth is a function of raw data
    print(f"broker {bootstrap}{' (embedded tansu)' if broker else ''}; worker metrics "
          f"http://127.0.0.1:{port}/metrics; error against truth http://{LOOPBACK}:{truth_port}/metrics; "
          f"worker log {worker.log_path} (deleted on exit)", file=sys.stderr)
    print(describe(stream, feed, slots), file=sys.stderr)
    sink = sink_for(bootstrap, stream, config.report_partitions, broker is not None)
    replay = start(ReplayThread(_first_slots(feed, slots), sink, args.speed))
    monitor = TruthMonitor.for_stream(stream, feed)
    released = 0
    with Releases(bootstrap, streams=[stream.name]) as releases, \
            (open(args.release_log, "w") if args.release_log else contextlib.nullcontext()) as log:
        while released < slots:
            for record in releases.follow(idle_timeout=1.0):
                monitor.observe(record)
                if log:
                    log.write(record.to_json() + "\n")
                    log.flush()
                if not args.quiet:
                    print(format_release(record), flush=True)
                released += 1
                if released >= slots:
                    break
            else:  # a second without releases: fine while the processes live (they may be starting)
                if broker and not broker.alive:
                    reason = broker.failure or f"the embedded broker stopped ({broker.describe_exit()})"
                    raise Failed(f"{reason}; its topics and the streams' state are gone: {released} of {slots} "
                                 "slots were released")
                for child in children:
                    if not child.alive:
                        raise UsageError(f"{child.command[3]} stopped; its log ends with:\n{child.log_tail()}")
                if replay.failure:
                    raise Failed(f"the replay failed: {replay.failure}")
    if args.audit_log:
        _write_audit_log(args.audit_log, bootstrap, stream.name, slots)
    error = monitor.total / monitor.cells if monitor.cells else float("nan")
    print(f"{released} releases of stream {stream.name!r}; mean absolute error against the truth {error:.3f}"
          + (f"; written to {args.release_log}" if args.release_log else ""), file=sys.stderr)
    return 0


def _write_audit_log(path: str, bootstrap: str, stream: str, slots: int) -> None:
    """The stream's audit records of slots 1..slots (once each), from the audit topic."""
    import json

    from ..stream.subscription import read_topic
    from ..stream.topics import AUDIT

    records = {}
    for value in read_topic(bootstrap, AUDIT):
        record = json.loads(value)
        if record["stream"] == stream and record["slot"] <= slots:
            records.setdefault(record["slot"], value.decode())
    with open(path, "w") as fh:
        fh.writelines(records[slot] + "\n" for slot in sorted(records))


def _first_slots(feed, slots: int):
    """The feed cut to its first ``slots`` slots."""
    from producers.replay import MatrixFeed

    from ..core.data import UserValues

    data = UserValues(np.stack([feed.values_at(t) for t in range(1, slots + 1)]), feed.domain_size, list(feed.labels),
                      list(feed.user_ids), feed.slot_seconds, feed.start, feed.name)
    return MatrixFeed(data)
