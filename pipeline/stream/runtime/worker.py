"""The worker's Faust plumbing: the app's settings, its stateful agents' loop, ``/livez``,
``/readyz`` and ``/query``.

:mod:`wevent.topologies.app` declares the topics, tables and agents of a worker with these:
:func:`worker_app` makes the Faust app (its broker, credentials, web server, timeouts and
metrics), :func:`stateful_agent` runs a processor of :mod:`wevent.stream.agents` over a source
with its state in a table, :func:`serve_health` and :func:`serve_queries` add the web pages, and
:func:`run_worker` runs it all until it is stopped.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

import faust
from faust.exceptions import SameNode
from faust.sensors.prometheus import setup_prometheus_sensors
from prometheus_client import CollectorRegistry

from ...errors import EXIT_LOST_STATE, UsageError
from ...core.randomness import DerivedRandomness
from ..agents.base import Processor, ServerKeys
from ..agents.failures import ErrorLog, internal_error
from ..agents.index import QueryService
from ..config import AppConfig
from ..settings import KafkaCredentials
from ..wire.seals import AuthenticationError, check_seal, unseal
from ..wire.topics import MEASUREMENTS, RELEASES
from . import prometheus as metrics
from .faust_patches import InputGaps, StatePositionedApp, shorten_fetch_wait
from .health import BrokerWatch, alive, rate_limit_client_logs, readiness
from .kafka import faust_options, key_partition

__all__ = ["DEFAULT_STALL_SECONDS", "processing_guarantee", "worker_app", "raw_topic", "state_table", "stateful_agent",
           "serve_health", "serve_queries", "forget_lost_streams", "changelog_partitions", "run_worker"]

log = logging.getLogger("wevent.worker")
errors = ErrorLog(log)  # one line per agent and exception type per minute; tracebacks at debug level

DEFAULT_STALL_SECONDS = 120.0
HEALTH_INTERVAL = 2.0  # seconds between two looks at the broker
TANSU_SESSION_SECONDS = 10.0  # tansu's first join takes the whole rebalance timeout: keep it short


def processing_guarantee(config: AppConfig, tansu_compat: bool) -> str:
    """The config's guarantee; exactly-once needs Kafka transactions, which tansu lacks (its
    InitProducerId fails), so it is refused there in one line rather than at the first send."""
    if config.processing_guarantee == "exactly_once" and tansu_compat:
        raise UsageError('processing_guarantee = "exactly_once" needs Kafka transactions, which the embedded tansu '
                         'broker does not have: use "at_least_once" there (releases are idempotent by stream and slot)')
    return config.processing_guarantee


def worker_app(config: AppConfig, bootstrap: str, *, web_port: int = 6066, web_bind: str = "127.0.0.1",
               tansu_compat: bool = False, datadir: str | None = None, session_seconds: float | None = None,
               credentials: KafkaCredentials | None = None, report_counts: bool = False) -> StatePositionedApp:
    """A Faust app for the streams of ``config`` against the Kafka at ``bootstrap``, without agents yet.

    Its web server (/metrics, /livez, /readyz, /query) listens on ``web_bind`` only, this machine
    by default. Faust's /table views are off: they would serve the tables' contents (partial counts
    of raw reports, ledgers) to anyone who can reach the port. So are the exact numbers of reports
    accepted and rejected, functions of the raw data, unless ``report_counts``
    (:class:`~wevent.stream.runtime.prometheus.ServedMetrics`). ``session_seconds`` is the consumer
    group's session timeout (default: Faust's, 10 s on tansu): how long a killed worker's
    partitions wait before another takes them; a rebalance may take half of it, and it wins over
    the properties' ``session.timeout.ms``. ``credentials`` say how to reach a secured Kafka, with
    any other client property (:func:`~wevent.stream.runtime.kafka.faust_options`).
    """
    options: dict[str, Any] = dict(
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
    properties = faust_options(credentials, options["processing_guarantee"] == "exactly_once", tansu_compat)
    options.update(properties)
    if tansu_compat:
        # tansu reports wrong high watermarks for multi-record batches, which loses data after a
        # restart; one record per batch avoids it. Our records
        # already carry thousands of reports each.
        options.update(producer_max_batch_size=1)
        session_seconds = session_seconds or TANSU_SESSION_SECONDS
        shorten_fetch_wait()
    if session_seconds:
        options.update(broker_session_timeout=session_seconds, broker_rebalance_timeout=session_seconds / 2,
                       broker_heartbeat_interval=properties.get("broker_heartbeat_interval",
                                                                min(1.0, session_seconds / 4)))
    app = StatePositionedApp(config.app, **options)
    app.topic_partitions = config.topics()
    served = CollectorRegistry(auto_describe=True)  # Faust's sensors, and this process's metrics as served
    served.register(metrics.ServedMetrics(report_counts))
    setup_prometheus_sensors(app, registry=served, name_prefix="wevent_faust")
    return app


def raw_topic(app: faust.App, *names: str, partitions: int | None = None):
    """The topics ``names`` as bytes in, bytes out: the processors decode and encode themselves."""
    return app.topic(*names, partitions=partitions, key_serializer="raw", value_serializer="raw")


def state_table(app: faust.App, name: str, partitions: int):
    """A table of bytes keyed by text (the processors' keys), backed by its changelog topic."""
    return app.Table(name, partitions=partitions, key_type=bytes, value_type=bytes, default=None)


def stateful_agent(app: StatePositionedApp, name: str, source, table, processor: Processor, topics: dict,
                   watch_gaps: bool) -> None:
    """The agent ``name``: reads ``source`` and applies each message with ``processor``, whose state
    lives in ``table``, then sends its outputs to ``topics`` and exports its events. The processor
    says whether its state reaches the changelog before its outputs leave or after
    (:attr:`Processor.persist_before_send`). ``watch_gaps``: re-read offsets a fetch passed over
    (:class:`InputGaps`, on tansu only: on Kafka offsets skip legitimately, over transaction markers).
    """
    app.stateful_sources = [*app.stateful_sources, (tuple(source.topics), table, processor)]
    gaps = InputGaps()
    if watch_gaps:
        app.input_gaps = [*app.input_gaps, gaps]

    async def run(stream):
        async for event in stream.events():
            message = event.message
            if watch_gaps and not await gaps.admit(app.consumer, message):
                continue
            # A message without a value (a tombstone, which no worker writes) is an empty record:
            # refused as any record the processor cannot read.
            raw = event.value or b""
            try:
                outputs, updates, events = processor.process(
                    raw, message.topic, message.partition, message.offset,
                    lambda key: table.get(key.encode()), time.time(),
                )
            except Exception as exc:  # a bug must not stop the stream: counted, dead-lettered, logged once
                errors.failed(name, exc, f"{message.topic}[{message.partition}]@{message.offset}")
                outputs, updates, events = internal_error(processor.config, raw, message.topic, exc)
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


def serve_health(app: faust.App, config: AppConfig, bootstrap: str, stall_seconds: float,
                 credentials: KafkaCredentials | None = None) -> None:
    """``/livez`` (the process and its event loop answer) and ``/readyz`` (no problem seen by a
    :class:`BrokerWatch` checked every few seconds: the broker answers, no input waits
    ``stall_seconds`` without progress).

    A broker that lost the worker's topics or offsets (an in-memory broker restarted) cannot be
    resumed from: the worker's tables and positions describe data that is gone. It then exits
    with one line and status 3, so that its supervisor restarts it from what the broker holds.
    """
    watch = BrokerWatch(bootstrap, config, stall_seconds, credentials=credentials)
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
                os._exit(EXIT_LOST_STATE)  # Faust's own shutdown would wait on a consumer group that is gone
            await asyncio.sleep(HEALTH_INTERVAL)

    @app.page("/livez")
    async def livez(self, request):
        return self.json(alive(streams))

    @app.page("/readyz")
    async def readyz(self, request):
        status, body = readiness(streams, watch.problems)
        return self.json(body, status=status)


def serve_queries(app: faust.App, config: AppConfig, keys: ServerKeys) -> None:
    """Decayed range queries: an agent, ``index``, keeps per-stream indexes of what ``releases`` and
    ``dissimilarity`` bring (their seals checked with ``keys``, their noise drawn from the server's
    key); ``GET /query`` answers (400 on bad input)."""
    queried = {s.name: s for s in config.streams if s.query is not None}
    service = QueryService(queried, lambda name: DerivedRandomness(keys.server, name))
    log_table = state_table(app, "query-log", config.stream_partitions)

    def load(key: str):
        return log_table.get(key.encode())

    def save(key: str, value: bytes) -> None:
        log_table[key.encode()] = value

    def delete(key: str) -> None:
        log_table.pop(key.encode(), None)

    if queried:
        @app.agent(raw_topic(app, RELEASES, MEASUREMENTS), name="index")
        async def index(stream):
            async for event in stream.events():
                topic = event.message.topic
                try:  # a forged message is refused, counted and dead-lettered by M1 or M2, which read it too
                    check_seal(keys.seal_of(topic), topic, (event.key or b"").decode(), *unseal(event.value))
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


def forget_lost_streams(app: faust.App, config: AppConfig) -> None:
    """After a rebalance, a worker serves the gauges only of the streams whose partition it still
    has: stale ones would sit beside the new owner's on a dashboard summing over workers."""
    async def on_assigned(sender, assigned, **kwargs) -> None:
        owned = {tp.partition for tp in assigned if tp.topic == MEASUREMENTS}
        for stream in config.streams:
            if key_partition(stream.name, config.stream_partitions) not in owned:
                metrics.forget_stream(stream.name)

    # Faust types a receiver as taking any positional arguments; this signal sends one, the assigned set
    app.on_partitions_assigned.connect(on_assigned)  # type: ignore[arg-type]


def changelog_partitions(app: faust.App) -> dict[str, int]:
    """Each table's changelog topic with its partition count.

    A worker creates them (compacted) before Faust starts, and waits until Kafka serves them:
    Faust would create them itself, then compare their partitions with their source topics'
    from a metadata snapshot that a real Kafka may not have updated yet, and its agent would
    crash on the mismatch (0 partitions) while the worker ran on without it.
    """
    return {table.changelog_topic.get_topic_name(): table.partitions for table in app.tables.values()}


class _Worker(faust.Worker):
    """Faust's worker, with the Kafka clients' repeated errors rate-limited (one line per kind
    and interval: a broker that is gone makes them retry several times a second), and without
    its terminal spinner, whose escape codes would fill a log file."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.spinner = None

    def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
        super().on_setup_root_logger(logger, level)
        rate_limit_client_logs(logger)


def run_worker(app: faust.App, loglevel: str = "warn") -> None:
    """Run the worker in this process until it is stopped (SIGTERM/SIGINT)."""
    worker = _Worker(app, loglevel=loglevel, quiet=True)
    worker.execute_from_commandline()
