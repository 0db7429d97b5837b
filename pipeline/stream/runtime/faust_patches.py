"""What the worker changes in Faust (0.15) and its Kafka client, each for a reason of its own.

- :class:`StatePositionedApp`: a stateful agent resumes where its table state says it was
  applied, not from the group's committed offset, and every one of its sources is sought there
  before the first record (resume after seek); and under exactly-once, a worker recovers the
  tables of the partitions it takes over (it asks the broker where their changelogs end).
  Every seek runs in the Kafka consumer's own thread, where its fetches are read, and a fetch
  hands over only the partitions Faust reads (:class:`ActivePartitions`).
- :func:`shorten_fetch_wait`: on the embedded tansu broker, the consumer's fetches wait 20 ms
  for data, not Faust's 1.5 s.
- :class:`InputGaps`: on tansu, an offset a fetch passed over is read again, not lost.
- :class:`DrainingProducerBuffer`: a flush of the producer's buffer sends what was queued before
  it, all of it, however long the broker takes; and a stopping worker stops its agents before
  that last flush.

Exactly-once effect on state
----------------------------

**Exactly-once effect on state.** Faust runs `at_least_once`: the tansu broker has no
transactions. The assembler and M1 keep the offset of the last input they applied inside the
table value they update. They deliver outputs before writing that state, so a crash leaves
either the old state (the input is replayed and its outputs re-sent, identically) or the new one
(whose outputs left already). M2 writes its ledger first and is idempotent by slot: a replayed
input re-emits the stored release. Releases carry (stream, slot), and re-emissions are byte-identical.
An input's writes reach the changelog in order, slot keys first, then the key holding the
offsets, then deletions; after a crash the input is redelivered and finds its own effect (a slot
records the offset that wrote it), so nothing is counted twice. The states, not the consumer
group's committed offsets, say where a worker resumes: Faust can commit past inputs no state
holds (after a rebalance it acks, unprocessed, messages fetched before it, and commits the
first run of acked offsets even when it does not start at the committed one), which closed
slots without one partition's reports. So once a worker's tables are recovered, and before it
fetches, each source partition goes back to just past the lowest offset its states applied (M2:
to its last applied input, which it re-emits identically, or under `exactly_once` only when no
committed transaction holds that release yet). Every input is applied once, on tansu and on
Kafka; outputs and dead letters may be sent again, identically. A stream configured but
never fed on a partition makes a restart re-read that partition from its start.
The worker seeks every source partition explicitly, after a rebalance in a running worker as
after a restart, and from the start when nothing is committed, and fetches nothing from it
before: Faust resumes partitions before seeking them, and records past a state's position
applied in between would make the inputs before them look applied. When a rebalance stops the flow
while a fetch is under way, Faust drops the records that fetch returned and asks for the
committed offsets again, and aiokafka leaves a partition with nothing committed where its
fetches stand, past the dropped records. Left so, a partition newly
assigned to a running worker would no longer be read, or its later records would be applied
without the dropped ones.
No source partition of ours has holes between offsets, yet tansu can leave one for a moment:
with two device shards writing one `ldp.reports` partition at once, a fetch returned the records
after a message of reports before that message could be read, and the consumer's position passed
it for good. On tansu every agent watches for an offset
past the next one expected: it seeks back to the hole, ignores what was fetched past it, and
reads it again every 50 ms until the record is there; a hole still absent after 10 s is accepted
and logged. Both are counted in `wevent_input_gaps_total{topic,outcome}`. On Kafka an offset may
be a transaction marker, so workers there do not watch.

A stateful source stays paused until it is sought (`StatePositionedApp`): Faust resumes a new
owner's source partitions before it seeks them, and its pause only filters what aiokafka keeps
fetching from the committed offsets, so whole batches past a state's position would be applied
during the seek's round trip, and the inputs between the state and the commit would then look
applied.

While every source is held so, Faust's set of partitions to read is empty, and aiokafka reads an
empty set as "every partition": a fetch under way (Faust's waits up to a second) then handed
Faust the records of the held partitions, which Faust dropped as not being read, with aiokafka's
position already past them. A seek that came before that fetch's answer was undone: the worker
never read those inputs again and its streams stopped after a restart, silently (the committed
offset of `reports` stayed where the state was, its end far ahead). So a fetch reads only the
partitions in Faust's set at the moment it hands records over, and none when the set is empty
(:class:`ActivePartitions`).

Set `replication_factor = 3` in the config on a cluster, so the topics the workers create and
Faust's changelogs are replicated. `processing_guarantee = "exactly_once"` works on Kafka (the
embedded broker, which has no transactions, refuses it in one line), and there a `read_committed`
consumer of `releases` sees every (stream, slot) once, worker kills included. Faust's transactions
alone do not give that, for two reasons. A worker that takes partitions over would recover none of
their tables: Faust takes each changelog's end from aiokafka's last stable offset, which aiokafka
knows only after a fetch, so every changelog would look empty and the worker would publish the
streams again from slot 1; `StatePositionedApp` asks the broker where each changelog ends. And
M2's ledger reaches its changelog before its release is sent, and a transaction can commit between
the two, so a worker that takes a stream over cannot tell from its state whether the last release
was published: re-emitting it, as at-least-once does, would publish it twice when it was. Under
exactly-once M2 first reads the stream's newest committed release on `releases` (its MAC checked,
so that a forgery cannot silence a stream; the previous owner's transactions are settled by then,
its producer fenced by the new owner's) and sends again only slots past it; should `releases` be
unreadable, it re-emits, an identical duplicate rather than a missing release. In the tests (2
streams, 2 partitions), a worker SIGKILLed once its releases were committed leaves one identical
duplicate per stream under at-least-once and none under exactly-once; two kills while the worker
writes releases (12 slots) leave 6 identical duplicates under at-least-once and none under
exactly-once. Audit records and dead letters may still repeat, identically, as at-least-once
releases do: `wevent subscribe` keeps the first of each (stream, slot).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import Any

import faust
from aiokafka.errors import IllegalStateError
from faust.transport.producer import ProducerBuffer
from faust.types import TP

from ..agents.base import Processor
from . import prometheus as metrics
from .kafka import TANSU_FETCH_WAIT_MS, key_partition

__all__ = ["StatePositionedApp", "ActivePartitions", "InputGaps", "DrainingProducerBuffer", "HOLE_WAIT_SECONDS", "HOLE_RETRY_SECONDS",
           "shorten_fetch_wait"]

log = logging.getLogger("wevent.worker")


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
    inputs in between look applied. A stateful source therefore stays paused until sought, and a
    fetch hands over only partitions being read (:class:`ActivePartitions`): held, they are not.

    Table recovery reads each changelog up to its end, which Faust takes, under exactly-once,
    from aiokafka's last stable offset of the partition: a value aiokafka learns from fetch
    answers only, so a worker that has just been assigned a changelog has none, and Faust took
    every changelog for empty. A worker taking partitions over then started their tables empty,
    read every source from its first offset, and published each slot again (identically: the
    noise is derived), and a ``read_committed`` consumer saw whole streams twice. The end is
    asked of the broker instead (ListOffsets, as Faust does under at-least-once): with the
    consumer's ``read_committed`` isolation the broker answers with the last stable offset.

    A stopping worker stops its agents before it flushes its producer for the last time (Faust
    flushes first, and its agents, still applying what they had fetched, queued more writes
    behind the flush), and the flush sends everything queued (:class:`DrainingProducerBuffer`):
    nothing is left to send once the producer is closed.
    """

    topic_partitions: dict[str, int] = {}
    #: (source topic names, table, processor) of every agent
    stateful_sources: list[tuple[tuple[str, ...], Any, Processor]] = []
    #: every agent's watch for offsets its fetches passed over
    input_gaps: list["InputGaps"] = []

    def _new_consumer(self):
        # Faust's aiokafka consumer, whose methods are patched on this instance below (Faust's types
        # know its abstract interface only)
        consumer: Any = super()._new_consumer()
        thread = consumer._thread

        async def end_offsets(partitions) -> dict:
            return await thread._ensure_consumer().end_offsets(partitions)

        async def changelog_ends(*partitions: TP) -> dict:
            # in the consumer's own thread, as Faust's own highwaters are read
            return await thread.call_thread(end_offsets, list(partitions))

        consumer.highwaters = changelog_ends

        async def seek_in_consumer_thread(tp: TP, offset: int) -> None:
            # Faust seeks from the event loop's thread, but aiokafka's seek drops the partition's
            # fetched records while the consumer's own thread may be reading them (a KeyError
            # that crashed the fetcher): so the seek runs in the consumer's thread.
            await thread.call_thread(thread.seek, tp, offset)

        consumer._seek = seek_in_consumer_thread
        fetch_records = thread._fetch_records

        async def fetch_active_only(client, active_partitions, timeout=None, max_records=None) -> dict:
            if not active_partitions:
                return {}
            return await fetch_records(client, ActivePartitions(active_partitions), timeout=timeout,
                                       max_records=max_records)

        thread._fetch_records = fetch_active_only
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

    def _new_producer(self):
        producer = super()._new_producer()
        producer.buffer = DrainingProducerBuffer(loop=producer.loop, beacon=producer.beacon)
        producer.buffer.app = self
        return producer

    async def _producer_flush(self, logger: Any) -> None:
        if self.should_stop:  # the last flush: nothing may be queued after it (a rebalance's agents go on)
            await self.agents.stop()
        await super()._producer_flush(logger)

    def reads_state(self, topic: str) -> bool:
        """Whether a stateful agent reads ``topic`` (its positions then come from the states)."""
        return any(topic in topics for topics, _, _ in self.stateful_sources)

    def resume_offset(self, topic: str, partition: int) -> int | None:
        """The lowest resume offset of the stateful agents reading ``topic`` (None: none does)."""
        count = self.topic_partitions.get(topic, 1)

        def partition_of(key: str) -> int:
            return key_partition(key, count)

        offsets = [processor.resume_offset(topic, partition, functools.partial(_table_value, table), partition_of)
                   for topics, table, processor in self.stateful_sources if topic in topics]
        applied = [offset for offset in offsets if offset is not None]
        return min(applied) if applied else None


