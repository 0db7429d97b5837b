"""The Faust app: which agents read and write which topics, and where their state lives.

Topology::

    reports ──► assemble (per reports partition) ──► slots ─┐
                                                            ├─► measure (M1) ──► dissimilarity ──► publish (M2) ──► releases, audit
    releases ───────────────────────────────────────────────┘                                                        │
                                                                                                  (M1 learns r_t) ◄──┘

Every agent is a thin loop around a processor of :mod:`wevent.stream.agents`; its state
lives in a Faust table backed by a changelog topic, keyed by ``stream/partition`` (assembler) or
``stream`` (M1, M2). A table's changelog partitions match its source topics (co-partitioning), so
a worker that takes over a partition recovers exactly that partition's state.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

import faust
from aiokafka.errors import IllegalStateError
from faust.exceptions import SameNode
from faust.sensors.prometheus import setup_prometheus_sensors
from faust.types import TP

from wevent.core.randomness import DerivedRandomness
from wevent.errors import UsageError
from wevent.stream.runtime import prometheus as metrics
from wevent.stream.wire.seals import AuthenticationError, check_seal, unseal
from wevent.stream.wire.messages import TickMessage
from wevent.stream.config import AppConfig
from wevent.stream.runtime.health import BrokerWatch, rate_limit_client_logs
from wevent.stream.runtime.kafka import TANSU_FETCH_WAIT_MS, KafkaCredentials, key_partition
from wevent.stream.agents.failures import ErrorLog, internal_error
from wevent.stream.agents.base import Processor
from wevent.stream.agents.processors import Processors
from wevent.stream.agents.index import QueryService
from wevent.stream.wire.topics import LDP_REPORTS, LDP_REQUESTS, MEASUREMENTS, RELEASES, REPORTS, SLOTS

log = logging.getLogger("wevent.worker")
errors = ErrorLog(log)  # one line per agent and exception type per minute; tracebacks at debug level

DEFAULT_STALL_SECONDS = 120.0
HEALTH_INTERVAL = 2.0  # seconds between two looks at the broker
LOST_BROKER_STATUS = 3


def processing_guarantee(config: AppConfig, tansu_compat: bool) -> str:
    """The config's guarantee; exactly-once needs Kafka transactions, which tansu lacks (its
    InitProducerId fails), so it is refused there in one line rather than at the first send."""
    if config.processing_guarantee == "exactly_once" and tansu_compat:
        raise UsageError('processing_guarantee = "exactly_once" needs Kafka transactions, which the embedded tansu '
                         'broker does not have: use "at_least_once" there (releases are idempotent by stream and slot)')
    return config.processing_guarantee


def build_app(config: AppConfig, bootstrap: str, *, web_port: int = 6066, web_bind: str = "127.0.0.1",
              tansu_compat: bool = False, datadir: str | None = None,
              stall_seconds: float = DEFAULT_STALL_SECONDS, session_seconds: float | None = None) -> faust.App:
    """A Faust app running every stream of ``config`` against the Kafka at ``bootstrap``.

    Its web server (/metrics, /healthz, /query) listens on ``web_bind`` only, this machine by
    default. Faust's /table views are off: they would serve the tables' contents (partial counts
    of raw reports, ledgers) to anyone who can reach the port. ``/healthz`` answers 503 while the
    broker is unreachable, or input has waited ``stall_seconds`` without progress (:func:`_health`).
    ``session_seconds`` is the consumer group's session timeout (default: Faust's, 10 s on tansu):
    how long a killed worker's partitions wait before another takes them; a rebalance may take
    half of it.
    """
    options = dict(
        broker=f"kafka://{bootstrap}",
        store="memory://",
        processing_guarantee=processing_guarantee(config, tansu_compat),
        topic_replication_factor=config.replication_factor,
        web_port=web_port,
        web_bind=web_bind,
        web_tables_enabled=False,
        consumer_auto_offset_reset="earliest",
        topic_partitions=config.stream_partitions,
        topic_disable_leader=True,
        stream_wait_empty=False,
    )
    if datadir:
        options["datadir"] = datadir
    credentials = KafkaCredentials.from_env()
    if credentials:
        options["broker_credentials"] = credentials.faust()
    if tansu_compat:
        # tansu reports wrong high watermarks for multi-record batches, which loses data after a
        # restart; one record per batch avoids it. Our records
        # already carry thousands of reports each.
        options.update(producer_max_batch_size=1)
        session_seconds = session_seconds or TANSU_SESSION_SECONDS
        _shorten_fetch_wait()
    if session_seconds:
        options.update(broker_session_timeout=session_seconds, broker_rebalance_timeout=session_seconds / 2,
                       broker_heartbeat_interval=min(1.0, session_seconds / 4))
    app = StatePositionedApp(config.app, **options)
    app.topic_partitions = config.topics()
    setup_prometheus_sensors(app, name_prefix="wevent_faust")
    processors = Processors.build(config)
    topics = {
        name: app.topic(name, partitions=n, key_serializer="raw", value_serializer="raw")
        for name, n in config.topics().items()
    }

    def table(name: str, partitions: int):
        return app.Table(name, partitions=partitions, key_type=bytes, value_type=bytes, default=None)

    # Only tansu passes over records; on Kafka offsets skip legitimately (transaction markers of
    # exactly-once workers), and a watch would wait on every one.
    watch_gaps = tansu_compat
    _agent(app, "assemble", app.topic(REPORTS, key_serializer="raw", value_serializer="raw"),
           table("assembler", config.report_partitions), processors.assembler, topics, watch_gaps)
    _agent(app, "measure", app.topic(SLOTS, RELEASES, key_serializer="raw", value_serializer="raw"),
           table("dissimilarity-state", config.stream_partitions), processors.dissimilarity, topics, watch_gaps)
    _agent(app, "publish", app.topic(MEASUREMENTS, key_serializer="raw", value_serializer="raw"),
           table("publication-state", config.stream_partitions), processors.publication, topics, watch_gaps)
    _agent(app, "collect", app.topic(LDP_REQUESTS, LDP_REPORTS, key_serializer="raw", value_serializer="raw"),
           table("collector-state", config.stream_partitions), processors.collector, topics, watch_gaps)

    local = [s.name for s in config.streams if s.model == "local"]
    if local:
        @app.timer(interval=1.0)
        async def tick():
            """Deadlines pass even when no report arrives: every second each collector looks at the clock."""
            for name in local:
                await topics[LDP_REPORTS].send(key=name.encode(), value=TickMessage(name).encode())

    _health(app, config, bootstrap, stall_seconds)
    _query_service(app, config, processors)
    _forget_lost_streams(app, config)
    return app


def changelog_partitions(app: faust.App) -> dict[str, int]:
    """Each table's changelog topic with its partition count.

    A worker creates them (compacted) before Faust starts, and waits until Kafka serves them:
    Faust would create them itself, then compare their partitions with their source topics'
    from a metadata snapshot that a real Kafka may not have updated yet, and its agent would
    crash on the mismatch (0 partitions) while the worker ran on without it.
    """
    return {table.changelog_topic.get_topic_name(): table.partitions for table in app.tables.values()}


def _forget_lost_streams(app: faust.App, config: AppConfig) -> None:
    """After a rebalance, a worker serves the gauges only of the streams whose partition it still
    has: stale ones would sit beside the new owner's on a dashboard summing over workers."""
    async def on_assigned(sender, assigned, **kwargs) -> None:
        owned = {tp.partition for tp in assigned if tp.topic == MEASUREMENTS}
        for stream in config.streams:
            if key_partition(stream.name, config.stream_partitions) not in owned:
                metrics.forget_stream(stream.name)

    app.on_partitions_assigned.connect(on_assigned)


