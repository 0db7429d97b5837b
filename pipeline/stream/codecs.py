"""Every message format of the system, in one place.

Imported by producers, workers, devices and the CLI alike; it needs only numpy.

* ``reports`` carries raw central-model reports as **batched binary** messages
  (:class:`ReportBatch`: thousands of reports decoded with one ``frombuffer`` each), or one JSON
  object per report, plus JSON **watermarks** from producers (:class:`Watermark`).
* Internal topics (``slots``, ``dissimilarity``) and the local model's ``ldp.requests`` and
  ``ldp.reports`` carry one frozen dataclass per kind of message (:class:`InternalMessage`:
  partial, measured, ready, dissimilarity, support, request, reports, tick), packed with the same
  compact codec as mechanism state (a JSON header plus raw array buffers); :func:`decode_message`
  reads any of them.
* Public topics (``releases``, ``audit``, ``deadletter``) carry JSON, one object per message.

Every message a writer sends carries ``version`` (:data:`FORMAT_VERSION`); a reader takes a
message without one as version 1, refuses a version it does not know (a change of meaning bumps
it), and ignores fields it does not know (adding a field does not). The JSON Schemas of the public
messages ship in :mod:`wevent.stream.schemas`.

Anyone who can write to the broker can write to any topic, so the messages a worker or a device
acts on are sealed (:func:`seal`), one tag per message whatever the number of reports in it,
bound to the message's topic and stream:

* ``slots``, ``dissimilarity`` and ``releases`` carry a MAC (keyed BLAKE2b) under a sub-key of the
  server's secret: only workers write them and only workers act on them. On ``releases`` the MAC
  is one more JSON field, ``mac``, which public readers ignore.
* ``ldp.requests`` carry an Ed25519 signature by the server (:func:`request_seal`), which the
  devices check with the public key alone; Ed25519 signatures are deterministic, so a re-emitted
  request is byte-identical.
* ``ldp.reports`` carry an Ed25519 signature by the devices (:func:`report_seal`), which the
  server checks with the devices' public key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import struct
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar, Self

import numpy as np
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ..core import packing
from ..core.central.dissimilarity import Dissimilarity
from ..core.local.protocol import LocalDissimilarity, Request
from ..core.randomness import SecretKey

__all__ = [
    "DecodeError",
    "FORMAT_VERSION",
    "check_version",
    "ReportBatch",
    "Watermark",
    "json_report",
    "report_partition",
    "decode_report_message",
    "pack_message",
    "InternalMessage",
    "PartialMessage",
    "MeasuredMessage",
    "ReadyMessage",
    "DissimilarityMessage",
    "SupportMessage",
    "RequestMessage",
    "ReportsMessage",
    "TickMessage",
    "decode_message",
    "ReleaseRecord",
    "AuditRecord",
    "DeadLetter",
    "unread_bytes",
    "encode_users",
    "decode_users",
    "AuthenticationError",
    "MacSeal",
    "SignatureSeal",
    "internal_seal",
    "request_seal",
    "report_seal",
    "seal",
    "unseal",
    "check_seal",
    "REQUEST_KEY_ENV",
    "REPORT_KEY_ENV",
]


class DecodeError(ValueError):
    """Bytes that are not a message of the expected kind (counted and dead-lettered)."""


FORMAT_VERSION = 1  # what writers emit in ``version``; a message without one is version 1


def check_version(message: dict) -> None:
    """Refuses a message of a version this reader does not know."""
    version = message.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= FORMAT_VERSION:
        raise DecodeError(f"message version {version!r}; this reader reads versions 1 to {FORMAT_VERSION}")


def _known_fields(cls, message) -> dict:
    """The fields of dataclass ``cls`` in ``message``, whose other fields (a newer writer's) are ignored."""
    if not isinstance(message, dict):
        raise DecodeError(f"a {cls.__name__} must be a JSON object")
    check_version(message)
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in message.items() if k in names}


def _versioned_json(record) -> str:
    return json.dumps({"version": FORMAT_VERSION, **asdict(record)}, separators=(",", ":"), sort_keys=True)


