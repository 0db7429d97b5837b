"""confluent-kafka producers and consumers configured for tansu or a real Kafka."""

from __future__ import annotations

import logging
from typing import Iterator

import numpy as np

from ...errors import LostState, Unavailable
from ..settings import KafkaCredentials
from ..wire.reports import ReportBatch, Watermark, json_report, report_partition
from ..wire.topics import REPORTS

kafka_log = logging.getLogger("wevent.kafka")
kafka_log.addHandler(logging.NullHandler())  # no handler configured (a CLI): silent, not Python's last resort

MAX_REPORTS_PER_MESSAGE = 65_536  # 512 KiB of report payload: under Kafka's default 1 MiB message limit


def faust_credentials(credentials: KafkaCredentials):
    """Faust's credentials (for its aiokafka clients), or None for plain TCP."""
    import faust

    context = credentials.ssl_context()
    if credentials.sasl:
        return faust.SASLCredentials(username=credentials.username, password=credentials.password,
                                     mechanism=credentials.mechanism, ssl_context=context)
    return faust.SSLCredentials(context) if context is not None else None


def client_config(bootstrap: str, credentials: KafkaCredentials | None = None) -> dict:
    """What every confluent client needs: the servers, and the credentials if any
    (:meth:`Settings.kafka_credentials <wevent.stream.settings.Settings.kafka_credentials>`)."""
    # Warnings and errors only, through Python logging (rate-limited in a worker, silent in a
    # command): librdkafka itself prints every failed reconnection to stderr, thousands of lines
    # when a broker dies. Callers learn of failures from their calls and delivery reports.
    return {"bootstrap.servers": bootstrap, "log_level": 4, "logger": kafka_log,
            **(credentials.librdkafka() if credentials else {})}


def producer_config(bootstrap: str, tansu_compat: bool, credentials: KafkaCredentials | None = None) -> dict:
    config = {
        **client_config(bootstrap, credentials),
        # Java-compatible key hashing, as Faust (aiokafka) uses: keyed messages from any client
        # land on the partition a Faust table expects.
        "partitioner": "murmur2_random",
        "message.max.bytes": 4_000_000,
    }
    if tansu_compat:
        config.update({"batch.num.messages": 1, "linger.ms": 0})  # one record per batch (tansu high watermarks)
    else:
        config.update({"linger.ms": 5, "compression.type": "lz4"})
    return config


# tansu holds an idle fetch for its whole max wait even when data arrives meanwhile: librdkafka's
# default of 500 ms would add 250 ms on average to every message a consumer waits for.
TANSU_FETCH_WAIT_MS = 20


def consumer_config(bootstrap: str, group: str | None = None, tansu_compat: bool = False,
                    credentials: KafkaCredentials | None = None) -> dict:
    config = {
        **client_config(bootstrap, credentials),
        "group.id": group or "wevent-observer",
        "enable.auto.commit": group is not None,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 10_000,
    }
    if tansu_compat:  # real Kafka answers a fetch as soon as data arrives
        config["fetch.wait.max.ms"] = TANSU_FETCH_WAIT_MS
    return config


def key_partition(key: str, partitions: int) -> int:
    """The partition a message keyed by ``key`` goes to: Kafka's default partitioner (murmur2 of
    the key's bytes, as Java clients, Faust and our confluent producers compute it).

    >>> key_partition("taxi", 1), [key_partition(name, 8) for name in ("taxi", "taxi-local")]
    (0, [7, 4])
    """
    from aiokafka.partitioner import murmur2

    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions


class DeliveryError(Unavailable):
    """Messages a producer was given did not reach the broker within its delivery timeout."""


class LostMessages(DeliveryError, LostState):
    """The broker confirmed messages it no longer holds (an in-memory broker restarted)."""


