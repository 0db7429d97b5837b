"""Loud faults: rate-limited client logs, and what a worker's ``/livez`` and ``/readyz`` report.

A broker that goes away makes every Kafka client log the same connection error again and again;
:class:`RateLimit` lets one line through per interval and says how many it held back.
:class:`BrokerWatch` looks at the broker from beside the worker (its own client, in a thread):
whether the broker answers, whether it still holds what the worker has read, whether the
worker's consumer moves while input is pending, and whether each stream it owns releases; that is
``/readyz``. ``/livez`` asks only that the process and its event loop answer, so a Kafka outage
makes a worker unready, never dead. Before the worker's app runs (while it waits for Kafka),
:class:`StartingProbes` answers both.

Faults are loud, and Kafka outages are ridden out
-------------------------------------------------

**Faults are loud, and Kafka outages are ridden out.** A worker answers two probes on its web
port. `/livez` answers 200 whenever its process and event loop do, Kafka or not: the liveness
probes (Helm, the image's `HEALTHCHECK`) never restart a worker for a Kafka outage. `/readyz`
answers 503 with a JSON list of problems when the broker is unreachable, when one of its
partitions has input past a committed offset that has not moved for `--stall-seconds` (default
120, `WEVENT_STALL_SECONDS`), or when a stream it owns got input and released nothing for that
long (plus the device deadline for a local stream); a worker that is not ready leaves the
Service. A worker started while Kafka is down waits for it, trying again with a backoff up to
10 s, with one line when it starts waiting and one when Kafka answers (both probes answer
meanwhile: alive, not ready); then it prints one line naming its streams, its Kafka and its web
port. Kafka client errors are logged once per kind per 30 s, with a count of the ones held
back. On a durable Kafka a worker rides out a broker restart: its clients reconnect and it
resumes from its committed offsets and changelogs (tested with Apache Kafka: `/livez` stays 200
through a 30 s outage, `/readyz` answers 503 during it and 200 again once the broker is
back). The embedded tansu broker keeps everything in memory: restarted, it has lost every topic,
offset and ledger. A worker that sees its topics gone, or fewer messages than its group had
committed, logs one line and exits with status 3 so that its supervisor restarts it from
scratch; `wevent run` ends with one line (status 3) when its broker dies. Restarting an
in-memory broker means restarting every worker and producer with it. `wevent replay` counts the
broker's delivery confirmations: a message not confirmed within `--delivery-timeout` (60 s)
fails the replay with one line and status 75 (try again later), an embedded broker that no
longer holds what it confirmed with status 3; on success it says how many messages were
delivered. Every command's exit statuses are listed in docker/README.md ("Exit codes"): 0 done,
1 a bug, 2 bad input (restarting will not help), 3 lost state (start again from scratch), 75
Kafka unreachable (try again later).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ..wire.topics import LDP_REPORTS, LDP_REQUESTS, MEASUREMENTS, RELEASES, REPORTS, SLOTS
from ..agents.failures import Throttle
from ..settings import KafkaCredentials
from .kafka import consumer_config, kafka_log, key_partition

CLIENT_LOGGERS = ("aiokafka", "faust", "mode", "wevent.kafka")
#: The attribute of a client's log record that holds whether RateLimit held it back.
RATE_LIMITED = "rate_limited"


class RateLimit(logging.Filter):
    """At most one record per ``interval`` seconds for each (logger, message template) of the
    Kafka clients' loggers; the next one let through counts those held back. A traceback is
    folded into the line: the full one would repeat on every reconnection attempt.

    Parameters
    ----------
    interval : float
        Seconds between two records of the same kind.
    clock : callable
        Monotonic seconds.
    """

    def __init__(self, interval: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.interval = interval
        self.throttle = Throttle(interval, clock)

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(CLIENT_LOGGERS) or record.levelno < logging.WARNING:
            return True
        rate_limited = getattr(record, RATE_LIMITED, None)
        if rate_limited is None:  # decided once, whichever handler asks first
            rate_limited = not self._let_through(record)
            setattr(record, RATE_LIMITED, rate_limited)
        return not rate_limited

    def _let_through(self, record: logging.LogRecord) -> bool:
        held = self.throttle.admit((record.name, str(record.msg)))
        if held is None:
            return False
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            record.msg, record.args = f"{record.getMessage()}: {type(error).__name__}: {error}", ()
            record.exc_info = record.exc_text = None
        if held:
            record.msg, record.args = f"{record.getMessage()} ({held} more like it in the last {self.interval:g} s)", ()
        return True


def rate_limit_client_logs(logger: logging.Logger, interval: float = 30.0) -> None:
    """Put one :class:`RateLimit` on every handler of ``logger`` (the root logger of a process)."""
    limit = RateLimit(interval)
    for handler in logger.handlers:
        handler.addFilter(limit)


def log_client_errors(stream=None, interval: float = 30.0) -> None:
    """Kafka client errors of this process to ``stream`` (default stderr), one line per kind and
    interval: for a long-running command without logging of its own (the device fleet)."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    handler.addFilter(RateLimit(interval))
    kafka_log.addHandler(handler)


