"""The whole system on one machine: what ``wevent run`` starts, follows and stops.

A :class:`LocalRun` starts, in order, the embedded broker (unless a Kafka is given), the topics,
a worker, the device fleet of a local-model stream, and then a replay of the feed into
``reports``; it follows the stream's releases, measuring their error against the feed's truth,
until the wanted slots are released. Whatever happens (the end of the run, an error, SIGINT,
SIGTERM or SIGHUP), :meth:`LocalRun.close` stops everything it started, in reverse order, and
deletes its working directory: the config, the devices' true values and the logs. A run killed
outright (SIGKILL) takes its children with it (the kernel kills them:
:func:`~wevent.stream.runtime.child_processes.die_with_parent`), and the next run deletes the
directory it left (:mod:`~wevent.stream.runtime.workdir`).

Keys (:func:`run_keys`): the worker gets the server's noise key and the device fleet the
devices' key, each through its environment only. They come from ``WEVENT_NOISE_KEY`` and
``WEVENT_DEVICE_KEY`` when set; otherwise from a seed (experiments only: both keys are then
public functions of it); otherwise they are two independent random keys drawn for this run.

A run shows only releases made with the parameters and the key it asked for (:class:`MadeWith`).
On a Kafka that keeps streams across runs, its stream may exist already: before its worker
starts, the run reads the stream's newest release that verifies under its key. One made with
other parameters, or none verifying while the stream has releases (another key made them), stops
the run at once (:class:`StreamConflict`); one made with the same continues the stream. While
the run follows its releases, it watches its stream's dead letters, and one that stops the stream
(M2 refusing changed parameters, say) stops the run with its one line.
"""

from __future__ import annotations

import contextlib
import itertools
import shlex
import shutil
import signal
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from ...errors import EXIT_INTERNAL, EXIT_LOST_STATE, EXIT_UNAVAILABLE, EXIT_USAGE, LostState, UsageError
from ..config import AppConfig, StreamConfig
from ..settings import NOISE_KEY_ENV, Settings
from ..wire.records import PublishedRecords, ReleaseRecord
from ..wire.seals import SignatureSeal

if TYPE_CHECKING:  # imported where the broker starts: `wevent run --help` stays quick
    from .broker import EmbeddedBroker

__all__ = ["LocalRun", "RunKeys", "run_keys", "MadeWith", "StreamConflict", "Failed", "Stopped",
           "Signals", "ReplayThread"]


@dataclass(frozen=True)
class RunKeys:
    """The environments of a run's worker and device fleet, and which keys a seed made.

    Parameters
    ----------
    worker
        The worker's environment: the server's key, and the devices' public key when a stream is local.
    devices
        The device fleet's environment (empty without one): its key and the server's public key.
    seed
        The seed the keys in ``from_seed`` were derived from.
    from_seed
        The variables whose key the seed made (they were not set): the noise of those is public to
        whoever knows the seed.
    """

    worker: dict[str, str]
    devices: dict[str, str] = field(default_factory=dict)
    seed: int | None = None
    from_seed: tuple[str, ...] = ()