def _health(app: faust.App, config: AppConfig, bootstrap: str, stall_seconds: float) -> None:
    """``/healthz``, from a :class:`BrokerWatch` checked every few seconds.

    A broker that lost the worker's topics or offsets (an in-memory broker restarted) cannot be
    resumed from: the worker's tables and positions describe data that is gone. It then exits
    with one line and status 3, so that its supervisor restarts it from what the broker holds.
    """
    watch = BrokerWatch(bootstrap, config, stall_seconds)
    streams = [s.name for s in config.streams]

    @app.task
    async def check_broker():
        while True:  # a loop, not a timer: a check waits up to its timeout when the broker is gone
            assignment = {(tp.topic, tp.partition) for tp in app.consumer.assignment()}
            await app.loop.run_in_executor(None, watch.check, assignment)
            if watch.lost:
                log.critical("the broker at %s lost this worker's data (%s): exiting so that it restarts from what "
                             "the broker holds", bootstrap, watch.lost)
                for handler in logging.getLogger().handlers:
                    handler.flush()
                os._exit(LOST_BROKER_STATUS)  # Faust's own shutdown would wait on a consumer group that is gone
            await asyncio.sleep(HEALTH_INTERVAL)

    @app.page("/healthz")
    async def healthz(self, request):
        problems = watch.problems
        body = {"status": "not ready" if problems else "ok", "streams": streams, "problems": problems}
        return self.json(body, status=503 if problems else 200)


