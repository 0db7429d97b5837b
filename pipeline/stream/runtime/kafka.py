"""confluent-kafka producers and consumers configured for tansu or a real Kafka, and what Faust's
aiokafka clients get of the same client properties (:func:`faust_options`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np

from ...errors import LostState, Unavailable, UsageError
from ..kafka_properties import is_secret
from ..settings import KafkaCredentials
from ..wire.reports import ReportBatch, Watermark, json_report, report_partition
from ..wire.topics import REPORTS

if TYPE_CHECKING:  # confluent_kafka is imported where a client is made
    from confluent_kafka import Message

kafka_log = logging.getLogger("wevent.kafka")
kafka_log.addHandler(logging.NullHandler())  # no handler configured (a CLI): silent, not Python's last resort

MAX_REPORTS_PER_MESSAGE = 65_536  # 512 KiB of report payload: under Kafka's default 1 MiB message limit
# What a report sink lets wait for the broker's confirmation: past either bound it waits for delivery
# reports before it sends more. A message's delivery timeout runs from its sending, so an unbounded
# queue (librdkafka's default holds 100,000 messages) fails messages whose only fault is having
# waited behind the others for a broker that takes them more slowly than they are produced.
MAX_UNCONFIRMED_MESSAGES = 1_000
MAX_UNCONFIRMED_BYTES = 16 << 20


def faust_credentials(credentials: KafkaCredentials):
    """Faust's credentials (for its aiokafka clients), or None for plain TCP."""
    import faust

    context = credentials.ssl_context()
    if credentials.oauthbearer:
        from .oauth import ClientCredentialsTokens

        return faust.OAuthCredentials(oauth_cb=ClientCredentialsTokens.of(credentials), ssl_context=context)
    if credentials.sasl:
        return faust.SASLCredentials(username=credentials.username, password=credentials.password,
                                     mechanism=credentials.mechanism, ssl_context=context)
    return faust.SSLCredentials(context) if context is not None else None


def _seconds(ms: str) -> float:
    return int(ms) / 1000


def _acks(value: str) -> int:
    return {"all": -1, "-1": -1, "0": 0, "1": 1}[value.lower()]


def _boolean(value: str) -> bool:
    return {"true": True, "false": False}[value.lower()]


def _compression(value: str) -> str | None:
    from aiokafka import codec

    kind = value.lower()
    available = {"none": True, "gzip": codec.has_gzip(), "snappy": codec.has_snappy(), "lz4": codec.has_lz4(),
                 "zstd": codec.has_zstd()}
    if not available[kind]:
        raise ValueError(f"aiokafka has no {kind} codec installed")
    return None if kind == "none" else kind


#: property -> (the Faust settings that pass it to aiokafka, how its text becomes their value)
FAUST_SETTINGS: dict[str, tuple[tuple[str, ...], Callable[[str], Any]]] = {
    "client.id": (("broker_client_id",), str),
    "request.timeout.ms": (("broker_request_timeout", "producer_request_timeout"), _seconds),
    "session.timeout.ms": (("broker_session_timeout",), _seconds),
    "heartbeat.interval.ms": (("broker_heartbeat_interval",), _seconds),
    "max.poll.interval.ms": (("broker_max_poll_interval",), _seconds),
    "max.poll.records": (("broker_max_poll_records",), int),
    "max.partition.fetch.bytes": (("consumer_max_fetch_size",), int),
    "metadata.max.age.ms": (("consumer_metadata_max_age_ms", "producer_metadata_max_age_ms"), int),
    "connections.max.idle.ms": (("consumer_connections_max_idle_ms", "producer_connections_max_idle_ms"), int),
    "check.crcs": (("broker_check_crcs",), _boolean),
    "acks": (("producer_acks",), _acks),
    "linger.ms": (("producer_linger",), _seconds),
    "batch.size": (("producer_max_batch_size",), int),
    "message.max.bytes": (("producer_max_request_size",), int),
    "compression.type": (("producer_compression_type",), _compression),
}
#: properties Faust's clients honour through its credentials (:func:`faust_credentials`)
FAUST_CREDENTIALS = ("security.protocol", "sasl.mechanism", "sasl.username", "sasl.password", "ssl.ca.location",
                     "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
                     "ssl.endpoint.identification.algorithm", "sasl.oauthbearer.method", "sasl.oauthbearer.client.id",
                     "sasl.oauthbearer.client.secret", "sasl.oauthbearer.token.endpoint.url",
                     "sasl.oauthbearer.scope", "sasl.oauthbearer.extensions")


