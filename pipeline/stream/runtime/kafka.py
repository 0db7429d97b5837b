"""confluent-kafka producers and consumers configured for tansu or a real Kafka."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from ..wire.reports import ReportBatch, Watermark, report_partition
from ..wire.topics import REPORTS

kafka_log = logging.getLogger("wevent.kafka")
kafka_log.addHandler(logging.NullHandler())  # no handler configured (a CLI): silent, not Python's last resort

MAX_REPORTS_PER_MESSAGE = 65_536  # 512 KiB of report payload: under Kafka's default 1 MiB message limit

# How to reach Kafka securely comes from the environment (the Helm chart fills it from its Secret).
SECURITY_ENV = {"protocol": "WEVENT_KAFKA_SECURITY_PROTOCOL", "mechanism": "WEVENT_KAFKA_SASL_MECHANISM",
                "username": "WEVENT_KAFKA_USERNAME", "password": "WEVENT_KAFKA_PASSWORD",
                "cafile": "WEVENT_KAFKA_SSL_CAFILE", "certfile": "WEVENT_KAFKA_SSL_CERTFILE",
                "keyfile": "WEVENT_KAFKA_SSL_KEYFILE", "key_password": "WEVENT_KAFKA_SSL_KEY_PASSWORD"}
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class KafkaCredentials:
    """How the clients reach Kafka: TLS, SASL, both, or neither.

    Read from the environment by :meth:`from_env`, which refuses an incoherent combination with
    one line (a password without SASL, a certificate without TLS, a file that cannot be read).

    Parameters
    ----------
    protocol : str
        ``PLAINTEXT``, ``SSL`` (TLS, and mutual TLS with a client certificate), ``SASL_PLAINTEXT``
        or ``SASL_SSL``.
    mechanism, username, password : str or None
        SASL (``PLAIN``, ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``); only with a ``SASL_`` protocol.
    cafile : str or None
        PEM file of the certificate authorities to trust instead of the system's.
    certfile, keyfile, key_password : str or None
        The client's PEM certificate and private key (mutual TLS), and the key's password.
    """

    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    key_password: str | None = None

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @classmethod
    def from_env(cls) -> "KafkaCredentials | None":
        """The settings in WEVENT_KAFKA_*, or None when none is set (plain TCP, no authentication).

        The protocol defaults to ``SASL_SSL`` when a username is set, else to ``PLAINTEXT``.
        """
        from ...errors import UsageError

        env = {name: os.environ.get(variable) or None for name, variable in SECURITY_ENV.items()}
        if not any(env.values()):
            return None
        protocol = (env["protocol"] or ("SASL_SSL" if env["username"] else "PLAINTEXT")).upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise UsageError(f"{SECURITY_ENV['protocol']} must be one of {', '.join(SECURITY_PROTOCOLS)}, got {protocol!r}")
        sasl = protocol.startswith("SASL_")
        mechanism = (env["mechanism"] or "SCRAM-SHA-512").upper() if sasl else env["mechanism"]
        if sasl and mechanism not in SASL_MECHANISMS:
            raise UsageError(f"{SECURITY_ENV['mechanism']} must be one of {', '.join(SASL_MECHANISMS)}, got {mechanism!r}")
        if sasl and not (env["username"] and env["password"]):
            raise UsageError(f"{SECURITY_ENV['protocol']}={protocol} needs {SECURITY_ENV['username']} and "
                             f"{SECURITY_ENV['password']}")
        for name in ("mechanism", "username", "password") if not sasl else ():
            if env[name]:
                raise UsageError(f"{SECURITY_ENV[name]} is set but {SECURITY_ENV['protocol']}={protocol} has no SASL "
                                 "(use SASL_SSL or SASL_PLAINTEXT)")
        tls = protocol in ("SSL", "SASL_SSL")
        for name in ("cafile", "certfile", "keyfile", "key_password") if not tls else ():
            if env[name]:
                raise UsageError(f"{SECURITY_ENV[name]} is set but {SECURITY_ENV['protocol']}={protocol} has no TLS "
                                 "(use SSL or SASL_SSL)")
        if bool(env["certfile"]) != bool(env["keyfile"]):
            raise UsageError(f"{SECURITY_ENV['certfile']} and {SECURITY_ENV['keyfile']} go together (mutual TLS)")
        if env["key_password"] and not env["keyfile"]:
            raise UsageError(f"{SECURITY_ENV['key_password']} is set without {SECURITY_ENV['keyfile']}")
        credentials = cls(protocol, mechanism, env["username"], env["password"], env["cafile"], env["certfile"],
                          env["keyfile"], env["key_password"])
        credentials.ssl_context()  # unreadable or mismatched files: one line now, not a failure in every client
        return credentials

    def ssl_context(self):
        """The TLS context of Python clients (Faust's), or None without TLS; UsageError for bad files."""
        import ssl

        from ...errors import UsageError

        if not self.tls:
            return None
        try:
            context = ssl.create_default_context(cafile=self.cafile)
        except OSError as exc:  # ssl.SSLError included
            raise UsageError(f"{SECURITY_ENV['cafile']}={self.cafile}: not a readable PEM file of CA certificates "
                             f"({_reason(exc)})") from None
        if self.certfile:
            try:
                # never None: OpenSSL would prompt on the terminal for the password of an encrypted key
                context.load_cert_chain(self.certfile, self.keyfile, self.key_password or "")
            except OSError as exc:
                raise UsageError(f"{SECURITY_ENV['certfile']}={self.certfile} with {SECURITY_ENV['keyfile']}="
                                 f"{self.keyfile}: not a client certificate and its key ({_reason(exc)})") from None
        return context

    def librdkafka(self) -> dict:
        config = {"security.protocol": self.protocol}
        if self.sasl:
            config.update({"sasl.mechanism": self.mechanism, "sasl.username": self.username,
                           "sasl.password": self.password})
        optional = {"ssl.ca.location": self.cafile, "ssl.certificate.location": self.certfile,
                    "ssl.key.location": self.keyfile, "ssl.key.password": self.key_password}
        return config | {key: value for key, value in optional.items() if value}

    def faust(self):
        """Faust's credentials (for its aiokafka clients), or None for plain TCP."""
        import faust

        context = self.ssl_context()
        if self.sasl:
            return faust.SASLCredentials(username=self.username, password=self.password, mechanism=self.mechanism,
                                         ssl_context=context)
        return faust.SSLCredentials(context) if context is not None else None


def _reason(exc: OSError) -> str:
    """A TLS or file error in a few words: OpenSSL's reason (``KEY_VALUES_MISMATCH``) or the system's."""
    import ssl

    if isinstance(exc, ssl.SSLError):
        return exc.reason or "not PEM, or an encrypted key without its password"
    return exc.strerror or str(exc)


def client_config(bootstrap: str) -> dict:
    """What every confluent client needs: the servers, and the credentials if any."""
    credentials = KafkaCredentials.from_env()
    # Warnings and errors only, through Python logging (rate-limited in a worker, silent in a
    # command): librdkafka itself prints every failed reconnection to stderr, thousands of lines
    # when a broker dies. Callers learn of failures from their calls and delivery reports.
    return {"bootstrap.servers": bootstrap, "log_level": 4, "logger": kafka_log,
            **(credentials.librdkafka() if credentials else {})}


def producer_config(bootstrap: str, tansu_compat: bool) -> dict:
    config = {
        **client_config(bootstrap),
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


def consumer_config(bootstrap: str, group: str | None = None, tansu_compat: bool = False) -> dict:
    config = {
        **client_config(bootstrap),
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


class DeliveryError(Exception):
    """Messages a producer was given did not reach the broker."""


class KafkaReportSink:
    """Sends a stream's per-slot user values to ``reports``: batched binary, then watermarks.

    Each user's reports go to the partition that owns the user (:func:`report_partition`). After a
    slot's reports, every partition gets a watermark at the slot's end, so every assembler can
    close the slot. For a
    local-model stream (``clock_only``) only the watermarks are sent: the values stay with the
    devices, which answer the server's requests with perturbed reports.

    Every message's delivery is confirmed by the broker or fails after ``delivery_timeout``
    seconds; once one has failed, sending and :meth:`close` raise :class:`DeliveryError` (a slot
    with a hole must not look sent). On the embedded broker (``tansu_compat``), :meth:`close` also
    checks that it still holds what it confirmed: each partition's end offset must have moved by at
    least the messages delivered there (an in-memory broker restarted during the replay confirms
    the later messages but has lost the earlier ones). Only there: a durable Kafka does not lose
    what it acknowledged, and tansu's end offsets are right only when every record is its own batch.
    """

    def __init__(self, bootstrap: str, stream: str, partitions: int, tansu_compat: bool = False,
                 clock_only: bool = False, delivery_timeout: float = 60.0) -> None:
        from confluent_kafka import Producer

        self.bootstrap = bootstrap
        self.stream = stream
        self.clock_only = clock_only  # a local-model stream: values stay with the devices
        self.partitions = partitions
        self.delivery_timeout = delivery_timeout
        self.check_held = tansu_compat
        self.producer = Producer(producer_config(bootstrap, tansu_compat)
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

        consumer = Consumer(consumer_config(self.bootstrap))
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
            for chunk in _chunks(chosen, MAX_REPORTS_PER_MESSAGE):
                batch = ReportBatch(self.stream, users[chunk], values[chunk], np.full(chunk.size, time_ms))
                self._produce(batch.encode(), p)
        self.reports_sent += int(users.size)

    def watermark(self, time: float) -> None:
        mark = Watermark(self.stream, time).encode()
        for p in range(self.partitions):
            self._produce(mark, p)

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
            raise DeliveryError(f"Kafka at {self.bootstrap} confirmed {self.delivered_to[p]:,} messages to reports[{p}] "
                                f"but holds {max(int(held[p]), 0):,} more than before the replay: it lost messages "
                                "(an in-memory broker restarted?)")


def sink_for(bootstrap: str, stream, partitions: int, tansu_compat: bool,
             delivery_timeout: float = 60.0) -> "KafkaReportSink":
    """The sink a replay into ``stream`` uses: reports and clock, or the clock alone (local model)."""
    return KafkaReportSink(bootstrap, stream.name, partitions, tansu_compat, clock_only=stream.model == "local",
                           delivery_timeout=delivery_timeout)


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