class KafkaReportSink:
    """Sends a stream's per-slot user values to ``reports``: batched binary, then watermarks.

    Each user's reports go to the partition that owns the user (:func:`report_partition`). Before
    its first reports, every partition gets a watermark at the start of that slot, so that every
    assembler knows the producer before another producer's watermark closes the slot; after a
    slot's reports, every partition gets a watermark at the slot's end, so every assembler can
    close the slot. The watermarks name the producer (``producer``, None for the anonymous one:
    :class:`Watermark`). ``wire`` is ``"wrb1"`` (batches of up to
    :data:`MAX_REPORTS_PER_MESSAGE` reports and binary watermarks) or ``"json"`` (a message per
    report, and JSON watermarks: the form of a simple producer in another language). For a
    local-model stream (``clock_only``) only the watermarks are sent: the values stay with the
    devices, which answer the server's requests with perturbed reports.

    Every message's delivery is confirmed by the broker or fails after ``delivery_timeout``
    seconds; once one has failed, sending and :meth:`close` raise :class:`DeliveryError` (a slot
    with a hole must not look sent). On the embedded broker (``tansu_compat``), :meth:`close` also
    checks that it still holds what it confirmed: each partition's end offset must have moved by at
    least the messages delivered there (an in-memory broker restarted during the replay confirms
    the later messages but has lost the earlier ones). Only there: a durable Kafka does not lose
    what it acknowledged, and tansu's end offsets are right only when every record is its own batch.
    ``credentials`` say how to reach a secured Kafka.
    """

    def __init__(self, bootstrap: str, stream: str, partitions: int, tansu_compat: bool = False,
                 clock_only: bool = False, delivery_timeout: float = 60.0,
                 credentials: KafkaCredentials | None = None, producer: str | None = None,
                 wire: str = "wrb1") -> None:
        from confluent_kafka import Producer

        if wire not in ("wrb1", "json"):
            raise ValueError(f"wire is 'wrb1' or 'json', got {wire!r}")
        self.bootstrap = bootstrap
        self.stream = stream
        self.producer_id = producer
        self.wire = wire
        self.announced = False  # the first watermark, before any report, went out
        self.clock_only = clock_only  # a local-model stream: values stay with the devices
        self.partitions = partitions
        self.delivery_timeout = delivery_timeout
        self.check_held = tansu_compat
        self.credentials = credentials
        self.producer = Producer(producer_config(bootstrap, tansu_compat, credentials)
                                 | {"message.timeout.ms": round(delivery_timeout * 1000)})
        self.reports_sent = 0
        self.messages_sent = 0
        self.delivered = 0
        self.delivered_to = [0] * partitions
        self.failed = 0
        self.failure: str | None = None  # the first delivery error
        self.start_offsets = self._end_offsets() if self.check_held else None

    def _end_offsets(self) -> list[int]:
        """The end offset of each ``reports`` partition; 0 for one the broker does not have."""
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        consumer = Consumer(consumer_config(self.bootstrap, credentials=self.credentials))
        try:
            topic = consumer.list_topics(REPORTS, timeout=10).topics.get(REPORTS)
            present = topic.partitions if topic and not topic.error else {}
            return [consumer.get_watermark_offsets(TopicPartition(REPORTS, p), timeout=10, cached=False)[1]
                    if p in present else 0 for p in range(self.partitions)]
        except KafkaException as exc:
            raise DeliveryError(f"cannot reach Kafka at {self.bootstrap}: {exc.args[0].str()}") from None
        finally:
            consumer.close()

    def _on_delivery(self, error, message) -> None:
        if error is None:
            self.delivered += 1
            self.delivered_to[message.partition()] += 1
        else:
            self.failed += 1
            self.failure = self.failure or error.str()

    def _check_deliveries(self) -> None:
        if self.failed:
            raise DeliveryError(f"{self.failed:,} of {self.messages_sent:,} messages were not delivered to Kafka at "
                                f"{self.bootstrap} ({self.failure}); {self.delivered:,} were")

    def _produce(self, value: bytes, partition: int) -> None:
        while True:
            self._check_deliveries()
            try:
                self.producer.produce(REPORTS, value, partition=partition, on_delivery=self._on_delivery)
                break
            except BufferError:  # local queue full: deliveries drain it, or fail within the delivery timeout
                self.producer.poll(0.05)
        self.producer.poll(0)
        self.messages_sent += 1

    def send_slot(self, slot: int, slot_start: float, slot_end: float, users: np.ndarray, values: np.ndarray) -> None:
        if not self.announced:
            self.watermark(slot_start)
        if not self.clock_only:
            self.send_reports(slot_start, users, values)
        self.watermark(slot_end)

    def send_reports(self, slot_start: float, users: np.ndarray, values: np.ndarray) -> None:
        """One slot's reports, without the watermark that closes it."""
        users = np.asarray(users, dtype=np.int64)
        values = np.asarray(values, dtype=np.int64)
        part = report_partition(users, self.partitions)
        time_ms = round(slot_start * 1000)
        for p in range(self.partitions):
            chosen = np.flatnonzero(part == p)
            if self.wire == "json":  # one message per report: the JSON form has no batches
                for user, value in zip(users[chosen].tolist(), values[chosen].tolist()):
                    self._produce(json_report(self.stream, user, slot_start, value), p)
                continue
            for chunk in _chunks(chosen, MAX_REPORTS_PER_MESSAGE):
                batch = ReportBatch(self.stream, users[chunk], values[chunk], np.full(chunk.size, time_ms))
                self._produce(batch.encode(), p)
        self.reports_sent += int(users.size)

    def watermark(self, time: float) -> None:
        """A watermark at ``time`` to every partition."""
        mark = Watermark(self.stream, time, self.producer_id)
        value = mark.encode_wrb1() if self.wire == "wrb1" else mark.encode()
        for p in range(self.partitions):
            self._produce(value, p)
        self.announced = True

    def abandon(self) -> None:
        """Drop what is still queued (the sender is stopping): a later :meth:`close` then fails at once."""
        self.producer.purge()

    def close(self) -> None:
        """Wait for every delivery report; raise :class:`DeliveryError` unless all were delivered."""
        self.producer.flush(self.delivery_timeout + 5)  # a message not delivered by then has failed
        self._check_deliveries()
        if self.delivered < self.messages_sent:
            raise DeliveryError(f"{self.messages_sent - self.delivered:,} of {self.messages_sent:,} messages still "
                                f"unconfirmed by Kafka at {self.bootstrap} after {self.delivery_timeout:g} s")
        if not self.check_held:
            return
        held = np.subtract(self._end_offsets(), self.start_offsets)
        lost = np.flatnonzero(held < self.delivered_to)
        if lost.size:
            p = int(lost[0])
            raise LostMessages(f"Kafka at {self.bootstrap} confirmed {self.delivered_to[p]:,} messages to reports[{p}] "
                                f"but holds {max(int(held[p]), 0):,} more than before the replay: it lost messages "
                                "(an in-memory broker restarted?)")


