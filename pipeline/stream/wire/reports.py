"""The ``reports`` topic: raw central-model reports from producers, and their watermarks.

``reports`` carries **batched binary** messages (WRB1: a :class:`ReportBatch` of thousands of
reports decoded with one ``frombuffer`` each, or a :class:`Watermark`) and JSON messages (one
report, or one watermark). ``schemas/WRB1.md`` specifies the binary form byte by byte, with test
vectors; ``schemas/report.schema.json`` the JSON form. Imported by producers, workers and the CLI
alike; it needs only numpy.

Many producers
--------------

A stream may have any number of producers (app servers, regions, gateways, replays), in any
language. Each follows the same protocol, in JSON (`report.schema.json`) or WRB1
(`pipeline/stream/wire/schemas/WRB1.md`, byte by byte, with test vectors):

- **Partitioning.** A report of user u goes to partition u mod P of `reports` (P its partition
  count), chosen by the producer; a producer may own any users.
- **Watermarks to every partition.** Its first message to every partition is a watermark at the
  start of the first slot it sends; then, per slot, its reports and a watermark at the slot's end,
  to every partition. A watermark promises that no report of that producer before its time follows.
- **Producer ids.** Every watermark names its producer (`producer`: 1 to 64 letters, digits, `.`,
  `_`, `-`). A producer that restarts keeps its id and carries on from its last watermark. A
  watermark without an id is from the one anonymous producer: a lone producer need not name
  itself.
- **The clock.** A partition closes a slot when every live producer's watermark has passed the
  slot's end plus the stream's `lateness_seconds`. A producer is live until the partition's most
  advanced producer is more than `idle_producer_seconds` of event time ahead of it (default 10
  slots): a producer that died then stops holding the stream back. Idleness is measured in event
  time, not by a clock, so that a worker re-reading its input closes every slot as it did the
  first time; producers replaying faster than real time start together and keep within it. A
  partition waits only for producers it has heard from: one that starts after the others closed
  a slot (beyond the lateness) loses its reports of that slot, counted and dead-lettered as `late`,
  like any report after its slot closed. A partition keeps at most 100 live producers; a watermark
  of one more is refused (`too_many_producers`).

`wevent replay --producer-id ID` sets a replay's id; by default it is `replay-` and a digest of the
feed's name and user ids, the same for a restarted replay of the same feed.
"""

from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass

import numpy as np

from .format import FORMAT_VERSION, DecodeError, check_version

__all__ = ["ReportBatch", "Watermark", "json_report", "report_partition", "decode_report_message",
           "check_producer_id", "MAX_PRODUCER_ID"]

_BATCH_MAGIC = b"WRB1"
_BATCH_HEAD = struct.Struct("<4sH")  # magic, stream name length
_BATCH_BODY = struct.Struct("<qIB")  # base time (ms since epoch), count, flags
_HAS_OFFSETS = 1
_IS_WATERMARK = 2

MAX_PRODUCER_ID = 64
_PRODUCER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def check_producer_id(value: object) -> str:
    """``value`` if it is a producer id: 1 to :data:`MAX_PRODUCER_ID` ASCII letters, digits, ``.``,
    ``_`` or ``-``, starting with a letter or digit; else :class:`DecodeError`, which quotes nothing
    of it (it may be the bytes of a corrupt message, which dead letters never copy).

    >>> check_producer_id("gateway-eu.3")
    'gateway-eu.3'
    """
    if not isinstance(value, str) or len(value) > MAX_PRODUCER_ID or not _PRODUCER_ID.fullmatch(value):
        raise DecodeError(f"a producer id is 1 to {MAX_PRODUCER_ID} letters, digits, '.', '_' or '-' starting "
                          "with a letter or digit")
    return value


@dataclass(frozen=True, eq=False)
class ReportBatch:
    """Raw reports of one stream: ``users[i]`` reported ``values[i]`` at ``times_ms[i]``.

    Wire format (WRB1, little endian; ``schemas/WRB1.md`` has it byte by byte): ``b"WRB1"``, u16
    name length, the stream name, i64 base time in ms, u32 count, u8 flags, then ``count`` u32 user
    indices, ``count`` i32 values and, if flag 1 is set, ``count`` u32 time offsets in ms from the
    base time (absent: every report at base).

    >>> b = ReportBatch("taxi", np.array([3, 9]), np.array([1, 0]), np.array([1000, 1500]))
    >>> back = decode_report_message(b.encode())
    >>> back.stream, back.users.tolist(), back.values.tolist(), back.times_ms.tolist()
    ('taxi', [3, 9], [1, 0], [1000, 1500])
    """

    stream: str
    users: np.ndarray
    values: np.ndarray
    times_ms: np.ndarray

    def encode(self) -> bytes:
        times = np.asarray(self.times_ms, dtype=np.int64)
        n = int(times.size)
        base = int(times.min()) if n else 0
        offsets = times - base
        same_time = n == 0 or not offsets.any()
        if not same_time and offsets.max() >= 2**32:
            raise ValueError("a batch may span at most 49 days of event time")
        flags = 0 if same_time else _HAS_OFFSETS
        parts = [
            _wrb1_head(self.stream, base, n, flags),
            np.asarray(self.users, dtype="<u4").tobytes(),
            np.asarray(self.values, dtype="<i4").tobytes(),
        ]
        if flags:
            parts.append(offsets.astype("<u4").tobytes())
        return b"".join(parts)