def _query_service(app: faust.App, config: AppConfig, processors: Processors) -> None:
    """Decayed range queries: an agent keeps per-stream indexes, `GET /query` answers (400 on bad input)."""
    queried = {s.name: s for s in config.streams if s.query is not None}
    service = QueryService(queried, lambda name: DerivedRandomness(config.noise_key(), name))
    log_table = app.Table("query-log", partitions=config.stream_partitions, key_type=bytes, value_type=bytes,
                          default=None)

    def load(key: str):
        return log_table.get(key.encode())

    def save(key: str, value: bytes) -> None:
        log_table[key.encode()] = value

    def delete(key: str) -> None:
        log_table.pop(key.encode(), None)

    if queried:
        @app.agent(app.topic(RELEASES, MEASUREMENTS, key_serializer="raw", value_serializer="raw"), name="index")
        async def index(stream):
            async for event in stream.events():
                topic = event.message.topic
                try:  # a forged message is refused, counted and dead-lettered by M1 or M2, which read it too
                    check_seal(processors.publication.keys.for_topic(topic), topic, (event.key or b"").decode(),
                               *unseal(event.value))
                except (AuthenticationError, UnicodeDecodeError):
                    continue
                try:
                    service.ingest(event.value, topic, load, save, delete)
                except Exception as exc:  # a bad message or a bug must not stop the stream
                    errors.failed("index", exc, f"{topic}[{event.message.partition}]@{event.message.offset}")

    @app.page("/query")
    async def query(self, request):
        params = dict(request.query)
        name = params.get("stream")
        if name in queried:
            try:  # the worker holding the stream's partition answers
                return await app.router.route_req(log_table.name, name.encode(), self.web, request)
            except SameNode:
                pass
        status, body = service.answer(params, load)
        return self.json(body, status=status)


class StatePositionedApp(faust.App):
    """A Faust app that reads each source partition of a stateful agent from where the agent's
    table state says it was applied (:meth:`Processor.resume_offset`), not from the group's
    committed offset, and always seeks it there explicitly.

    A committed offset can pass inputs that no state holds: Faust (0.15) acks without processing
    the messages a stream takes after a rebalance that were fetched before it, and commits the
    first run of acked offsets even when it does not start at the committed offset (always while
    nothing is committed on a partition). A SIGKILL then leaves the state behind the commit, and
    the inputs in between would never be read again (a whole partition's reports missing from
    its slots, silently). Once the tables are recovered and before anything is fetched, Faust
    seeks every assigned partition to its committed offset; this then moves the stateful agents'
    sources back to their states' positions. Inputs at or below a state's offset are skipped by
    the processor, so reading from the lowest of them applies every input exactly once (M2
    re-reads its last input, whose release it re-emits from its state).

    A live worker needs the seek as much as a restarted one. When a rebalance stops the flow
    while a fetch is under way, Faust drops the records that fetch returns (the consumer's
    position is already past them) and seeks back to the committed offsets; aiokafka's
    ``seek_to_committed`` leaves a partition with nothing committed (or 0) where it stands. A
    partition newly assigned to a running worker then lost every record of that fetch: the
    worker stopped reading it (lag that never moved), or applied later records without the
    dropped ones (slots closed short of reports). So every stateful source is sought, the start
    included.

    The seek must also come before the first record. Faust resumes the stream partitions, then
    seeks them; its pause only filters what aiokafka keeps fetching from the committed offsets,
    so records past a state's position could reach an agent before the seek back, and make the
    inputs in between look applied. A stateful source therefore stays paused until sought.
    """

    topic_partitions: dict[str, int] = {}
    #: (source topic names, table, processor) of every agent
    stateful_sources: list[tuple[tuple[str, ...], Any, Processor]] = []
    #: every agent's watch for offsets its fetches passed over
    input_gaps: list["InputGaps"] = []

    def _new_consumer(self):
        consumer = super()._new_consumer()
        seek_to_committed = consumer.seek_to_committed
        resume_partitions = consumer.resume_partitions
        held: set[TP] = set()  # stateful sources Faust resumed before they were sought

        def resume_once_sought(tps) -> None:
            # Faust resumes before it seeks: records past a state's position must not reach an
            # agent first (see the class docstring). seek_to_state resumes these.
            tps = set(tps)
            stateful = {tp for tp in tps if self.reads_state(tp.topic)}
            held.update(stateful)
            resume_partitions(tps - stateful)

        async def seek_to_state() -> dict:
            offsets = dict(await seek_to_committed())
            for tp in consumer.assignment():
                position = self.resume_offset(tp.topic, tp.partition)
                if position is None:
                    continue  # no agent's state reads it (a changelog)
                committed = offsets.get(tp)
                if committed is None or committed <= 0:
                    # Nothing committed: from the start, said explicitly. aiokafka leaves such a
                    # partition where its fetches stand, past records Faust may have dropped.
                    position = 0
                elif position < committed:
                    # M2 re-reading its last input is routine; a state further behind is the disagreement
                    log.log(logging.WARNING if committed - position > 1 else logging.INFO,
                            "reading %s[%d] from offset %d, where its state stands, not from the committed %d",
                            tp.topic, tp.partition, position, committed)
                else:
                    # Only ever back: a state ahead of the commit skips what it applied, and other
                    # agents reading the same partition (the query index) still get every message.
                    position = committed
                await consumer.seek(tp, position)
                offsets[tp] = position
                for gaps in self.input_gaps:
                    gaps.forget(tp.topic, tp.partition)  # a jump to a sought position is no gap
            sought = held & consumer.assignment()
            held.clear()
            resume_partitions(sought)
            return offsets

        consumer.seek_to_committed = seek_to_state
        consumer.resume_partitions = resume_once_sought
        return consumer

    def reads_state(self, topic: str) -> bool:
        """Whether a stateful agent reads ``topic`` (its positions then come from the states)."""
        return any(topic in topics for topics, _, _ in self.stateful_sources)

    def resume_offset(self, topic: str, partition: int) -> int | None:
        """The lowest resume offset of the stateful agents reading ``topic`` (None: none does)."""
        count = self.topic_partitions.get(topic, 1)

        def partition_of(key: str) -> int:
            return key_partition(key, count)

        offsets = [processor.resume_offset(topic, partition, lambda key, table=table: table.get(key.encode()),
                                           partition_of)
                   for topics, table, processor in self.stateful_sources if topic in topics]
        offsets = [offset for offset in offsets if offset is not None]
        return min(offsets) if offsets else None