def faust_options(credentials: KafkaCredentials | None, exactly_once: bool = False, tansu_compat: bool = False) -> dict:
    """The Faust app settings that give its aiokafka clients every property of ``credentials``.

    A worker's Kafka traffic is Faust's, so a property its clients cannot honour is refused here,
    in one line, before anything connects, even where the worker's librdkafka clients (its admin
    and health checks) would take it: never left out silently. Faust passes its clients the
    credentials (:func:`faust_credentials`), the properties of :data:`FAUST_SETTINGS`, and
    ``client.dns.lookup=use_all_dns_ips`` is what aiokafka does anyway (it tries every address of
    a name in turn). Under ``exactly_once``, Faust's transactions need ``acks=all``; with
    ``tansu_compat`` a batch holds one record, whatever ``batch.size`` says.
    """
    if credentials is None:
        return {}
    options: dict = {"broker_credentials": faust_credentials(credentials)}
    for name, value in credentials.properties.items():
        if name in FAUST_CREDENTIALS or (name == "client.dns.lookup" and value == "use_all_dns_ips"):
            continue
        if name not in FAUST_SETTINGS:
            shown = name if is_secret(name) else f"{name}={value}"
            raise UsageError(f"{credentials.label(name)}: a worker's Kafka clients (aiokafka, under Faust) cannot "
                             f"honour {shown}: remove it from what the worker is given")
        settings, convert = FAUST_SETTINGS[name]
        try:
            converted = convert(value)
        except (ValueError, KeyError) as exc:
            reason = f": {exc}" if isinstance(exc, ValueError) and str(exc).startswith("aiokafka") else ""
            raise UsageError(f"{credentials.label(name)}: {value!r} is not a value of {name} a worker takes"
                             f"{reason}") from None
        options.update(dict.fromkeys(settings, converted))
    if exactly_once and options.get("producer_acks", -1) != -1:
        raise UsageError(f"{credentials.label('acks')}: processing_guarantee = \"exactly_once\" needs acks=all "
                         "(Kafka transactions)")
    if tansu_compat and "producer_max_batch_size" in options:
        raise UsageError(f"{credentials.label('batch.size')}: --tansu-compat sends one record per batch")
    return options


def client_config(bootstrap: str, credentials: KafkaCredentials | None = None, defaults: dict | None = None) -> dict:
    """What every confluent client needs: the servers, and every client property if any
    (:meth:`Settings.kafka_credentials <wevent.stream.settings.Settings.kafka_credentials>`), which
    win over the client's own ``defaults``."""
    # Warnings and errors only, through Python logging (rate-limited in a worker, silent in a
    # command): librdkafka itself prints every failed reconnection to stderr, thousands of lines
    # when a broker dies. Callers learn of failures from their calls and delivery reports.
    return {"log_level": 4, "logger": kafka_log, **(defaults or {}),
            **(credentials.librdkafka() if credentials else {}), "bootstrap.servers": bootstrap}


def producer_config(bootstrap: str, tansu_compat: bool, credentials: KafkaCredentials | None = None) -> dict:
    defaults: dict[str, int | str] = {"message.max.bytes": 4_000_000}
    if not tansu_compat:
        defaults.update({"linger.ms": 5, "compression.type": "lz4"})
    config = {
        **client_config(bootstrap, credentials, defaults),
        # Java-compatible key hashing, as Faust (aiokafka) uses: keyed messages from any client
        # land on the partition a Faust table expects.
        "partitioner": "murmur2_random",
    }
    if tansu_compat:  # tansu's workaround wins: one record per batch (tansu high watermarks)
        config.update({"batch.num.messages": 1, "linger.ms": 0})
    return config


# tansu holds an idle fetch for its whole max wait even when data arrives meanwhile: librdkafka's
# default of 500 ms would add 250 ms on average to every message a consumer waits for.
TANSU_FETCH_WAIT_MS = 20


def consumer_config(bootstrap: str, group: str | None = None, tansu_compat: bool = False,
                    credentials: KafkaCredentials | None = None) -> dict:
    config = {
        **client_config(bootstrap, credentials, {"session.timeout.ms": 10_000}),
        "group.id": group or "wevent-observer",
        "enable.auto.commit": group is not None,
        "auto.offset.reset": "earliest",
    }
    if tansu_compat:  # real Kafka answers a fetch as soon as data arrives
        config["fetch.wait.max.ms"] = TANSU_FETCH_WAIT_MS
    return config


def message_offset(message: Message) -> int:
    """The offset of a message consumed without an error (the client sets it on every one)."""
    offset = message.offset()
    assert offset is not None, "a consumed message has an offset"
    return offset