@dataclass(frozen=True)
class Watermark:
    """A producer's promise: no more reports of ``stream`` with event time before ``time`` on this
    partition from it.

    ``producer`` names the producer (:func:`check_producer_id`); None is the anonymous producer, one
    producer like any other. Each partition's assembler keeps the last watermark of every producer
    it hears from, and its clock is the least of those of the live ones
    (:class:`~wevent.stream.agents.assemble.Assembler`). Two forms: JSON (:meth:`encode`) and WRB1
    (:meth:`encode_wrb1`: the time in whole ms).

    >>> mark = Watermark("taxi", 1201968360.0, "gw-1")
    >>> decode_report_message(mark.encode()) == decode_report_message(mark.encode_wrb1()) == mark
    True
    """

    stream: str
    time: float  # epoch seconds
    producer: str | None = None

    def __post_init__(self) -> None:
        if self.producer is not None:
            check_producer_id(self.producer)

    def encode(self) -> bytes:
        """The JSON form."""
        named = {"producer": self.producer} if self.producer is not None else {}
        return json.dumps({"type": "watermark", "version": FORMAT_VERSION, "stream": self.stream,
                           "time": self.time, **named}).encode()

    def encode_wrb1(self) -> bytes:
        """The WRB1 form: a header of no reports with flag 2, then the producer id (u8 length, 0
        for the anonymous producer, and its ASCII bytes)."""
        producer = self.producer.encode() if self.producer is not None else b""
        return _wrb1_head(self.stream, round(self.time * 1000), 0, _IS_WATERMARK) + bytes([len(producer)]) + producer


def _wrb1_head(stream: str, base_ms: int, count: int, flags: int) -> bytes:
    name = stream.encode()
    return _BATCH_HEAD.pack(_BATCH_MAGIC, len(name)) + name + _BATCH_BODY.pack(base_ms, count, flags)


def _decode_wrb1(data: bytes) -> ReportBatch | Watermark:
    try:
        magic, name_len = _BATCH_HEAD.unpack_from(data, 0)
        if magic != _BATCH_MAGIC:
            raise DecodeError("not a report batch")
        offset = _BATCH_HEAD.size
        stream = bytes(data[offset : offset + name_len]).decode()
        offset += name_len
        base, n, flags = _BATCH_BODY.unpack_from(data, offset)
        offset += _BATCH_BODY.size
        if flags & ~(_HAS_OFFSETS | _IS_WATERMARK):
            raise DecodeError(f"a WRB1 message with unknown flags {flags:#04x}")
        if flags & _IS_WATERMARK:
            return _wrb1_watermark(data, stream, base, n, flags, offset)
        expected = offset + n * (12 if flags & _HAS_OFFSETS else 8)
        if len(data) != expected:
            raise DecodeError(f"report batch of {n} reports has {len(data)} bytes, expected {expected}")
        users = np.frombuffer(data, dtype="<u4", count=n, offset=offset).astype(np.int64)
        values = np.frombuffer(data, dtype="<i4", count=n, offset=offset + 4 * n).astype(np.int64)
        if flags & _HAS_OFFSETS:
            times = base + np.frombuffer(data, dtype="<u4", count=n, offset=offset + 8 * n).astype(np.int64)
        else:
            times = np.full(n, base, dtype=np.int64)
    except DecodeError:
        raise
    except UnicodeDecodeError:  # its message would quote a byte, maybe of a raw value: say nothing of it
        raise DecodeError("malformed report batch: the stream name is not UTF-8") from None
    except (struct.error, ValueError) as exc:
        raise DecodeError(f"malformed report batch: {exc}") from None
    return ReportBatch(stream, users, values, times)


def _wrb1_watermark(data: bytes, stream: str, base: int, count: int, flags: int, offset: int) -> Watermark:
    if count or flags != _IS_WATERMARK:
        raise DecodeError("a WRB1 watermark carries no reports")
    length = data[offset] if offset < len(data) else -1
    if length < 0 or len(data) != offset + 1 + length:
        raise DecodeError(f"a WRB1 watermark of {len(data)} bytes: its producer id is cut short or followed by "
                          "more bytes")
    return Watermark(stream, base / 1000, bytes(data[offset + 1 :]).decode("ascii", "replace") if length else None)


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
    partition, the first before its first report (:class:`Watermark` says how the watermarks of
    several producers make one clock).

    >>> report_partition(np.array([0, 1, 5, 6, 4_294_967_295]), 3).tolist()
    [0, 1, 2, 0, 0]
    """
    return np.asarray(users, dtype=np.int64) % int(partitions)


def decode_report_message(data: bytes) -> ReportBatch | Watermark:
    """A message of the ``reports`` topic: a WRB1 batch or watermark, one JSON report, or a JSON watermark."""
    if data[:4] == _BATCH_MAGIC:
        return _decode_wrb1(data)
    try:
        obj = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise DecodeError("neither a report batch nor JSON") from None
    if not isinstance(obj, dict):
        raise DecodeError("a JSON report must be an object")
    check_version(obj)
    try:
        if obj.get("type") == "watermark":
            producer = check_producer_id(obj["producer"]) if "producer" in obj else None  # null is refused
            return Watermark(str(obj["stream"]), _finite(obj["time"], "time"), producer)
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
