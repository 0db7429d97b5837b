"""The ``reports`` topic: raw central-model reports from producers, and their watermarks.

``reports`` carries **batched binary** messages (:class:`ReportBatch`: thousands of reports
decoded with one ``frombuffer`` each), or one JSON object per report, plus JSON **watermarks**
from producers (:class:`Watermark`). Imported by producers, workers and the CLI alike; it needs
only numpy.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass

import numpy as np

from .format import FORMAT_VERSION, DecodeError, check_version

__all__ = ["ReportBatch", "Watermark", "json_report", "report_partition", "decode_report_message"]

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
