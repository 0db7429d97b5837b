"""Reading the public topics: releases (verified, deduplicated by (stream, slot)), audit records
and dead letters, and a stream's newest records."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Generator, Iterator, Mapping, NamedTuple, Sequence

import numpy as np

from ..wire.format import DecodeError
from ..wire.records import DeadLetter, PublishedRecords, ReleaseRecord
from ..wire.seals import SignatureSeal
from ..settings import KafkaCredentials
from .broker import ask_again
from .kafka import consumer_config, key_partition, message_offset, message_value
from ..wire.topics import DEAD_LETTERS, RELEASES

__all__ = ["Published", "ReleaseReader", "Releases", "DeadLetterWatch", "STREAM_STOPPED", "newest_first",
           "ReleaseDisplay", "RELEASE_LEGEND", "read_topic"]


class Published(NamedTuple):
    """A release as its record and as the message that carried it (signed: what a log keeps)."""

    record: ReleaseRecord
    message: bytes


class ReleaseReader:
    """Which messages of ``releases`` a reader shows: each (stream, slot) once, the first copy that
    verifies, in arrival order.

    With a release public key (``key``), only releases whose signature verifies under it count: a
    record anyone else wrote (unsigned, forged, a changed byte, another server's) is dropped and
    counted in ``published.dropped``, and the genuine release of its slot still shows when it
    follows a forgery. With ``parameters``, releases whose ``parameters`` differ (made with
    another configuration) are dropped and counted too; with ``streams``, only those streams'
    releases count. ``key`` None verifies nothing: a reader of its own embedded broker, or
    ``--no-verify``. A re-emission after a worker crash is identical to the first copy (and is
    skipped).
    """

    def __init__(self, streams: list[str] | None = None, *, key: SignatureSeal | None = None,
                 parameters: dict[str, Any] | None = None) -> None:
        self.streams = set(streams) if streams else None
        self.published = PublishedRecords(key)
        self.parameters = parameters
        self.seen: dict[tuple[str, int], str] = {}
        self.conflicts: list[tuple[str, int]] = []  # two different releases for one slot (unverified readers only)

    def take(self, raw: bytes) -> ReleaseRecord | None:
        """The release ``raw`` holds if it is one to show: verified, wanted, and the first of its slot."""
        fields = self.published.read(raw)
        if fields is None or (self.streams and fields["stream"] not in self.streams):
            return None
        try:
            record = ReleaseRecord.from_fields(fields)
        except (DecodeError, ValueError, TypeError):
            self.published.dropped["not a release"] += 1
            return None
        if self.parameters is not None and record.parameters != self.parameters:
            self.published.dropped["made with other parameters"] += 1
            return None
        key = (record.stream, record.slot)
        text = record.to_json()
        if key in self.seen:
            if self.seen[key] != text:
                self.conflicts.append(key)
            return None
        self.seen[key] = text
        return record


class Releases(ReleaseReader):
    """Follows ``releases`` from the beginning, as a :class:`ReleaseReader` reads it."""

    def __init__(self, bootstrap: str, streams: list[str] | None = None, topic: str = RELEASES,
                 tansu_compat: bool = False, credentials: KafkaCredentials | None = None, *,
                 key: SignatureSeal | None = None, parameters: dict[str, Any] | None = None) -> None:
        from confluent_kafka import Consumer, TopicPartition

        super().__init__(streams, key=key, parameters=parameters)
        self.consumer = Consumer(consumer_config(bootstrap, group=None, tansu_compat=tansu_compat,
                                                 credentials=credentials)
                                 | {"group.id": f"wevent-subscribe-{uuid.uuid4()}"})
        # Assign partitions directly: no consumer-group join, so the first release shows at once.
        metadata = ask_again(lambda seconds: self.consumer.list_topics(topic, timeout=seconds), 30)
        partitions = metadata.topics[topic].partitions if topic in metadata.topics else {}
        self.consumer.assign([TopicPartition(topic, p, 0) for p in partitions])

    def follow(self, idle_timeout: float | None = None) -> Iterator[ReleaseRecord]:
        """The releases, until ``idle_timeout`` seconds pass without a message (None: for ever)."""
        for release in self.follow_published(idle_timeout):
            yield release.record

    def follow_published(self, idle_timeout: float | None = None) -> Iterator[Published]:
        """As :meth:`follow`, each release with the message that carried it."""
        last = time.monotonic()
        while True:
            message = self.consumer.poll(0.2)
            if message is None or message.error():
                if idle_timeout is not None and time.monotonic() - last > idle_timeout:
                    return
                continue
            last = time.monotonic()
            value = message_value(message)
            record = self.take(value)
            if record is not None:
                yield Published(record, value)

    def close(self) -> None:
        self.consumer.close()

    def __enter__(self) -> "Releases":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


STREAM_STOPPED = ("config_changed", "unreadable_state", "too_large")
"""Dead-letter reasons after which a stream releases nothing more until an operator acts: M2
refuses every later slot under changed parameters, or a state it cannot read or write."""


class DeadLetterWatch:
    """The dead letters of one stream that stop it (:data:`STREAM_STOPPED`), from given offsets of
    ``deadletter`` on (:meth:`ends`: where the topic ends now, before a worker starts)."""

    def __init__(self, bootstrap: str, stream: str, start: dict[int, int], tansu_compat: bool = False,
                 credentials: KafkaCredentials | None = None) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.stream = stream
        self.consumer = Consumer(consumer_config(bootstrap, tansu_compat=tansu_compat, credentials=credentials))
        self.consumer.assign([TopicPartition(DEAD_LETTERS, p, offset) for p, offset in start.items()])

    @staticmethod
    def ends(bootstrap: str, credentials: KafkaCredentials | None = None, timeout: float = 30.0) -> dict[int, int]:
        """Where each partition of ``deadletter`` ends now."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(consumer_config(bootstrap, credentials=credentials))
        try:
            metadata = ask_again(lambda seconds: consumer.list_topics(DEAD_LETTERS, timeout=seconds), timeout)
            partitions = metadata.topics[DEAD_LETTERS].partitions if DEAD_LETTERS in metadata.topics else {}
            return {p: consumer.get_watermark_offsets(TopicPartition(DEAD_LETTERS, p), timeout=timeout)[1]
                    for p in partitions}
        finally:
            consumer.close()

    def stopping(self) -> DeadLetter | None:
        """The first dead letter of the stream that stops it among those arrived since the last call."""
        while True:
            message = self.consumer.poll(0)
            if message is None:
                return None
            value = message.value()
            if message.error() or value is None:
                continue
            try:
                letter = DeadLetter.from_json(value)
            except (DecodeError, ValueError, TypeError):
                continue
            if letter.stream == self.stream and letter.reason in STREAM_STOPPED:
                return letter

    def close(self) -> None:
        self.consumer.close()

    def __enter__(self) -> "DeadLetterWatch":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def newest_first(bootstrap: str, topic: str, stream: str, credentials: KafkaCredentials | None = None,
                 chunk: int = 256, timeout: float = 30.0) -> Generator[bytes, None, None]:
    """The messages keyed ``stream`` on ``topic`` (a stream-keyed topic: all in the partition of
    its key), newest first: the partition is read backwards, ``chunk`` messages at a time, so that
    a caller looking for the newest of them reads only the partition's end."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(consumer_config(bootstrap, credentials=credentials))
    try:
        metadata = ask_again(lambda seconds: consumer.list_topics(topic, timeout=seconds), timeout)
        if topic not in metadata.topics or not metadata.topics[topic].partitions:
            return
        partition = key_partition(stream, len(metadata.topics[topic].partitions))
        low, end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
        key = stream.encode()
        while end > low:
            start = max(low, end - chunk)
            consumer.assign([TopicPartition(topic, partition, start)])
            found = []
            while True:
                message = consumer.poll(5)
                if message is None:
                    break  # nothing more within 5 s
                if message.error():
                    continue
                offset = message_offset(message)
                if offset >= end:
                    break  # past the chunk
                if message.key() == key:
                    found.append(message_value(message))
                if offset >= end - 1:
                    break
            yield from reversed(found)
            end = start
    finally:
        consumer.close()


RELEASE_LEGEND = (
    "legend: publish = a fresh noisy release; approximate = the last release repeated, no publication budget spent; "
    "nullified = the last release repeated while an earlier publication's budget is paid back; not_sampled = the "
    "last release repeated between scheduled samples; every mechanism starts from an all-zero release, so slots "
    "before the first publish show zeros; slot spend = the budget every user was charged in this slot (on a personalized "
    "stream the most any type of user was charged; a local stream shows each phase's reports and the budget of "
    "each report instead); window spend = the most any user "
    "spent over the w slots ending here, at most epsilon; bins: the largest, by name")
"""One line that says what :meth:`ReleaseDisplay.line` shows: printed once, before the first release."""


@dataclass(frozen=True)
class ReleaseDisplay:
    """How a terminal shows releases: one line each, with the slot's strategy, its spend, the
    window's spend against epsilon, and the ``top`` largest bins by name.

    ``names`` maps a stream to its bins' names (a config's ``labels``: a grid's cells, a feed's
    countries or categories); a stream without names shows its bins as ``[i]``. ``clip_negative``
    and ``digits`` post-process what is shown: negative bins as 0, and values rounded to
    ``digits`` decimals. Post-processing a differentially private release costs no privacy; a
    clipped release is no longer unbiased (its noise no longer averages out). The records
    themselves (``--json``, release logs) always stay as published.

    Examples
    --------
    >>> from wevent.stream.wire.records import ReleaseRecord
    >>> record = ReleaseRecord("taxi", 3, [-1.4, 7.6, 2.0], "publish", "ba", 1.0, 20, 0.025, 0.2, 0.45)
    >>> ReleaseDisplay({"taxi": ["r0c0", "r0c1", "r1c0"]}, clip_negative=True, digits=0).line(record)
    'taxi       slot     3                    publish     slot spend 0.2250  window spend 0.4500 of epsilon 1   r0c1 8  r1c0 2  r0c0 0'
    """

    names: Mapping[str, Sequence[str]] = field(default_factory=dict)
    clip_negative: bool = False
    digits: int | None = None
    top: int = 3

    def values(self, record: ReleaseRecord) -> np.ndarray:
        """The release as shown: clipped at zero and rounded if asked."""
        values = np.asarray(record.release, dtype=float)
        if self.clip_negative:
            values = np.maximum(values, 0.0)
        if self.digits is not None:
            values = np.round(values, self.digits) + 0.0  # + 0.0: no "-0"
        return values

    def bin_name(self, stream: str, index: int) -> str:
        names = self.names.get(stream, ())
        return names[index] if index < len(names) else f"[{index}]"

    def line(self, record: ReleaseRecord) -> str:
        when = (dt.datetime.fromtimestamp(record.slot_start, dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
                if record.slot_start else "")
        values = self.values(record)
        shown = f".{self.digits}f" if self.digits is not None else ".1f" if np.abs(values).max(initial=0) >= 1 else ".4f"
        order = np.argsort(-values, kind="stable")[:self.top]
        bins = "  ".join(f"{self.bin_name(record.stream, int(i))} {values[i]:{shown}}" for i in order)
        return (f"{record.stream:<10} slot {record.slot:>5}  {when:<16}  {record.strategy:<11} {slot_spend(record)}  "
                f"{window_spend(record)}   {bins}")


def slot_spend(record: ReleaseRecord) -> str:
    """What the slot spent, in words that add up: what every user was charged (central); on a
    personalized stream, the most any type of user was charged (each type pays its own budgets,
    and the largest phase budgets may belong to different types); on a local stream, each
    phase's reports and the budget of each report (a user asked by one phase pays that phase's
    budget; population division asks a user once per window, so the two phases' budgets do not
    add up to any user's spend)."""
    if "n1" in record.extras:
        return (f"reports {record.extras['n1']} at eps {record.eps1:.4g} + {record.extras['n2']} at eps "
                f"{record.eps2:.4g}")
    if "type_eps1" in record.extras:
        charged = np.add(record.extras["type_eps1"], record.extras["type_eps2"])
        return f"slot spend {charged.max(initial=0.0):.4f} (the most any type paid)"
    return f"slot spend {record.eps1 + record.eps2:.4f}"