def sink_for(bootstrap: str, stream, partitions: int, tansu_compat: bool, delivery_timeout: float = 60.0,
             credentials: KafkaCredentials | None = None, producer: str | None = None) -> "KafkaReportSink":
    """The sink a replay into ``stream`` uses: reports and clock, or the clock alone (local model),
    as the producer named ``producer`` (None: the anonymous one)."""
    return KafkaReportSink(bootstrap, stream.name, partitions, tansu_compat, clock_only=stream.model == "local",
                           delivery_timeout=delivery_timeout, credentials=credentials, producer=producer)


def check_feed_fits(feed, stream) -> None:
    """The feed's users, values and clock must fit the stream it is replayed into."""
    from ...errors import UsageError

    if feed.users > stream.users or feed.domain_size > stream.domain:
        raise UsageError(f"the feed ({feed.users} users, d = {feed.domain_size}) does not fit stream {stream.name!r} "
                         f"({stream.users} users, d = {stream.domain})")
    offset = (feed.start - stream.start) / stream.slot_seconds
    if feed.slot_seconds != stream.slot_seconds or abs(offset - round(offset)) > 1e-9:
        raise UsageError(f"the feed's slots ({feed.slot_seconds:g} s from {feed.start:g}) do not line up with stream "
                         f"{stream.name!r} ({stream.slot_seconds:g} s from {stream.start:g})")


def _chunks(indices: np.ndarray, size: int) -> Iterator[np.ndarray]:
    for start in range(0, indices.size, size):
        yield indices[start : start + size]