def _table_value(table: Any, key: str) -> bytes | None:
    """``key``'s value in a Faust table, whose keys are bytes."""
    return table.get(key.encode())


class ActivePartitions:
    """Faust's set of partitions being read, as the fetch sees it: live, and never "all".

    aiokafka's ``fetched_records(partitions)`` hands over the records of every partition when
    ``partitions`` is empty, and checks the set each time a fetch answers. Faust passes its own set,
    which it empties while it pauses everything (and this app does while it holds every source
    until sought); records handed over then are dropped by Faust, their offsets consumed. Here an
    empty set reads nothing, and membership is Faust's at the moment of each hand-over.

    >>> from faust.types import TP
    >>> reading = set()
    >>> view = ActivePartitions(reading)
    >>> bool(view), TP("reports", 0) in view
    (True, False)
    >>> reading.add(TP("reports", 0))
    >>> TP("reports", 0) in view
    True
    """

    __slots__ = ("tps",)

    def __init__(self, tps: set[TP]) -> None:
        self.tps = tps

    def __contains__(self, tp: object) -> bool:
        return tp in self.tps

    def __bool__(self) -> bool:
        return True


class DrainingProducerBuffer(ProducerBuffer):
    """Faust's producer buffer (where table writes wait before they are handed to the Kafka
    client), bounded, and whose :meth:`flush` hands over every message queued before the call.

    Faust's flush waits until the buffer is empty, and gives up as soon as one message takes more
    than 0.1 s; its bound (:attr:`max_messages`, checked before each input an agent takes) gives
    up the same way. All three break when the broker takes the writes more slowly than the agents
    make them, as the embedded broker does with one record per request and partition. A busy
    worker's other agents keep queueing writes, so the buffer is rarely empty, and M2's flush
    before each release waited for theirs too: releases paused as long as a backlog of reports
    lasted. A broker slower than 0.1 s a message (a loaded machine) ended the flush early: M2's
    ledger could then leave after its release, and a stopping worker closed its producer with
    writes still queued (ProducerClosed). The bound gave way too, and the buffer grew by thousands.

    Here a flush waits for the messages queued before it, and for no other; an agent waits before
    its next input while more than :attr:`max_messages` wait, for as long as the broker takes.
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        self.queued = 0  # messages put in the buffer
        self.handed = 0  # of them, handed to the Kafka client (in their order)
        self._handed_one = asyncio.Event()

    def put(self, fut) -> None:
        super().put(fut)
        self.queued += 1

    async def _send_pending(self, fut) -> None:
        await super()._send_pending(fut)
        self.handed += 1
        self._handed_one.set()

    async def _wait_for_handed(self, count: int) -> bool:
        """Wait until ``count`` messages have been handed over; False if the buffer stops first."""
        while self.handed < count:
            if self.state != "running":
                return False
            self._handed_one.clear()
            try:  # woken by each message handed over; the state is looked at again every second
                await asyncio.wait_for(self._handed_one.wait(), timeout=1.0)
            except asyncio.TimeoutError:
                pass
        return True

    async def flush(self) -> None:
        """Hand the messages queued so far to the Kafka client (whose own flush then waits for
        their confirmation)."""
        if not await self._wait_for_handed(self.queued):
            raise RuntimeError("Cannot flush: Producer not Running")

    async def wait_until_ebb(self) -> None:
        """Wait until at most :attr:`max_messages` messages wait to be handed over."""
        await self._wait_for_handed(self.queued - self.max_messages)


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

    async def admit(self, consumer, message) -> bool:
        """Whether an agent applies ``message`` now: a record past a hole is not applied, and the
        hole is read again (after :data:`HOLE_RETRY_SECONDS`) by seeking ``consumer`` back to it."""
        action, offset = self.check(message.topic, message.partition, message.offset, time.monotonic())
        if action == self.SEEK:
            await asyncio.sleep(HOLE_RETRY_SECONDS)
            try:
                await consumer.seek(TP(message.topic, message.partition), offset)
            except IllegalStateError as exc:  # revoked meanwhile: its next owner seeks it to its state
                log.info("could not read %s[%d] again from %d: %s", message.topic, message.partition, offset, exc)
                self.forget(message.topic, message.partition)
        return action == self.APPLY


def shorten_fetch_wait() -> None:
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