# --- reports topic -----------------------------------------------------------------------------
_BATCH_MAGIC = b"WRB1"
_BATCH_HEAD = struct.Struct("<4sH")  # magic, stream name length
_BATCH_BODY = struct.Struct("<qIB")  # base time (ms since epoch), count, flags
_HAS_OFFSETS = 1


@dataclass(frozen=True, eq=False)
class ReportBatch:
    """Raw reports of one stream: ``users[i]`` reported ``values[i]`` at ``times_ms[i]``.

    Wire format (little endian): ``b"WRB1"``, u16 name length, the stream name, i64 base time in
    ms, u32 count, u8 flags, then ``count`` u32 user indices, ``count`` i32 values and, if flag 1
    is set, ``count`` u32 time offsets in ms from the base time (absent: every report at base).

    >>> b = ReportBatch("taxi", np.array([3, 9]), np.array([1, 0]), np.array([1000, 1500]))
    >>> back = ReportBatch.decode(b.encode())
    >>> back.stream, back.users.tolist(), back.values.tolist(), back.times_ms.tolist()
    ('taxi', [3, 9], [1, 0], [1000, 1500])
    """

    stream: str
    users: np.ndarray
    values: np.ndarray
    times_ms: np.ndarray

    def encode(self) -> bytes:
        name = self.stream.encode()
        times = np.asarray(self.times_ms, dtype=np.int64)
        n = int(times.size)
        base = int(times.min()) if n else 0
        offsets = times - base
        same_time = n == 0 or not offsets.any()
        if not same_time and offsets.max() >= 2**32:
            raise ValueError("a batch may span at most 49 days of event time")
        flags = 0 if same_time else _HAS_OFFSETS
        parts = [
            _BATCH_HEAD.pack(_BATCH_MAGIC, len(name)),
            name,
            _BATCH_BODY.pack(base, n, flags),
            np.asarray(self.users, dtype="<u4").tobytes(),
            np.asarray(self.values, dtype="<i4").tobytes(),
        ]
        if flags:
            parts.append(offsets.astype("<u4").tobytes())
        return b"".join(parts)

    @classmethod
    def decode(cls, data: bytes) -> "ReportBatch":
        try:
            magic, name_len = _BATCH_HEAD.unpack_from(data, 0)
            if magic != _BATCH_MAGIC:
                raise DecodeError("not a report batch")
            offset = _BATCH_HEAD.size
            stream = bytes(data[offset : offset + name_len]).decode()
            offset += name_len
            base, n, flags = _BATCH_BODY.unpack_from(data, offset)
            offset += _BATCH_BODY.size
            expected = offset + n * (12 if flags & _HAS_OFFSETS else 8)
            if len(data) != expected:
                raise DecodeError(f"report batch of {n} reports has {len(data)} bytes, expected {expected}")
            users = np.frombuffer(data, dtype="<u4", count=n, offset=offset).astype(np.int64)
            values = np.frombuffer(data, dtype="<i4", count=n, offset=offset + 4 * n).astype(np.int64)
            if flags & _HAS_OFFSETS:
                times = base + np.frombuffer(data, dtype="<u4", count=n, offset=offset + 8 * n).astype(np.int64)
            else:
                times = np.full(n, base, dtype=np.int64)
        except UnicodeDecodeError:  # its message would quote a byte, maybe of a raw value: say nothing of it
            raise DecodeError("malformed report batch: the stream name is not UTF-8") from None
        except (struct.error, ValueError) as exc:
            raise DecodeError(f"malformed report batch: {exc}") from None
        return cls(stream, users, values, times)


@dataclass(frozen=True)
class Watermark:
    """A producer's promise: no more reports of ``stream`` with event time before ``time`` on this partition."""

    stream: str
    time: float  # epoch seconds

    def encode(self) -> bytes:
        return json.dumps({"type": "watermark", "version": FORMAT_VERSION, "stream": self.stream,
                           "time": self.time}).encode()