def run_keys(config: AppConfig, seed: int | None, settings: Settings, *, devices: bool,
             external_kafka: bool) -> RunKeys:
    """The worker's and the devices' environments: the server's key, and the devices' key (hex) if
    the run has ``devices``, each with the other side's public key (the devices check requests
    with the server's; a worker with a local-model stream checks reports with the devices').

    Each comes from its environment variable when set (as ``settings`` give it), else from the seed
    (``seed``, else the config's), else from the operating system's entropy. With a seed the two keys are separate
    keyed hashes of it (:meth:`SecretKey.from_seed` with purposes ``server`` and ``devices``),
    neither derived from the other; without one they are independent random keys.

    Random keys only suit the embedded broker, whose topics and tables end with the run. An
    external Kafka keeps the streams' state: a slot re-processed after a crash must draw the same
    noise as before, so its key must outlive the run.
    """
    from ...core.randomness import SecretKey
    from ..settings import DEVICE_KEY_ENV, NOISE_KEY_ENV, REPORT_KEY_ENV, REQUEST_KEY_ENV
    from ..wire.seals import report_seal, request_seal

    # A worker with any local-model stream checks device reports with the devices' public key,
    # given as such or derived here from the devices' key (which this run's devices also need).
    checks_reports = any(s.model == "local" for s in config.streams)
    device_key_needed = devices or (checks_reports and not settings.device_public_key_hex)
    seeded = replace(config, seed=config.seed if seed is None else seed)
    keys, from_seed = {}, []
    given = {NOISE_KEY_ENV: settings.noise_key_hex, DEVICE_KEY_ENV: settings.device_key_hex}
    wanted = ({NOISE_KEY_ENV: settings.noise_key}
              | ({DEVICE_KEY_ENV: settings.device_key} if device_key_needed else {}))
    for variable, key_of in wanted.items():
        if given[variable] or seeded.seed is not None:
            keys[variable] = key_of(seeded).hex()
            from_seed += [] if given[variable] else [variable]
        elif external_kafka:
            raise UsageError(f"an external Kafka keeps the streams' state across runs, so their keys must last too: "
                             f"set {variable} (64 hex characters)")
        else:
            keys[variable] = SecretKey.generate().hex()
    worker = {NOISE_KEY_ENV: keys.pop(NOISE_KEY_ENV)}
    if checks_reports and DEVICE_KEY_ENV in keys:  # each side checks the other's signatures with a public key only
        worker[REPORT_KEY_ENV] = report_seal(SecretKey.from_hex(keys[DEVICE_KEY_ENV])).public_hex
    elif checks_reports:
        assert settings.device_public_key_hex, "without it the devices' key was needed, and made above"
        worker[REPORT_KEY_ENV] = settings.device_public_key_hex
    fleet = {}
    if devices:
        fleet = keys | {REQUEST_KEY_ENV: request_seal(SecretKey.from_hex(worker[NOISE_KEY_ENV])).public_hex}
    return RunKeys(worker, fleet, seeded.seed, tuple(from_seed))


@dataclass(frozen=True)
class MadeWith:
    """What the releases of a run's stream say they were made with, and the key that signs them.

    Parameters
    ----------
    stream
        The run's stream.
    mechanism, epsilon, window
        The mechanism's name and budget as its releases state them.
    parameters
        Their ``parameters`` (:func:`~wevent.stream.agents.publish.release_parameters`).
    key
        The release public key of the run's noise key.
    """

    stream: StreamConfig
    mechanism: str
    epsilon: float
    window: int
    parameters: dict[str, Any]
    key: SignatureSeal

    @classmethod
    def of(cls, config: AppConfig, stream: StreamConfig, noise_key_hex: str) -> "MadeWith":
        """What the worker of ``config`` makes ``stream``'s releases with, under the noise key given in hex."""
        from ..agents.processors import logic_for
        from ..agents.publish import release_parameters
        from ..wire.seals import release_seal

        settings = Settings(noise_key_hex=noise_key_hex)
        mechanism = logic_for(config, stream, settings).new_mechanism()
        return cls(stream, mechanism.name, mechanism.epsilon, mechanism.window, release_parameters(stream, mechanism),
                   release_seal(settings.noise_key(config)).public())

    def differences(self, record: ReleaseRecord) -> list[str]:
        """What ``record`` (a release of the stream) was made with that this run's releases are not,
        by name: mechanism, epsilon, w, domain, noise, users, options, slot clock (empty: the same)."""
        theirs, ours = record.parameters or {}, self.parameters
        found = [f"{name} {_shown(was)} (this run: {_shown(now)})" for name, was, now in (
            ("mechanism", record.mechanism, self.mechanism), ("epsilon", record.epsilon, self.epsilon),
            ("w", record.window, self.window), ("domain", theirs.get("domain"), ours["domain"]),
            ("noise", theirs.get("noise"), ours["noise"]), ("users", theirs.get("users"), ours["users"]))
            if was != now]
        if theirs.get("options") != ours["options"]:
            found.append("options")
        start = self.stream.slot_start(record.slot)
        if (record.slot_start, record.slot_end) != (start, self.stream.slot_end(record.slot)):
            found.append(f"slot clock (slot {record.slot} starts at {record.slot_start:g}; this run: {start:g})")
        if not found and theirs.get("fingerprint") != ours["fingerprint"]:
            found.append(f"parameters fingerprint {_shown(theirs.get('fingerprint'))} "
                         f"(this run: {ours['fingerprint']})")
        return found


def _shown(value) -> str:
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


class StreamConflict(UsageError):
    """The run's stream exists with other parameters or under another key, or its worker stopped
    releasing it: one line, to which the command adds how to start a new stream."""


class Failed(Exception):
    """A part of the run failed for good (the broker died, the replay was not delivered, the
    worker or the devices stopped); ``status`` is the exit status that says so (:mod:`wevent.errors`)."""

    def __init__(self, reason: str, status: int = EXIT_INTERNAL) -> None:
        super().__init__(reason)
        self.status = status