HOLE_WAIT_SECONDS = 10.0  # how long a hole is read again before it is taken as no record
HOLE_RETRY_SECONDS = 0.05  # between two re-reads of a hole


class InputGaps:
    """Notices the offsets a fetch passed over on a source partition, so that an agent reads them.

    No source of ours has holes between offsets (none is compacted, no producer of ours uses
    transactions), yet tansu leaves one for a moment: with two device shards writing one
    ``ldp.reports`` partition at once, a fetch returned the records after one message of reports
    before that message could be read, and the consumer's position passed it for good; its round
    closed at the deadline, short of its answers, with nothing rejected. So an offset past the next
    one expected means a record was skipped: the agent seeks back to the hole, ignores what was
    fetched past it, and reads it again (every :data:`HOLE_RETRY_SECONDS`) until the record is
    there. A hole still there after :data:`HOLE_WAIT_SECONDS` is accepted, logged and counted.
    Workers watch only on tansu: on Kafka an offset may be a transaction marker, never a record.
    """

    APPLY, SKIP, SEEK = "apply", "skip", "seek"

    def __init__(self) -> None:
        self._next: dict[tuple[str, int], int] = {}
        self._rereading: dict[tuple[str, int], tuple[int, int, float]] = {}  # hole, highest offset ignored, until

    def forget(self, topic: str, partition: int) -> None:
        """The partition was sought (a restart or rebalance): its next offset is what comes."""
        self._next.pop((topic, partition), None)
        self._rereading.pop((topic, partition), None)

    def check(self, topic: str, partition: int, offset: int, now: float) -> tuple[str, int]:
        """What to do with the record at ``offset`` at monotonic time ``now``: (APPLY, offset),
        (SKIP, offset) or (SEEK, hole), after a pause of :data:`HOLE_RETRY_SECONDS`."""
        tp = (topic, partition)
        if tp in self._rereading:
            hole, ignored, until = self._rereading[tp]
            if offset > ignored:  # fetched before the seek took effect
                self._rereading[tp] = (hole, offset, until)
                return self.SKIP, offset
            if offset > hole and now < until:  # the re-read starts past the hole: not readable yet
                self._rereading[tp] = (hole, offset, until)
                return self.SEEK, hole
            del self._rereading[tp]
            if offset > hole:
                log.warning("%s[%d]: offsets %d..%d are still absent after %g s; going on from %d",
                            topic, partition, hole, offset - 1, HOLE_WAIT_SECONDS, offset)
                metrics.input_gaps.labels(topic, "absent").inc(offset - hole)
        elif tp in self._next and offset > self._next[tp]:
            hole = self._next[tp]
            log.warning("%s[%d]: a fetch passed over offsets %d..%d; reading them again",
                        topic, partition, hole, offset - 1)
            metrics.input_gaps.labels(topic, "reread").inc(offset - hole)
            self._rereading[tp] = (hole, offset, now + HOLE_WAIT_SECONDS)
            return self.SEEK, hole
        self._next[tp] = offset + 1
        return self.APPLY, offset