def message_value(message: Message) -> bytes:
    """The value of a message read from a topic the workers write. The workers write none without
    one, but anyone with write access can (a tombstone): it reads as empty bytes, which every
    reader refuses as it refuses any other record it cannot decode."""
    return message.value() or b""


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


class CommittedTail:
    """The records that committed transactions hold on a topic partition, read newest first.

    A ``read_committed`` consumer of its own (no group is joined, nothing is committed: ``group``
    is only the group id the ACLs let it use) reads the partition backwards in windows, each twice
    the last, from its last stable offset down, so that finding a recent record reads little;
    records of aborted transactions never show, and those of open ones lie past the last stable
    offset. Each window is read within ``timeout`` seconds, else :class:`DeliveryError`.
    """

    FIRST_WINDOW = 64

    def __init__(self, bootstrap: str, credentials: KafkaCredentials | None, group: str, timeout: float = 30.0) -> None:
        self.bootstrap = bootstrap
        self.credentials = credentials
        self.group = group
        self.timeout = timeout

    def newest_first(self, topic: str, partition: int) -> Iterator[tuple[bytes | None, bytes]]:
        """(key, value) of each committed record of ``topic[partition]``, the newest first."""
        import time

        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = Consumer(consumer_config(self.bootstrap, self.group, credentials=self.credentials)
                            | {"enable.auto.commit": False, "isolation.level": "read_committed",
                               "enable.partition.eof": True})
        try:
            low, end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=self.timeout,
                                                      cached=False)
            window = self.FIRST_WINDOW
            while end > low:
                start = max(low, end - window)
                consumer.assign([TopicPartition(topic, partition, start)])
                records: list[tuple[bytes | None, bytes]] = []
                deadline = time.monotonic() + self.timeout
                while True:
                    if time.monotonic() > deadline:
                        raise DeliveryError(f"{topic}[{partition}]: offsets {start}..{end - 1} not read within "
                                            f"{self.timeout:g} s")
                    message = consumer.poll(0.2)
                    if message is None:
                        continue
                    error = message.error()
                    if error:
                        if error.code() == KafkaError._PARTITION_EOF:
                            break
                        raise DeliveryError(f"{topic}[{partition}]: {error.str()}")
                    if message_offset(message) >= end:
                        break
                    records.append((message.key(), message_value(message)))
                yield from reversed(records)
                end, window = start, 2 * window
        finally:
            consumer.close()




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

    Sending waits for the broker: at most :data:`MAX_UNCONFIRMED_MESSAGES` messages and
    :data:`MAX_UNCONFIRMED_BYTES` bytes wait for its confirmation, and a send past either bound
    blocks, serving delivery reports, until confirmations make room. A sender faster than the
    broker is slowed to its pace, and a message waits for the broker no longer than the few before
    it take. Every message's delivery is confirmed by the broker or fails after ``delivery_timeout``
    seconds (the broker gone or refusing for that long); once one has failed, sending and
    :meth:`close` raise :class:`DeliveryError` (a slot with a hole must not look sent). On the
    embedded broker (``tansu_compat``), :meth:`close` also checks that it still holds what it
    confirmed: each partition's end offset must have moved by at least the messages delivered there
    (an in-memory broker restarted during the replay confirms the later messages but has lost the
    earlier ones). Only there: a durable Kafka does not lose what it acknowledged, and tansu's end
    offsets are right only when every record is its own batch. ``credentials`` say how to reach a
    secured Kafka.
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
        self.unconfirmed_bytes = 0  # of the messages sent whose delivery report has not come yet
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

    @property
    def unconfirmed(self) -> int:
        """Messages sent whose delivery report has not come yet."""
        return self.messages_sent - self.delivered - self.failed

    def _on_delivery(self, error, message) -> None:
        self.unconfirmed_bytes -= len(message)
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
        self._check_deliveries()
        while self.unconfirmed and (self.unconfirmed >= MAX_UNCONFIRMED_MESSAGES
                                    or self.unconfirmed_bytes + len(value) > MAX_UNCONFIRMED_BYTES):
            self.producer.poll(0.05)  # confirmations make room; a failure ends the wait
            self._check_deliveries()
        while True:
            try:
                self.producer.produce(REPORTS, value, partition=partition, on_delivery=self._on_delivery)
                break
            except BufferError:  # librdkafka's own queue is full (a client property bounds it lower)
                self.producer.poll(0.05)
                self._check_deliveries()
        self.messages_sent += 1
        self.unconfirmed_bytes += len(value)
        self.producer.poll(0)

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
        if self.start_offsets is None:  # only a tansu_compat sink checks what the broker holds
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