def json_report(stream: str, user: int, time: float, value: int) -> bytes:
    """One report in the JSON form of the ``reports`` topic (event ``time`` in epoch seconds).

    >>> decode_report_message(json_report("taxi", 7, 60.5, 3)).values.tolist()
    [3]
    """
    return json.dumps({"version": FORMAT_VERSION, "stream": stream, "user": user, "time": time,
                       "value": value}).encode()


def report_partition(users: np.ndarray, partitions: int) -> np.ndarray:
    """The partition of the ``reports`` topic that owns each user: ``user mod partitions``.

    This is the partitioning contract of ``reports``, for producers in any language. A report of
    user index ``u`` (the unsigned 32-bit index of the :class:`ReportBatch` wire format, or the
    ``user`` of a JSON report) belongs on partition ``u % P``, where ``P`` is the partition count of
    the topic (``report_partitions`` in the config; the same ``P`` for every stream) and ``%`` is
    the remainder of unsigned integers (in Java, ``Integer.remainderUnsigned(u, P)``). Producers
    choose the partition explicitly; message keys play no part. A batch may hold reports of
    several users, all owned by the partition it is sent to.

    The assembler of partition ``p`` counts a report only if ``u % P == p``, and rejects any other
    (reason ``wrong_partition``). It keeps one report per user per slot, so together the
    assemblers count each user at most once per slot, however a producer routes its reports.
    Watermarks carry no user and are valid on any partition. Each partition's assembler closes
    slots on that partition's watermarks alone, so a producer sends every watermark to every
    partition.

    >>> report_partition(np.array([0, 1, 5, 6, 4_294_967_295]), 3).tolist()
    [0, 1, 2, 0, 0]
    """
    return np.asarray(users, dtype=np.int64) % int(partitions)


def decode_report_message(data: bytes) -> ReportBatch | Watermark:
    """A message of the ``reports`` topic: a binary batch, one JSON report, or a watermark."""
    if data[:4] == _BATCH_MAGIC:
        return ReportBatch.decode(data)
    try:
        obj = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise DecodeError("neither a report batch nor JSON") from None
    if not isinstance(obj, dict):
        raise DecodeError("a JSON report must be an object")
    check_version(obj)
    try:
        if obj.get("type") == "watermark":
            return Watermark(str(obj["stream"]), _finite(obj["time"], "time"))
        user, value = obj["user"], obj["value"]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (user, value)):
            raise DecodeError("user and value of a JSON report must be integers")
        if not 0 <= user < 2**32:
            raise DecodeError("user index out of range")
        time_ms = round(_finite(obj["time"], "time") * 1000)
        return ReportBatch(str(obj["stream"]), np.array([user]), np.array([value]), np.array([time_ms]))
    except KeyError as exc:
        raise DecodeError(f"a JSON report needs 'stream', 'user', 'time' and 'value'; missing {exc}") from None
    except (TypeError, OverflowError) as exc:
        raise DecodeError(f"malformed JSON report: {exc}") from None