class Stopped(Exception):
    """A termination signal arrived: the run unwinds and stops what it started."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Signals:
    """SIGINT, SIGTERM and SIGHUP raise :class:`Stopped` in the main thread while installed.

    The children run in their own sessions (a terminal's Ctrl-C must not reach them before the
    run decides the order of shutdown), so nothing stops them but this process, or its death. While a child is
    being started (``deferred``) a signal waits until its handle is kept; once the run is
    stopping (``ignoring``) further signals are dropped so that the shutdown completes.
    """

    HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.previous: dict[int, Any] = {}  # signal -> the handler before install (a callable or a constant)
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

    def __init__(self, replay, feed, sink, speed: float) -> None:
        self.stopping = threading.Event()
        self.failure: Exception | None = None
        self.sink = sink
        self.thread = threading.Thread(target=self._replay, args=(replay, feed, sink, speed), daemon=True,
                                       name="replay")

    def _replay(self, replay, feed, sink, speed: float) -> None:
        from .kafka import DeliveryError

        try:
            replay(feed, sink, 1, speed, progress=self._until_stopped, sleep=self.stopping.wait)
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


class LocalRun:
    """Broker, topics, worker, devices and a feed's replay, started and stopped as one.

    Use :meth:`open` first and :meth:`close` last, whatever happens in between (``close`` is
    what stops the processes and deletes the working directory), and in between
    :meth:`start_processes`, :meth:`start_replay` and :meth:`releases`.

    Parameters
    ----------
    config
        The streams; its ``seed`` is dropped from the config the worker reads, whose keys come
        from ``keys`` through its environment only.
    stream
        The stream of ``config`` the feed is replayed into, and whose releases are followed.
    feed
        The feed (:class:`wevent.producers.replay.MatrixFeed`) whose truth the releases are scored against.
    replayed
        Its first slots (:func:`wevent.producers.replay.first_slots`): the slots replayed and released.
    keys
        The worker's and the devices' environments (:func:`run_keys`).
    settings
        What this process's environment gives: how to reach Kafka, the embedded broker's memory limit.
    bootstrap
        A Kafka to use; None starts the embedded broker.
    metrics_port
        The worker's web port (/metrics, /healthz, /query).
    replay
        The loop that sends a feed's slots to a sink (:func:`wevent.producers.replay.replay`).
    speed
        The replay's speed as a multiple of real time (0: as fast as possible).
    """

    def __init__(self, config: AppConfig, stream: StreamConfig, feed, replayed, keys: RunKeys, settings: Settings, *,
                 replay, bootstrap: str | None, metrics_port: int, speed: float) -> None:
        from .truth import TruthMonitor

        self.config = replace(config, seed=None)
        self.stream = stream
        self.feed = feed
        self.replayed = replayed
        self.slots = replayed.slots
        self.replay_loop = replay
        self.keys = keys
        self.settings = settings
        self.bootstrap = bootstrap
        self.metrics_port = metrics_port
        self.speed = speed
        self.monitor = TruthMonitor.for_stream(stream, feed)
        self.released = 0
        self.broker: EmbeddedBroker | None = None
        self.worker = None
        self.children: list = []  # worker and devices: the run fails when one stops
        self.replay: ReplayThread | None = None
        self.signals = Signals()
        self.started: list = []  # broker, worker, devices, replay: stopped in reverse
        self.workdir: Path | None = None
        self.stop_timeout: dict[str, float] = {}  # how long each process gets to stop
        self.made_with = MadeWith.of(self.config, stream, keys.worker[NOISE_KEY_ENV])
        self.continues: int | None = None  # the newest slot the stream had released before this run
        self.letters_from: dict[int, int] = {}  # where the dead letters this run watches begin
        self.published: PublishedRecords | None = None  # the releases read (what was dropped)

    def open(self) -> "LocalRun":
        """Install the signal handlers and make the working directory (mode 0700), after deleting
        those of runs that are gone (:func:`~wevent.stream.runtime.workdir.make_workdir`)."""
        from .workdir import make_workdir

        with self.signals.install().deferred():
            self.workdir = make_workdir("run")
        return self

    def _start(self, process):
        with self.signals.deferred():  # a signal now waits until the process is in `started`
            self.started.append(process)
            return process.start()

    def start_processes(self) -> None:
        """The broker (unless a Kafka is given), the topics, the worker and, for a local-model
        stream, the device fleet holding the users' values."""
        from .broker import EmbeddedBroker, create_topics
        from .child_processes import DevicesProcess, WorkerProcess, write_config

        if self.bootstrap is None:
            self.broker = self._start(EmbeddedBroker(memory_limit_mb=self.settings.broker_memory_limit_mb()))
            self.bootstrap = self.broker.bootstrap
        create_topics(self.kafka, self.config.topics(), credentials=self.settings.kafka_credentials(self.config))
        self.check_existing_stream()
        workdir = self.directory
        config_path = write_config(self.config, workdir)  # without a seed: the keys travel in the environment only
        self.worker = self._start(WorkerProcess(config_path, self.kafka, self.metrics_port,
                                                workdir / "worker.log", tansu_compat=self.embedded,
                                                datadir=workdir / "data", env=self.keys.worker))
        self.children = [self.worker]
        if self.stream.model == "local":  # the users' devices hold the values and answer the server's requests
            values = workdir / "values.npz"
            self.replayed.data.save(values)
            devices = DevicesProcess(config_path, self.stream.name, values, self.kafka,
                                     workdir / "devices.log", tansu_compat=self.embedded,
                                     new_ledger=True)  # the run owns the fleet's whole life, and its ledger's
            devices.env.update(self.keys.devices)
            self.children.append(self._start(devices))

    @property
    def kafka(self) -> str:
        """The run's Kafka bootstrap servers: the given ones, or its embedded broker's once started."""
        assert self.bootstrap is not None, "the run's broker has not started"
        return self.bootstrap

    @property
    def directory(self) -> Path:
        """The run's working directory (made by :meth:`open`)."""
        assert self.workdir is not None, "the run is not open"
        return self.workdir

    @property
    def embedded(self) -> bool:
        """Whether the run's broker is its own embedded tansu."""
        return self.broker is not None

    @property
    def subscribe_command(self) -> str:
        """The ``wevent subscribe`` line that follows this run's stream from another terminal: its
        broker, its release public key and its stream, so that a reader verifies what it shows.

        >>> from types import SimpleNamespace
        >>> run = SimpleNamespace(bootstrap="127.0.0.1:9092", stream=SimpleNamespace(name="taxi"),
        ...                       made_with=SimpleNamespace(key=SimpleNamespace(public_hex="ab" * 32)))
        >>> LocalRun.subscribe_command.fget(run)  # doctest: +ELLIPSIS
        'wevent subscribe --bootstrap 127.0.0.1:9092 --release-key abab...abab --stream taxi'
        """
        return (f"wevent subscribe --bootstrap {self.bootstrap} --release-key {self.made_with.key.public_hex} "
                f"--stream {shlex.quote(self.stream.name)}")

    @property
    def tansu_compat(self) -> bool:
        """Whether the run's clients need tansu's workarounds: its own broker's, or a tansu given with
        ``--bootstrap`` and ``WEVENT_TANSU_COMPAT=1`` (which the worker and devices read themselves)."""
        return self.embedded or self.settings.tansu_compat

    def start_replay(self) -> None:
        """The feed's replay into ``reports``, in a thread."""
        from .kafka import sink_for

        sink = sink_for(self.kafka, self.stream, self.config.report_partitions, self.tansu_compat,
                        credentials=self.settings.kafka_credentials(self.config))
        self.replay = self._start(ReplayThread(self.replay_loop, self.replayed, sink, self.speed))

    def check_existing_stream(self) -> None:
        """Raises :class:`StreamConflict` at once when the stream exists on the broker with other
        parameters (its newest release that verifies under this run's key differs in
        :meth:`MadeWith.differences`) or under another key (it has releases and none verifies);
        notes in ``continues`` the slot an existing stream of the same parameters and key reached.
        It also marks where the dead letters this run watches begin (:meth:`releases`)."""
        from ..wire.topics import RELEASES
        from .subscription import DeadLetterWatch, newest_first

        credentials = self.settings.kafka_credentials(self.config)
        self.letters_from = DeadLetterWatch.ends(self.kafka, credentials)
        name, where = self.stream.name, f"stream {self.stream.name!r} on {self.bootstrap}"
        published = PublishedRecords(self.made_with.key)
        with contextlib.closing(newest_first(self.kafka, RELEASES, name, credentials)) as messages:
            for message in messages:
                fields = published.read(message)
                if fields is None or fields.get("record") == "audit" or fields["stream"] != name:
                    continue
                try:
                    record = ReleaseRecord.from_fields(fields)
                except (ValueError, TypeError):
                    continue
                differences = self.made_with.differences(record)
                if differences:
                    raise StreamConflict(f"{where} was made with other parameters: {', '.join(differences)}")
                self.continues = record.slot
                return
        unverified = published.dropped["unsigned"] + published.dropped["with an invalid signature"]
        if unverified:
            raise StreamConflict(
                f"{where} was made under another key: none of its {unverified} records on {RELEASES} verifies "
                f"under this run's release key (fingerprint {self.made_with.key.fingerprint})")

    def releases(self) -> Iterator:
        """The stream's releases (:class:`~wevent.stream.runtime.subscription.Published`: each record
        with its signed message), each once, verified under this run's key and made with its
        parameters, until ``slots`` are released. Raises :class:`Failed` when the broker dies or the
        replay fails, :class:`StreamConflict` when a dead letter says the stream stopped releasing,
        and when the worker or the devices stop (quoting the last line of their log)."""
        from .prometheus import export_release_error
        from .subscription import DeadLetterWatch, Releases

        credentials = self.settings.kafka_credentials(self.config)
        with (Releases(self.kafka, streams=[self.stream.name], tansu_compat=self.tansu_compat,
                       credentials=credentials, key=self.made_with.key,
                       parameters=self.made_with.parameters) as releases,
              DeadLetterWatch(self.kafka, self.stream.name, self.letters_from, self.tansu_compat,
                              credentials) as letters):
            self.published = releases.published
            while self.released < self.slots:
                for published in releases.follow_published(idle_timeout=1.0):
                    export_release_error(self.stream.name, self.monitor.observe(published.record))
                    self.released += 1
                    yield published
                    if self.released >= self.slots:
                        break
                else:  # a second without releases: fine while the processes live (they may be starting)
                    self._check_letters(letters)
                    self._check_alive()

    def _check_letters(self, letters) -> None:
        letter = letters.stopping()
        if letter is not None:
            raise StreamConflict(f"the worker stopped releasing stream {self.stream.name!r} ({letter.reason}): "
                                 f"{letter.detail}")

    def _check_alive(self) -> None:
        if self.broker and not self.broker.alive:
            reason = self.broker.failure or f"the embedded broker stopped ({self.broker.describe_exit()})"
            # past its memory limit, the same run would stop there again: the limit or the run must change
            self._fail(f"{reason}; its topics and the streams' state are gone: {self.released} of {self.slots} "
                       "slots were released", EXIT_USAGE if self.broker.failure else EXIT_LOST_STATE)
        for child in self.children:
            if not child.alive:
                raise Failed(f"the {child.name} stopped ({child.describe_exit()}); the last line of its log: "
                             f"{child.last_line() or '(none)'}", child.exit_status)
        assert self.replay is not None, "the releases are read once the replay has started"
        if self.replay.failure:
            lost = isinstance(self.replay.failure, LostState)
            self._fail(f"the replay failed: {self.replay.failure}", EXIT_LOST_STATE if lost else EXIT_UNAVAILABLE)

    def _fail(self, reason: str, status: int) -> None:
        # without a broker the worker cannot leave its group cleanly: no use waiting
        self.stop_timeout = {"timeout": 2.0}
        raise Failed(reason, status)

    @property
    def mean_error(self) -> float:
        """The releases' mean absolute error against the feed's truth so far (NaN before any)."""
        return self.monitor.total / self.monitor.cells if self.monitor.cells else float("nan")

    def write_audit_log(self, path: str) -> None:
        """The stream's audit records of slots 1..slots (once each, as published: signed), from the
        audit topic, one JSON line each: those that verify under this run's key, of its parameters."""
        from .subscription import read_topic
        from ..wire.topics import AUDIT

        published = PublishedRecords(self.made_with.key)
        records: dict[int, str] = {}
        for value in read_topic(self.kafka, AUDIT, credentials=self.settings.kafka_credentials(self.config)):
            record = published.read(value)
            if (record is not None and record["stream"] == self.stream.name and record.get("record") == "audit"
                    and record.get("parameters") == self.made_with.parameters and isinstance(record.get("slot"), int)
                    and record["slot"] <= self.slots):
                records.setdefault(record["slot"], value.decode())
        with open(path, "w") as fh:
            fh.writelines(records[slot] + "\n" for slot in sorted(records))

    def close(self) -> None:
        """Stop what was started, in reverse order, and delete the working directory."""
        self.signals.ignoring = True  # the shutdown below completes whatever arrives now
        for process in reversed(self.started):
            process.stop(**self.stop_timeout)
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        self.signals.restore()
