"""Every topic the system uses, with what it carries and how it is partitioned, declared once.

=================  =====================  ==========================  ============================================
constant           wire name              partitions, key             carries
=================  =====================  ==========================  ============================================
``REPORTS``        ``reports``            ``report_partitions``;      producers' report batches and watermarks
                                          user ``u`` on ``u mod P``   (raw values; every watermark to every
                                          (no key)                    partition)
``SLOTS``          ``slots``              ``stream_partitions``;      M1's inputs: the assemblers' slot partials
                                          key: stream                 and, local model, the collector's phase-1
                                                                      supports (sealed)
``MEASUREMENTS``   ``dissimilarity``      ``stream_partitions``;      M2's inputs: measured slots (counts with
                                          key: stream                 their private dissimilarity), local-model
                                                                      ``ready`` and dissimilarities, and phase-2
                                                                      supports (sealed)
``RELEASES``       ``releases``           ``stream_partitions``;      the private releases, public (signed: M1
                                          key: stream                 and every reader check the signature)
``AUDIT``          ``audit``              ``stream_partitions``;      one ledger record per released slot, public
                                          key: stream                 (signed)
``LDP_REQUESTS``   ``ldp.requests``       ``stream_partitions``;      M2's requests to the devices (signed)
                                          key: stream
``LDP_REPORTS``    ``ldp.reports``        ``stream_partitions``;      the devices' perturbed reports (signed) and
                                          key: stream                 the workers' clock ticks
``DEAD_LETTERS``   ``deadletter``         1 (no key)                  refused and failed inputs, by reason
=================  =====================  ==========================  ============================================

Stream-keyed topics are partitioned by Kafka's default partitioner on the stream name
(:func:`~wevent.stream.runtime.kafka.key_partition`), so that every message of a stream reaches the same M1, M2 and
collector. ``reports`` is partitioned by the producers themselves
(:func:`~wevent.stream.wire.reports.report_partition`), so that each assembler owns a fixed share of
the users.

The workers' state lives in tables, each backed by the compacted internal topic
``<app>-<table>-changelog`` (:func:`changelog`) with as many partitions as the topic its agent
reads, so that a worker taking over a partition recovers exactly that partition's state:
``assembler`` (``reports``), ``dissimilarity-state`` (M1: ``slots``, ``releases``),
``publication-state`` (M2: ``dissimilarity``), ``collector-state`` (``ldp.requests``,
``ldp.reports``) and ``query-log`` (``releases``, ``dissimilarity``).

``MEASUREMENTS`` keeps the wire name ``dissimilarity``, older than the counts and supports it also
carries: the constant says what the topic holds, and the name stays because it is part of every
deployment's state. M2's table values record the offsets they applied under it
(``dissimilarity:<partition>``), each message's MAC is bound to it, and deployments create and
grant it by name (the compose file's topic creation, the README's ACL grants, operators' own). A
new name would leave a restarted M2 without its resume positions and the messages in flight
unverifiable.

The topics
----------

**Topics** are declared once, in `pipeline/stream/wire/topics.py`:

| topic | partitions, key | carries |
|---|---|---|
| `reports` | `report_partitions`, user u on u mod P | report batches, watermarks |
| `slots` | `stream_partitions`, stream | M1's inputs: partials, phase-1 supports |
| `dissimilarity` | `stream_partitions`, stream | M2's inputs: measured slots, local `ready`/dissimilarities, phase-2 supports |
| `releases`, `audit` | `stream_partitions`, stream | the public record |
| `ldp.requests`, `ldp.reports` | `stream_partitions`, stream | signed requests; signed reports and ticks |
| `deadletter` | 1 | refusals and failures, by reason |

Each worker table has a compacted `<app>-<table>-changelog` topic, partitioned like its source.
`wevent worker` creates them before Faust starts and waits until Kafka serves them: Faust,
creating them itself, compared their partitions with a metadata snapshot Apache Kafka had not
updated yet, and its agent crashed while the worker ran on.
`dissimilarity` keeps its first name although it carries counts and supports too: M2's states
record their offsets under it, its MACs are bound to it and deployments create and grant it by
name, so a new name would cost every deployment a migration for no change of behaviour.

Why ldp.reports is keyed by stream
----------------------------------

**`ldp.reports` is keyed by stream, not by user** A fleet answers a
request with one batch per block of users, and the collector's state is per stream, so the key
keeps them co-partitioned.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["REPORTS", "SLOTS", "MEASUREMENTS", "RELEASES", "AUDIT", "LDP_REQUESTS", "LDP_REPORTS", "DEAD_LETTERS",
           "Topic", "TOPICS", "partition_counts", "changelog"]

REPORTS = "reports"
SLOTS = "slots"
MEASUREMENTS = "dissimilarity"  # a stable wire name for M2's inputs (see above)
RELEASES = "releases"
AUDIT = "audit"
LDP_REQUESTS = "ldp.requests"
LDP_REPORTS = "ldp.reports"
DEAD_LETTERS = "deadletter"


@dataclass(frozen=True)
class Topic:
    """One topic: its wire ``name`` and the config field giving its partition count.

    Parameters
    ----------
    name
        The topic's name on the broker.
    partitioned_by
        ``"report_partitions"``, ``"stream_partitions"`` or ``"one"``.
    """

    name: str
    partitioned_by: str

    def partitions(self, report_partitions: int, stream_partitions: int) -> int:
        return {"report_partitions": report_partitions, "stream_partitions": stream_partitions,
                "one": 1}[self.partitioned_by]


TOPICS: tuple[Topic, ...] = (
    Topic(REPORTS, "report_partitions"),
    *(Topic(name, "stream_partitions") for name in (SLOTS, MEASUREMENTS, RELEASES, AUDIT, LDP_REQUESTS, LDP_REPORTS)),
    Topic(DEAD_LETTERS, "one"),
)

def partition_counts(report_partitions: int, stream_partitions: int) -> dict[str, int]:
    """Every topic's partition count (what is created before workers start).

    >>> partition_counts(4, 2)["reports"], partition_counts(4, 2)["dissimilarity"], partition_counts(4, 2)["deadletter"]
    (4, 2, 1)
    """
    return {topic.name: topic.partitions(report_partitions, stream_partitions) for topic in TOPICS}


def changelog(app: str, table: str) -> str:
    """The internal topic holding ``table``'s changes (Faust's naming).

    >>> changelog("wevent", "assembler")
    'wevent-assembler-changelog'
    """
    return f"{app}-{table}-changelog"