def _finite(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DecodeError(f"{name} must be a finite number")
    return float(value)


# --- internal and LDP topics -------------------------------------------------------------------
def pack_message(kind: str, fields: dict[str, Any]) -> bytes:
    """The bytes of an internal or LDP message: its ``kind``, :data:`FORMAT_VERSION` and ``fields``
    in their order, packed like mechanism state (a JSON header plus raw array buffers)."""
    return packing.pack({"kind": kind, "version": FORMAT_VERSION, **fields})


class InternalMessage:
    """A message of ``slots``, ``dissimilarity``, ``ldp.requests`` or ``ldp.reports``.

    Each kind is a frozen dataclass below: :meth:`to_fields` gives its fields in their order on the
    wire, :meth:`from_fields` reads them back (ignoring fields a newer writer added), and
    :func:`decode_message` reads any kind. A message is sealed apart (:func:`seal`).

    >>> partial = PartialMessage("taxi", 4, 0, np.array([[1, 2]]), 60.0)
    >>> back = decode_message(partial.encode())
    >>> type(back).__name__, back.slot, back.counts.tolist()
    ('PartialMessage', 4, [[1, 2]])
    """

    kind: ClassVar[str]
    stream: str

    def to_fields(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_fields(cls, values: dict[str, Any]) -> Self:
        raise NotImplementedError

    def encode(self) -> bytes:
        return pack_message(self.kind, self.to_fields())

    @classmethod
    def decode(cls, data: bytes) -> Self:
        """The message in ``data`` (sealed or not: the seal is not checked), which must be of this kind."""
        message = decode_message(data)
        if not isinstance(message, cls):
            raise DecodeError(f"a {message.kind} message, not a {cls.kind} message")
        return message


def _text(values: dict, name: str) -> str:
    if not isinstance(values[name], str):
        raise DecodeError(f"{name} must be text")
    return values[name]


def _integer(values: dict, name: str) -> int:
    value = values[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise DecodeError(f"{name} must be an integer")
    return value


def _real(values: dict, name: str) -> float:
    value = values[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DecodeError(f"{name} must be a number")
    return float(value)


@dataclass(frozen=True, eq=False)
class PartialMessage(InternalMessage):
    """One ``reports`` partition's counts of a closed slot: assembler to M1, on ``slots``."""

    kind: ClassVar[str] = "partial"
    stream: str
    slot: int
    partition: int
    counts: np.ndarray  # (groups, domain)
    closed_at: float  # the assembler's wall time when it closed the slot

    @classmethod
    def from_fields(cls, values):
        return cls(_text(values, "stream"), _integer(values, "slot"), _integer(values, "partition"),
                   np.asarray(values["counts"]), _real(values, "closed_at"))


@dataclass(frozen=True, eq=False)
class MeasuredMessage(InternalMessage):
    """A central or personalized slot's counts and private dissimilarity (None: the mechanism
    has no M1): M1 to M2, on ``dissimilarity``."""

    kind: ClassVar[str] = "measured"
    stream: str
    slot: int
    closed_at: float  # when the slot's last partition closed
    counts: np.ndarray  # (groups, domain)
    dissimilarity: Dissimilarity | None = None

    def to_fields(self):
        dis = self.dissimilarity
        measured = {} if dis is None else {"dis_value": dis.value, "dis_epsilon": dis.epsilon, "dis_scale": dis.scale}
        return {"stream": self.stream, "slot": self.slot, "closed_at": self.closed_at, "counts": self.counts,
                **measured}

    @classmethod
    def from_fields(cls, values):
        slot = _integer(values, "slot")
        dis = None
        if "dis_value" in values:
            dis = Dissimilarity(slot, _real(values, "dis_value"), _real(values, "dis_epsilon"),
                                _real(values, "dis_scale"))
        return cls(_text(values, "stream"), slot, _real(values, "closed_at"), np.asarray(values["counts"]), dis)


@dataclass(frozen=True)
class ReadyMessage(InternalMessage):
    """A local-model slot closed everywhere, release ``slot - 1`` known: M1 to M2, on
    ``dissimilarity``, which then opens the slot's rounds."""

    kind: ClassVar[str] = "ready"
    stream: str
    slot: int
    closed_at: float

    @classmethod
    def from_fields(cls, values):
        return cls(_text(values, "stream"), _integer(values, "slot"), _real(values, "closed_at"))


@dataclass(frozen=True)
class DissimilarityMessage(InternalMessage):
    """A local-model slot's dissimilarity, from its phase-1 support: M1 to M2, on ``dissimilarity``.

    On the wire ``dis`` holds its named fields; a message written before they were named holds
    them as a list in order, and is read alike.
    """

    kind: ClassVar[str] = "dissimilarity"
    stream: str
    slot: int
    dissimilarity: LocalDissimilarity

    def to_fields(self):
        return {"stream": self.stream, "slot": self.slot, "dis": self.dissimilarity.to_dict()}

    @classmethod
    def from_fields(cls, values):
        return cls(_text(values, "stream"), _integer(values, "slot"), LocalDissimilarity.from_dict(values["dis"]))


@dataclass(frozen=True, eq=False)
class SupportMessage(InternalMessage):
    """A closed round's summed support: collector to M1 (phase 1, on ``slots``) or M2 (phase 2, on
    ``dissimilarity``). ``n`` users answered the ``request``; ``missing`` asked users did not."""

    kind: ClassVar[str] = "support"
    stream: str
    slot: int
    phase: int
    support: np.ndarray
    n: int
    missing: int
    request: Request

    def to_fields(self):
        return {**super().to_fields(), "request": self.request.to_dict()}

    @classmethod
    def from_fields(cls, values):
        return cls(_text(values, "stream"), _integer(values, "slot"), _integer(values, "phase"),
                   np.asarray(values["support"]), _integer(values, "n"), _integer(values, "missing"),
                   Request.from_dict(values["request"]))


@dataclass(frozen=True, eq=False)
class RequestMessage(InternalMessage):
    """M2's request to the devices on ``ldp.requests``: the request's fields beside the stream."""

    kind: ClassVar[str] = "request"
    stream: str
    request: Request

    def to_fields(self):
        return {"stream": self.stream, **self.request.to_dict()}

    @classmethod
    def from_fields(cls, values):
        return cls(_text(values, "stream"), Request.from_dict(values))


@dataclass(frozen=True, eq=False)
class ReportsMessage(InternalMessage):
    """Devices' perturbed reports for one round, on ``ldp.reports``: ``users[i]`` sent ``reports[i]``
    (a value for GRR and HM, a row of packed bits for OUE). The collector checks them against the
    round's request."""

    kind: ClassVar[str] = "reports"
    stream: str
    slot: int
    phase: int
    users: np.ndarray
    reports: np.ndarray

    @classmethod
    def from_fields(cls, values):
        return cls(_text(values, "stream"), _integer(values, "slot"), _integer(values, "phase"),
                   np.asarray(values["users"]), np.asarray(values["reports"]))


@dataclass(frozen=True)
class TickMessage(InternalMessage):
    """A worker's unsigned nudge on ``ldp.reports``: the collector looks at its clock for deadlines."""

    kind: ClassVar[str] = "tick"
    stream: str

    @classmethod
    def from_fields(cls, values):
        return cls(_text(values, "stream"))


MESSAGE_KINDS: dict[str, type[InternalMessage]] = {cls.kind: cls for cls in (
    PartialMessage, MeasuredMessage, ReadyMessage, DissimilarityMessage, SupportMessage, RequestMessage,
    ReportsMessage, TickMessage)}


def decode_message(data: bytes) -> InternalMessage:
    """The internal or LDP message in ``data``, sealed or not (:func:`check_seal` checks the seal),
    as the dataclass of its kind.

    Raises :class:`DecodeError` for bytes that are no message of a known kind, a missing field or
    one of the wrong type. A deeper failure (text or an array buffer the codec cannot read) raises
    a ValueError whose text may quote the bytes.
    """
    try:
        values = packing.unpack(unseal(data)[0])
        check_version(values)
        kind = values.pop("kind")
        kind_class = MESSAGE_KINDS[kind]
    except (packing.StateError, KeyError, TypeError, AttributeError) as exc:
        raise DecodeError(f"malformed internal message: {exc}") from None
    try:
        return kind_class.from_fields(values)
    except KeyError as exc:
        raise DecodeError(f"malformed {kind} message: no field {exc}") from None
    except DecodeError as exc:
        raise DecodeError(f"malformed {kind} message: {exc}") from None
    except (TypeError, ValueError) as exc:  # their text may quote a field's value: only their type
        raise DecodeError(f"malformed {kind} message: a field of the wrong type ({type(exc).__name__})") from None


def encode_users(users: np.ndarray | None, population: int) -> np.ndarray | None:
    """A set of user indices as a bitset (``population / 8`` bytes; None stays None = everyone).

    >>> decode_users(encode_users(np.array([0, 5, 9]), 12), 12).tolist()
    [0, 5, 9]
    """
    if users is None:
        return None
    bits = np.zeros(population, dtype=bool)
    bits[np.asarray(users, dtype=np.int64)] = True
    return np.packbits(bits)


def decode_users(bitset: np.ndarray | None, population: int) -> np.ndarray | None:
    if bitset is None:
        return None
    return np.flatnonzero(np.unpackbits(np.asarray(bitset, dtype=np.uint8), count=population))


# --- public topics -----------------------------------------------------------------------------
def _finite_or_none(value):
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class ReleaseRecord:
    """One slot's release on the ``releases`` topic (and one line of a release log).

    ``(stream, slot)`` identifies it: a consumer keeps the first copy of each pair, and any
    re-emission after a crash is byte-for-byte identical.
    """

    stream: str
    slot: int
    release: list[float]
    strategy: str
    mechanism: str
    epsilon: float
    window: int
    eps1: float
    eps2: float
    window_spend: float  # total budget of the window of w slots ending here
    slot_start: float = 0.0  # epoch seconds; 0 when the stream has no clock (simulation)
    slot_end: float = 0.0
    dissimilarity: float | None = None
    threshold: float | None = None
    extras: dict[str, Any] = field(default_factory=dict)  # model-specific (LDP: users, reports, bits)

    @classmethod
    def from_step(cls, stream: str, mechanism, result, window_spend: float, slot_start: float = 0.0,
                  slot_end: float = 0.0, extras: dict | None = None) -> "ReleaseRecord":
        return cls(
            stream=stream,
            slot=int(result.slot),
            release=np.asarray(result.release, dtype=float).tolist(),
            strategy=result.strategy.value,
            mechanism=mechanism.name,
            epsilon=mechanism.epsilon,
            window=mechanism.window,
            eps1=float(result.eps1),
            eps2=float(result.eps2),
            window_spend=float(window_spend),
            slot_start=float(slot_start),
            slot_end=float(slot_end),
            dissimilarity=_finite_or_none(result.dissimilarity),
            threshold=_finite_or_none(result.threshold),
            extras=dict(extras or {}),
        )

    def to_json(self) -> str:
        return _versioned_json(self)

    def to_bytes(self) -> bytes:
        return self.to_json().encode()

    @classmethod
    def from_json(cls, text: str | bytes) -> "ReleaseRecord":
        """A release, ignoring its ``mac`` (the workers' own check, :func:`check_seal`) and unknown fields."""
        data = json.loads(text)
        if isinstance(data, dict) and data.get("record") == "audit":
            raise DecodeError("an audit record, not a release")
        return cls(**_known_fields(cls, data))


@dataclass(frozen=True)
class AuditRecord:
    """The ledger entry of one slot on the ``audit`` topic: enough to re-verify the guarantee.

    Central model: ``eps1``/``eps2`` charged to every user, plus ``reserved`` in every window for a
    query index with its own budget; ``epsilon`` is the stream's total. Personalized: per requirement type,
    ``charges[k]`` charged to every user of type k, with ``types[k] = [w_k, eps_k, users]``.
    Local model: per phase, the per-report budget and which users were asked (None = all).
    """

    stream: str
    slot: int
    mechanism: str
    epsilon: float
    window: int
    eps1: float
    eps2: float
    types: list | None = None
    charges: list | None = None
    phases: list | None = None  # [{"phase": 1|2, "epsilon": e, "users": [...] | None}]
    reserved: float = 0.0  # budget of every window taken by another release (a Mode B query index)
    record: str = "audit"

    def to_json(self) -> str:
        return _versioned_json(self)

    def to_bytes(self) -> bytes:
        return self.to_json().encode()

    @classmethod
    def from_json(cls, text: str | bytes) -> "AuditRecord":
        return cls(**_known_fields(cls, json.loads(text)))


@dataclass(frozen=True)
class DeadLetter:
    """Rejected input with its reason, on the ``deadletter`` topic.

    ``payload`` never copies input bytes. For bytes that decode to no stream (so that nobody can
    tell whether they carry a local-model stream's raw values) it is :func:`unread_bytes`: their
    length and a keyed digest. A dead letter of a local-model stream holds counts and user
    indices at most, never a report's value. Only central and personalized streams, whose server
    is trusted with raw values, keep a sample of the rejected reports (users, values, times).
    """

    reason: str
    topic: str
    detail: str
    stream: str | None = None
    payload: Any = None

    def to_bytes(self) -> bytes:
        return _versioned_json(self).encode()

    @classmethod
    def from_json(cls, text: str | bytes) -> "DeadLetter":
        return cls(**_known_fields(cls, json.loads(text)))


def unread_bytes(data: bytes, key: bytes) -> dict:
    """What a dead letter keeps of bytes it must not copy: their length and a digest.

    The digest is BLAKE2b-128 keyed with ``key`` (the server's secret, personalised apart from the
    noise it derives): it tells two dead letters' inputs apart and matches a suspected input for
    whoever holds the key. An unkeyed digest would not do, because a single report is short and
    guessable: hashing every candidate value would recover it.

    >>> letter = unread_bytes(b"not a report", bytes(32))
    >>> letter["bytes"], len(letter["blake2b_128"])
    (12, 32)
    """
    digest = hashlib.blake2b(bytes(data), key=bytes(key), digest_size=16, person=b"wevent-dlq-v1")
    return {"bytes": len(data), "blake2b_128": digest.hexdigest()}


# --- seals: MACs and signatures of internal and LDP messages ------------------------------------
REQUEST_KEY_ENV = "WEVENT_REQUEST_PUBLIC_KEY"  # hex: the server's public key, which devices check requests with
REPORT_KEY_ENV = "WEVENT_DEVICE_PUBLIC_KEY"  # hex: the devices' public key, which workers check reports with

_TRAILER = struct.Struct("<H4s")  # tag length, magic: after the tag at the end of a binary message
_TRAILER_MAGIC = b"WSL1"
_JSON_MAC = re.compile(rb',"mac":"([0-9a-f]{2,256})"\}$')


class AuthenticationError(DecodeError):
    """A message without a valid MAC or signature of its topic (counted and dead-lettered)."""


def _context(topic: str, stream: str) -> bytes:
    """What binds a tag to its place: a tag made for one (topic, stream) fails on every other."""
    t, s = topic.encode(), str(stream).encode()
    return struct.pack("<H", len(t)) + t + struct.pack("<H", len(s)) + s


class MacSeal:
    """A keyed BLAKE2b-256 MAC of a message's bytes bound to its topic and stream.

    Examples
    --------
    >>> mac = internal_seal(SecretKey.from_seed(1))
    >>> tag = mac.tag("slots", "taxi", b"body")
    >>> mac.valid("slots", "taxi", b"body", tag), mac.valid("dissimilarity", "taxi", b"body", tag)
    (True, False)
    """

    def __init__(self, key: bytes) -> None:
        self._mac = hashlib.blake2b(key=key, digest_size=32, person=b"wevent-mac-v1")

    def tag(self, topic: str, stream: str, body: bytes) -> bytes:
        h = self._mac.copy()
        h.update(_context(topic, stream))
        h.update(body)
        return h.digest()

    def valid(self, topic: str, stream: str, body: bytes, tag: bytes) -> bool:
        return hmac.compare_digest(self.tag(topic, stream, body), tag)


class SignatureSeal:
    """An Ed25519 signature of a message's bytes bound to its topic and stream.

    Built from a secret it signs and checks; built from a public key (:meth:`from_public_hex`) it
    only checks. Ed25519 signatures are deterministic: the same message always gets the same tag.

    Examples
    --------
    >>> signer = request_seal(SecretKey.from_seed(1))
    >>> checker = SignatureSeal.from_public_hex(signer.public_hex)
    >>> tag = signer.tag("ldp.requests", "taxi", b"body")
    >>> tag == signer.tag("ldp.requests", "taxi", b"body"), checker.valid("ldp.requests", "taxi", b"body", tag)
    (True, True)
    >>> checker.valid("ldp.requests", "other", b"body", tag)
    False
    """

    def __init__(self, public: Ed25519PublicKey, private: Ed25519PrivateKey | None = None) -> None:
        self._public, self._private = public, private

    @classmethod
    def from_secret(cls, secret: bytes) -> "SignatureSeal":
        private = Ed25519PrivateKey.from_private_bytes(secret)
        return cls(private.public_key(), private)

    @classmethod
    def from_public_hex(cls, text: str) -> "SignatureSeal":
        """A checking-only seal from a public key of 64 hexadecimal characters (ValueError otherwise)."""
        try:
            raw = bytes.fromhex(text.strip())
        except ValueError:
            raw = b""
        if len(raw) != 32:
            raise ValueError("a public key must be 64 hexadecimal characters")
        return cls(Ed25519PublicKey.from_public_bytes(raw))

    @property
    def public_hex(self) -> str:
        return self._public.public_bytes(Encoding.Raw, PublicFormat.Raw).hex()

    def public(self) -> "SignatureSeal":
        """The same key without its private half: what the other side holds."""
        return type(self)(self._public)

    def tag(self, topic: str, stream: str, body: bytes) -> bytes:
        if self._private is None:
            raise ValueError("a public key checks signatures; it cannot make one")
        return self._private.sign(_context(topic, stream) + body)

    def valid(self, topic: str, stream: str, body: bytes, tag: bytes) -> bool:
        try:
            self._public.verify(tag, _context(topic, stream) + body)
        except InvalidSignature:
            return False
        return True


def internal_seal(server_key: SecretKey) -> MacSeal:
    """The workers' MAC of ``slots``, ``dissimilarity`` and ``releases``."""
    return MacSeal(server_key.derive("internal-mac"))


def request_seal(server_key: SecretKey) -> SignatureSeal:
    """The server's signature of ``ldp.requests`` (every worker derives the same key)."""
    return SignatureSeal.from_secret(server_key.derive("request-signing"))


def report_seal(device_key: SecretKey) -> SignatureSeal:
    """The devices' signature of ``ldp.reports``, from the devices' key (the server never has it)."""
    return SignatureSeal.from_secret(device_key.derive("report-signing"))


def seal(topic: str, stream: str, value: bytes, by: MacSeal | SignatureSeal) -> bytes:
    """``value`` with its tag: a last JSON field ``mac`` for JSON (public readers ignore it),
    else the tag and a 6-byte trailer appended to the binary message.

    >>> mac = internal_seal(SecretKey.from_seed(1))
    >>> sealed = seal("releases", "taxi", b'{"slot":3}', mac)
    >>> sealed[:17], json.loads(sealed)["slot"]
    (b'{"slot":3,"mac":"', 3)
    >>> check_seal(mac, "releases", "taxi", *unseal(sealed))
    >>> check_seal(mac, "releases", "other", *unseal(sealed))
    Traceback (most recent call last):
    ...
    wevent.stream.codecs.AuthenticationError: invalid MAC or signature for releases of stream 'other'
    """
    tag = by.tag(topic, stream, value)
    if value[:1] == b"{":
        return value[:-1] + b',"mac":"' + tag.hex().encode() + b'"}'
    return value + tag + _TRAILER.pack(len(tag), _TRAILER_MAGIC)


def unseal(value: bytes) -> tuple[bytes, bytes | None]:
    """(the message without its tag, the tag or None): see :func:`seal`."""
    if value[:1] == b"{":
        found = _JSON_MAC.search(value)
        if found is None:
            return value, None
        return value[:found.start()] + b"}", bytes.fromhex(found.group(1).decode())
    if len(value) < _TRAILER.size:
        return value, None
    size, magic = _TRAILER.unpack_from(value, len(value) - _TRAILER.size)
    end = len(value) - _TRAILER.size - size
    if magic != _TRAILER_MAGIC or end < 0:
        return value, None
    return value[:end], value[end:len(value) - _TRAILER.size]


def check_seal(by: MacSeal | SignatureSeal, topic: str, stream: str, body: bytes, tag: bytes | None) -> None:
    """Raises :class:`AuthenticationError` unless ``tag`` is ``by``'s tag of ``body`` on (topic, stream)."""
    if tag is None:
        raise AuthenticationError(f"no MAC or signature on a message of {topic} for stream {stream!r}")
    if not by.valid(topic, stream, body, tag):
        raise AuthenticationError(f"invalid MAC or signature for {topic} of stream {stream!r}")
