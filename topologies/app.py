"""The Faust app: which agents read and write which topics, and where their state lives.

Topology::

    reports ──► assemble (per reports partition) ──► slots ─┐
                                                            ├─► measure (M1) ──► dissimilarity ──► publish (M2) ──► releases, audit
    releases ───────────────────────────────────────────────┘                                                        │
                                                                                                  (M1 learns r_t) ◄──┘

    ldp.requests, ldp.reports ──► collect (local model) ──► slots (phase 1), dissimilarity (phase 2)

Every agent is a thin loop around a processor of :mod:`wevent.stream.agents`
(:func:`~wevent.stream.runtime.worker.stateful_agent`); its state lives in a Faust table backed by
a changelog topic, keyed by ``stream/partition`` (assembler) or ``stream`` (M1, M2, collector). A
table's changelog partitions match its source topics (co-partitioning), so a worker that takes
over a partition recovers exactly that partition's state. Under exactly-once, M2 reads what
committed transactions hold on ``releases`` before it sends a release again
(:func:`send_releases_once`).
"""

from __future__ import annotations

from typing import Any

import faust
from faust.types import TP

from wevent.stream.agents.processors import Processors
from wevent.stream.agents.publish import PublicationProcessor
from wevent.stream.config import AppConfig
from wevent.stream.runtime.kafka import CommittedTail, key_partition
from wevent.stream.settings import Settings
from wevent.stream.runtime.worker import (DEFAULT_STALL_SECONDS, forget_lost_streams, raw_topic, serve_health,
                                          serve_queries, state_table, stateful_agent, worker_app)
from wevent.stream.wire.messages import TickMessage
from wevent.stream.wire.topics import LDP_REPORTS, LDP_REQUESTS, MEASUREMENTS, RELEASES, REPORTS, SLOTS


def build_app(config: AppConfig, bootstrap: str, settings: Settings, *, web_port: int = 6066,
              web_bind: str = "127.0.0.1", tansu_compat: bool = False, datadir: str | None = None,
              stall_seconds: float = DEFAULT_STALL_SECONDS, session_seconds: float | None = None,
              report_counts: bool = False) -> faust.App:
    """A Faust app running every stream of ``config`` against the Kafka at ``bootstrap``, with the
    keys and Kafka credentials ``settings`` give.

    ``/readyz`` answers 503 while the broker is unreachable, or input has waited ``stall_seconds``
    without progress, and ``/livez`` 200 whenever the process answers
    (:func:`~wevent.stream.runtime.worker.serve_health`); the rest of the settings are the app's
    (:func:`~wevent.stream.runtime.worker.worker_app`).
    """
    credentials = settings.kafka_credentials(config)
    app = worker_app(config, bootstrap, web_port=web_port, web_bind=web_bind, tansu_compat=tansu_compat,
                     datadir=datadir, session_seconds=session_seconds, credentials=credentials,
                     report_counts=report_counts)
    processors = Processors.build(config, settings)
    topics = {name: raw_topic(app, name, partitions=n) for name, n in config.topics().items()}
    watch_gaps = tansu_compat  # only tansu passes over records (on Kafka, offsets skip transaction markers)

    stateful_agent(app, "assemble", raw_topic(app, REPORTS), state_table(app, "assembler", config.report_partitions),
                   processors.assembler, topics, watch_gaps)
    stateful_agent(app, "measure", raw_topic(app, SLOTS, RELEASES),
                   state_table(app, "dissimilarity-state", config.stream_partitions), processors.dissimilarity,
                   topics, watch_gaps)
    stateful_agent(app, "publish", raw_topic(app, MEASUREMENTS),
                   state_table(app, "publication-state", config.stream_partitions), processors.publication,
                   topics, watch_gaps)
    stateful_agent(app, "collect", raw_topic(app, LDP_REQUESTS, LDP_REPORTS),
                   state_table(app, "collector-state", config.stream_partitions), processors.collector,
                   topics, watch_gaps)

    local = [s.name for s in config.streams if s.model == "local"]
    if local:
        @app.timer(interval=1.0)
        async def tick() -> None:
            """Deadlines pass even when no report arrives: every second each collector looks at the clock."""
            for name in local:
                await topics[LDP_REPORTS].send(key=name.encode(), value=TickMessage(name).encode())

    if config.processing_guarantee == "exactly_once":
        send_releases_once(app, config, processors.publication, CommittedTail(bootstrap, credentials, config.app))
    serve_health(app, config, bootstrap, stall_seconds, credentials)
    serve_queries(app, config, processors.publication.keys)
    forget_lost_streams(app, config)
    return app


def send_releases_once(app: faust.App, config: AppConfig, publication: PublicationProcessor,
                       tail: CommittedTail) -> None:
    """M2 sends each release once (:class:`~wevent.stream.agents.publish.PublicationProcessor`):
    it reads a stream's committed releases from its ``releases`` partition with ``tail``, and
    forgets what it knew of the streams whose partition this worker takes anew."""
    def partition(name: str) -> int:
        return key_partition(name, config.stream_partitions)

    publication.exactly_once(lambda name: tail.newest_first(RELEASES, partition(name)))
    owned: set[int] = set()

    async def on_assigned(sender: faust.App, assigned: set[TP], **kwargs: Any) -> None:
        now = {tp.partition for tp in assigned if tp.topic == MEASUREMENTS}
        publication.taken_over(s.name for s in config.streams if partition(s.name) in now - owned)
        owned.clear()
        owned.update(now)

    # mode types a handler as (sender, /, *args, signal, **kwargs), which no handler of a fixed
    # argument matches; the signal calls it as on_assigned(app, assigned, signal=...).
    app.on_partitions_assigned.connect(on_assigned)  # type: ignore[arg-type]