def alive(streams: list[str]) -> dict:
    """The body of ``/livez``: the process answers."""
    return {"status": "alive", "streams": streams}


def readiness(streams: list[str], problems: list[dict]) -> tuple[int, dict]:
    """The status and body of ``/readyz``: 200 without problems, else 503 with them."""
    return (503 if problems else 200), {"status": "not ready" if problems else "ok", "streams": streams,
                                        "problems": problems}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str, port: int, handler) -> None:
        self.address_family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
        super().__init__((host, port), handler)


class StartingProbes:
    """``/livez`` and ``/readyz`` on the worker's web port while it starts, before its app serves them.

    A worker started while Kafka is down waits for it; meanwhile it is alive (``/livez`` 200) and
    not ready (``/readyz`` 503, the problem being :attr:`problem`), as it is during an outage once
    running, so a probe does not take the wait for a hung process. :meth:`close` frees the port
    for the app.

    Parameters
    ----------
    host, port : str, int
        Where the worker's web server listens.
    streams : list of str
        The worker's streams, named in both answers.
    """

    def __init__(self, host: str, port: int, streams: list[str]) -> None:
        probes = self
        self.streams = streams
        self.problem: dict = {"reason": "starting"}
        self.unreachable_since: float | None = None

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's API
                path = self.path.partition("?")[0]
                if path == "/livez":
                    self._answer(200, alive(probes.streams))
                elif path == "/readyz":
                    self._answer(*readiness(probes.streams, [probes.current_problem()]))
                else:
                    self._answer(404, {"status": "starting", "streams": probes.streams})

            def _answer(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:  # a probe every few seconds is not worth a line
                pass

        self.server = _Server(host, port, Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="starting-probes", daemon=True)
        self.thread.start()

    def unreachable(self, bootstrap: str, error: str, seconds: float) -> None:
        """Kafka at ``bootstrap`` has not answered for ``seconds``: ``/readyz`` says so, until :meth:`reached`."""
        self.unreachable_since = time.monotonic() - seconds
        self.problem = {"reason": "broker unreachable", "broker": bootstrap, "error": error}

    def reached(self) -> None:
        """Kafka answers; the worker starts its app."""
        self.unreachable_since = None
        self.problem = {"reason": "starting"}

    def current_problem(self) -> dict:
        since = self.unreachable_since
        return self.problem if since is None else self.problem | {"seconds": round(time.monotonic() - since, 1)}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def __enter__(self) -> "StartingProbes":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class BrokerWatch:
    """What a worker's ``/readyz`` reports: the broker, its consumer's progress, its streams' releases.

    Each :meth:`check` (every few seconds, in a thread: its calls block) asks the broker, with a
    client of its own in the worker's consumer group (it never joins it), for the topics, the end
    offsets of the partitions assigned to the worker and the group's committed offsets. It finds:

    - **broker unreachable**: the broker does not answer;
    - **consumer stalled**: an assigned partition has messages past the committed offset, and
      that offset has not moved for ``stall_seconds``;
    - **stream stalled**: a stream whose partition this worker owns has had input (messages in
      ``slots`` or ``dissimilarity`` past those there at its last release) for ``stall_seconds``
      (plus the device deadline for a local-model stream) without a new release. Streams that
      share a partition share its input: a stream that gets none while another does counts as
      stalled too, which it is for its readers;
    - **broker lost state** (:attr:`lost`): a topic is gone, or holds fewer messages than the
      group had committed. An in-memory broker (tansu) restarted empty looks like this; the
      worker's tables and offsets then describe data that no longer exists, so it must restart.

    Parameters
    ----------
    bootstrap : str
        The Kafka the worker reads.
    config : AppConfig
        The worker's streams and topics; ``config.app`` is its consumer group.
    stall_seconds : float
        How long input may wait before the consumer or a stream counts as stalled.
    clock : callable
        Monotonic seconds.
    credentials : KafkaCredentials or None
        How to reach a secured Kafka.
    """

    SOURCES = (REPORTS, SLOTS, MEASUREMENTS, RELEASES, LDP_REQUESTS, LDP_REPORTS)
    STREAM_INPUTS = (SLOTS, MEASUREMENTS)
    TIMEOUT = 5.0  # seconds a broker has to answer one request

    def __init__(self, bootstrap: str, config, stall_seconds: float, clock=time.monotonic,
                 credentials: KafkaCredentials | None = None) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer(consumer_config(bootstrap, config.app, credentials=credentials)
                                 | {"enable.auto.commit": False})
        self.bootstrap = bootstrap
        self.topics = config.topics()
        self.stall_seconds = stall_seconds
        self.clock = clock
        # a stream's partition: where Faust's default partitioner puts its name as a key
        self.stream_partition = {s.name: key_partition(s.name, config.stream_partitions)
                                 for s in config.streams}
        self.stream_limit = {s.name: stall_seconds + (s.deadline_seconds if s.model == "local" else 0.0)
                             for s in config.streams}
        self.problems: list[dict] = []
        self.lost: str | None = None
        self.unreachable_since: float | None = None
        self.committed_high: dict[tuple[str, int], int] = {}  # the highest committed offset seen per partition
        self.waiting: dict[tuple[str, int], tuple[int, float]] = {}  # partition -> (committed offset, since)
        self.releases: dict[str, tuple[float | None, int, float | None]] = {}  # stream -> (slot, input, since)
        self.suspect: str | None = None  # a loss seen once; confirmed by the next check

    def check(self, assignment: set[tuple[str, int]]) -> list[dict]:
        """Look at the broker once; ``assignment`` is the worker's (topic, partition) set."""
        from confluent_kafka import KafkaException

        now = self.clock()
        try:
            present = self.consumer.list_topics(timeout=self.TIMEOUT).topics
            owned = sorted(tp for tp in assignment if tp[0] in self.SOURCES and tp[0] in present)
            ends = {tp: self._end_offset(*tp) for tp in {*owned, *self._stream_inputs()} if tp[0] in present}
            committed = self._committed(owned)
        except KafkaException as exc:
            self.unreachable_since = self.unreachable_since or now
            self.problems = [{"reason": "broker unreachable", "broker": self.bootstrap,
                              "seconds": round(self.clock() - self.unreachable_since, 1), "error": exc.args[0].str()}]
            return self.problems
        self.unreachable_since = None
        self._check_lost(present, ends, committed)
        self.problems = self._consumer_stalls(now, owned, ends, committed) + self._stream_stalls(now, assignment, ends)
        if self.suspect:
            self.problems.insert(0, {"reason": "broker lost state", "detail": self.suspect})
        return self.problems

    def _end_offset(self, topic: str, partition: int) -> int:
        from confluent_kafka import TopicPartition

        return self.consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=self.TIMEOUT,
                                                   cached=False)[1]

    def _committed(self, owned) -> dict[tuple[str, int], int]:
        from confluent_kafka import TopicPartition

        if not owned:
            return {}
        offsets = self.consumer.committed([TopicPartition(t, p) for t, p in owned], timeout=self.TIMEOUT)
        return {(tp.topic, tp.partition): max(tp.offset, 0) for tp in offsets}  # none committed yet: from 0

    def _stream_inputs(self) -> set[tuple[str, int]]:
        return {(topic, p) for p in self.stream_partition.values() for topic in self.STREAM_INPUTS}

    def _check_lost(self, present, ends, committed) -> None:
        missing = sorted(set(self.topics) - set(present))
        behind = [f"{t}[{p}] ends at {ends[t, p]}, the group had committed {high}"
                  for (t, p), high in sorted(self.committed_high.items()) if (t, p) in ends and ends[t, p] < high]
        for tp, offset in committed.items():
            self.committed_high[tp] = max(self.committed_high.get(tp, 0), offset)
        found = (f"topics {', '.join(missing)} are gone" if missing else "; ".join(behind)) or None
        # a loss must be seen twice in a row: a broker still loading its topics is not one
        self.lost, self.suspect = (found if found and self.suspect else self.lost), found

    def _consumer_stalls(self, now, owned, ends, committed) -> list[dict]:
        self.waiting = {tp: seen for tp, seen in self.waiting.items() if tp in owned}  # a partition handed back
        stalls = []
        for tp in owned:
            lag = ends.get(tp, 0) - committed.get(tp, 0)
            if lag <= 0:
                self.waiting.pop(tp, None)
                continue
            offset, since = self.waiting.get(tp, (None, now))
            if offset != committed.get(tp):
                self.waiting[tp] = (committed.get(tp), now)
            elif now - since > self.stall_seconds:
                stalls.append({"reason": "consumer stalled", "partition": f"{tp[0]}[{tp[1]}]", "lag": lag,
                               "seconds": round(now - since, 1)})
        return stalls

    def _stream_stalls(self, now, assignment, ends) -> list[dict]:
        from prometheus_client import REGISTRY

        stalls = []
        for name, p in self.stream_partition.items():
            if not any((topic, p) in assignment for topic in self.STREAM_INPUTS):
                self.releases.pop(name, None)
                continue
            slot = REGISTRY.get_sample_value("wevent_last_released_slot", {"stream": name})
            arrived = sum(ends.get((topic, p), 0) for topic in self.STREAM_INPUTS)
            released, before, since = self.releases.get(name, (None, arrived, None))
            if slot != released or name not in self.releases:
                self.releases[name] = (slot, arrived, None)
            elif arrived > before and since is None:
                self.releases[name] = (slot, before, now)
            elif since is not None and now - since > self.stream_limit[name]:
                stalls.append({"reason": "stream stalled", "stream": name, "last_released_slot": slot,
                               "seconds": round(now - since, 1)})
        return stalls

    def close(self) -> None:
        self.consumer.close()