def _agent(app: faust.App, name: str, source, table, processor: Processor, topics: dict, watch_gaps: bool) -> None:
    app.stateful_sources = [*app.stateful_sources, (tuple(source.topics), table, processor)]
    gaps = InputGaps()
    if watch_gaps:
        app.input_gaps = [*app.input_gaps, gaps]

    async def run(stream):
        async for event in stream.events():
            message = event.message
            action, offset = (gaps.check(message.topic, message.partition, message.offset, time.monotonic())
                              if watch_gaps else (InputGaps.APPLY, message.offset))
            if action == InputGaps.SEEK:
                await asyncio.sleep(HOLE_RETRY_SECONDS)
                try:
                    await app.consumer.seek(TP(message.topic, message.partition), offset)
                except IllegalStateError as exc:  # revoked meanwhile: its next owner seeks it to its state
                    log.info("could not read %s[%d] again from %d: %s", message.topic, message.partition, offset, exc)
                    gaps.forget(message.topic, message.partition)
            if action != InputGaps.APPLY:
                continue
            try:
                outputs, updates, events = processor.process(
                    event.value, message.topic, message.partition, message.offset,
                    lambda key: table.get(key.encode()), time.time(),
                )
            except Exception as exc:  # a bug must not stop the stream: counted, dead-lettered, logged once
                errors.failed(name, exc, f"{message.topic}[{message.partition}]@{message.offset}")
                outputs, updates, events = internal_error(processor.config, event.value, message.topic, exc)
            metrics.export(events)
            if processor.persist_before_send:  # M2: the ledger reaches its changelog before the release leaves
                store(table, updates)
                await app.producer.flush()
                await send(topics, outputs)
                if outputs:  # delivered before the next input: a restart re-reads only the last applied one
                    await app.producer.flush()
            else:  # outputs are delivered before the state that records their input as applied
                await send(topics, outputs)
                if outputs and updates:
                    await app.producer.flush()
                store(table, updates)

    app.agent(source, name=name)(run)


TANSU_SESSION_SECONDS = 10.0  # tansu's first join takes the whole rebalance timeout: keep it short


def _shorten_fetch_wait() -> None:
    """tansu holds an idle fetch for its full max wait, even when data arrives meanwhile; Faust
    hard-codes 1.5 s, which would add 1.5 s to every hop of a slot (M1 -> M2 -> releases -> M1).
    Real Kafka answers as soon as data arrives, so this applies to the embedded broker only."""
    import aiokafka
    from faust.transport.drivers import aiokafka as driver

    class ShortWaitConsumer(aiokafka.AIOKafkaConsumer):
        def __init__(self, *args, **kwargs):
            kwargs["fetch_max_wait_ms"] = min(kwargs.get("fetch_max_wait_ms", 500), TANSU_FETCH_WAIT_MS)
            super().__init__(*args, **kwargs)

    driver.aiokafka = type("aiokafka_with_short_fetch_wait", (), {
        name: getattr(aiokafka, name) for name in dir(aiokafka) if not name.startswith("__")
    } | {"AIOKafkaConsumer": ShortWaitConsumer})


def store(table, updates: dict[str, bytes | None]) -> None:
    """Write ``updates`` in their order (None deletes a key): the processors rely on it."""
    for key, blob in updates.items():
        if blob is None:
            table.pop(key.encode(), None)
        else:
            table[key.encode()] = blob


async def send(topics: dict, outputs) -> None:
    for out in outputs:
        await topics[out.topic].send(key=out.key.encode() if out.key else None, value=out.value)


class _Worker(faust.Worker):
    """Faust's worker, with the Kafka clients' repeated errors rate-limited (one line per kind
    and interval: a broker that is gone makes them retry several times a second)."""

    def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
        super().on_setup_root_logger(logger, level)
        rate_limit_client_logs(logger)


def run_worker(app: faust.App, loglevel: str = "warn") -> None:
    """Run the worker in this process until it is stopped (SIGTERM/SIGINT)."""
    worker = _Worker(app, loglevel=loglevel, quiet=True)
    worker.execute_from_commandline()