def window_spend(record: ReleaseRecord) -> str:
    """The window's spend against its bound: epsilon, or each user's own epsilon (personalized)."""
    if "window_spend_ratio" in record.extras:
        return f"window spend {record.extras['window_spend_ratio']:.4f} of each user's own epsilon"
    return f"window spend {record.window_spend:.4f} of epsilon {record.epsilon:g}"


def read_topic(bootstrap: str, topic: str, timeout: float = 30.0,
               credentials: KafkaCredentials | None = None) -> list[bytes]:
    """Every message currently in ``topic`` (all partitions, up to their high watermarks): all of
    them, or :class:`~wevent.errors.Unavailable` after ``timeout`` seconds of a partition without
    a message before its end."""
    from confluent_kafka import Consumer, TopicPartition

    from ...errors import Unavailable, UsageError

    consumer = Consumer(consumer_config(bootstrap, credentials=credentials))
    values = []
    try:
        metadata = ask_again(lambda seconds: consumer.list_topics(topic, timeout=seconds), timeout)
        if topic not in metadata.topics or not metadata.topics[topic].partitions:
            raise UsageError(f"topic {topic!r} does not exist")
        for p in metadata.topics[topic].partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
            consumer.assign([TopicPartition(topic, p, low)])
            deadline = time.monotonic() + timeout
            # The end is the high watermark: the last message's offset, or a transaction marker
            # (never delivered) that the consumer's position passes.
            while high > low and consumer.position([TopicPartition(topic, p)])[0].offset < high:
                message = consumer.poll(0.5)
                if message is not None and not message.error():
                    values.append(message_value(message))
                    deadline = time.monotonic() + timeout
                elif time.monotonic() > deadline:
                    raise Unavailable(f"topic {topic!r} partition {p} gave no message for {timeout:g} s "
                                      f"before its end (offset {high})")
    finally:
        consumer.close()
    return values
