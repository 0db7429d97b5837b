"""Reading the public topics: releases (deduplicated by (stream, slot)) and audit records."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from typing import Iterator

import numpy as np

from ..wire.format import DecodeError
from ..wire.records import ReleaseRecord
from ..settings import KafkaCredentials
from .kafka import consumer_config
from ..wire.topics import RELEASES


class Releases:
    """Follows ``releases`` from the beginning; yields each (stream, slot) once, in arrival order.

    A re-emission after a worker crash is identical to the first copy (and is skipped here).
    """

    def __init__(self, bootstrap: str, streams: list[str] | None = None, topic: str = RELEASES,
                 tansu_compat: bool = False, credentials: KafkaCredentials | None = None) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.consumer = Consumer(consumer_config(bootstrap, group=None, tansu_compat=tansu_compat,
                                                 credentials=credentials)
                                 | {"group.id": f"wevent-subscribe-{uuid.uuid4()}"})
        # Assign partitions directly: no consumer-group join, so the first release shows at once.
        metadata = self.consumer.list_topics(topic, timeout=30)
        partitions = metadata.topics[topic].partitions if topic in metadata.topics else {}
        self.consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        self.streams = set(streams) if streams else None
        self.seen: dict[tuple[str, int], str] = {}
        self.conflicts: list[tuple[str, int]] = []  # two different releases for one slot (must never happen)

    def follow(self, idle_timeout: float | None = None) -> Iterator[ReleaseRecord]:
        last = time.monotonic()
        while True:
            message = self.consumer.poll(0.2)
            if message is None or message.error():
                if idle_timeout is not None and time.monotonic() - last > idle_timeout:
                    return
                continue
            last = time.monotonic()
            try:
                record = ReleaseRecord.from_json(message.value())
            except (DecodeError, ValueError, TypeError):
                continue
            if self.streams and record.stream not in self.streams:
                continue
            key = (record.stream, record.slot)
            text = record.to_json()
            if key in self.seen:
                if self.seen[key] != text:
                    self.conflicts.append(key)
                continue
            self.seen[key] = text
            yield record

    def close(self) -> None:
        self.consumer.close()

    def __enter__(self) -> "Releases":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def format_release(record: ReleaseRecord, top: int = 3) -> str:
    """One human line: stream, slot, time, strategy, spend, and the largest bins."""
    when = dt.datetime.fromtimestamp(record.slot_start, dt.timezone.utc).strftime("%Y-%m-%d %H:%M") if record.slot_start else ""
    values = np.asarray(record.release)
    order = np.argsort(values)[::-1][:top]
    bins = "  ".join(f"[{i}] {values[i]:.1f}" for i in order)
    return (f"{record.stream:<10} slot {record.slot:>5}  {when:<16}  {record.strategy:<11} "
            f"eps {record.eps1 + record.eps2:.4f}  window {record.window_spend:.3f}/{record.epsilon:g}   {bins}")


def read_topic(bootstrap: str, topic: str, timeout: float = 30.0,
               credentials: KafkaCredentials | None = None) -> list[bytes]:
    """Every message currently in ``topic`` (all partitions, up to their high watermarks)."""
    from confluent_kafka import Consumer, TopicPartition

    from ...errors import UsageError

    consumer = Consumer(consumer_config(bootstrap, credentials=credentials))
    values = []
    try:
        metadata = consumer.list_topics(topic, timeout=timeout)
        if topic not in metadata.topics or not metadata.topics[topic].partitions:
            raise UsageError(f"topic {topic!r} does not exist")
        for p in metadata.topics[topic].partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, p, low)])
            while True:
                message = consumer.poll(5)
                if message is None:
                    break  # nothing more within 5 s
                if message.error():
                    continue
                values.append(message.value())
                if message.offset() >= high - 1:
                    break
    finally:
        consumer.close()
    return values
