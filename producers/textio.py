"""Vectorised reading of delimited text files: blocks of whole lines parsed with numpy.

The datasets are large (T-Drive ~15M lines, TIST2015 ~33M), so nothing here loops over lines in
Python. Files are read in blocks of a few MB cut at line ends; a block is one ``uint8`` array, and
lines, fields and values are found with whole-array operations (``flatnonzero`` on the delimiter,
fixed-width byte matrices for numbers and times). Only the rare field that the fast path does not
recognise is handed to the standard-library parser (``float``, ``int``, ``datetime.strptime``), so
the accepted grammar is exactly the standard library's while clean data never leaves numpy.

Every line keeps its file and 1-based line number; malformed lines are counted per reason in a
:class:`SkippedLines`, with the first few locations kept for the summary. Blank lines are ignored.

>>> block = block_of_bytes(b"a,1.5\\nb,x\\n\\nc,2,3\\n")
>>> fields = split_fields(block, ",", 2, skipped := SkippedLines())
>>> values, ok = parse_decimals(block.buffer, *fields.column(1))
>>> fields.reject(BAD_NUMBER, ~ok)
>>> values[fields.alive].tolist(), skipped.counts
([1.5], {'wrong column count': 1, 'bad number': 1})
>>> [line for _, line in skipped.first[BAD_NUMBER]]
[2]
"""

from __future__ import annotations

import calendar
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from wevent.core.validation import ParameterError

__all__ = [
    "BLOCK_BYTES", "MAX_FIELD_BYTES", "BAD_COLUMNS", "BAD_FIELD", "BAD_TIME", "BAD_NUMBER",
    "LineBlock", "Fields", "SkippedLines", "TimeLayout", "ISO_SECONDS", "TWITTER_UTC",
    "read_blocks", "block_of_bytes", "split_fields", "parse_decimals", "parse_integers", "parse_times",
    "gather_strings",
    "decode_label",
]

BLOCK_BYTES = 1 << 23  # 8 MB: large enough to amortise numpy call overhead, small enough for the cache
MAX_FIELD_BYTES = 256  # longer identifiers are rejected; the block buffer is padded by this much

# Skip reasons shared by every reader (readers add their own, e.g. "outside box").
BAD_COLUMNS = "wrong column count"
BAD_FIELD = "bad field"  # an empty or over-long identifier
BAD_TIME = "bad time"
BAD_NUMBER = "bad number"


@dataclass
class LineBlock:
    """Whole lines of one or more files as one byte array.

    ``buffer[starts[i]:ends[i]]`` is line i without its line ending (``\\n`` or ``\\r\\n``); it is
    line ``numbers[i]`` of ``paths[files[i]]``. The buffer is followed by ``MAX_FIELD_BYTES``
    zero bytes so fixed-width windows never run past its end.
    """

    buffer: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    files: np.ndarray
    numbers: np.ndarray
    paths: Sequence[str]

    @property
    def lines(self) -> int:
        return int(self.starts.size)


def read_blocks(paths: Sequence[str | Path], block_bytes: int = BLOCK_BYTES) -> Iterator[LineBlock]:
    """Blocks of whole lines from ``paths`` in order; small files share a block, large ones span several.

    A last line without a newline still counts. Unreadable files raise :class:`ParameterError`.
    """
    names = [str(p) for p in paths]
    pieces: list[tuple[bytes, int, int, int]] = []  # (whole lines, file index, first line's number, lines)
    pending = 0
    for file_index, name in enumerate(names):
        try:
            handle = open(name, "rb")
        except OSError as exc:
            raise ParameterError(f"cannot read {name}: {exc.strerror}") from None
        with handle:
            next_line, carry = 1, b""
            while True:
                chunk = handle.read(block_bytes)
                data = carry + chunk if chunk else (carry + b"\n" if carry else b"")
                if not data:
                    break
                cut = data.rfind(b"\n") + 1
                carry, data = data[cut:], data[:cut]
                if data:
                    count = data.count(b"\n")
                    pieces.append((data, file_index, next_line, count))
                    next_line += count
                    pending += len(data)
                if pending >= block_bytes:
                    yield _assemble(pieces, names)
                    pieces, pending = [], 0
                if not chunk:
                    break
    if pieces:
        yield _assemble(pieces, names)


def block_of_bytes(data: bytes, name: str = "<bytes>") -> LineBlock:
    """One block holding ``data`` (whole lines) as if read from a file called ``name``."""
    data = data if data.endswith(b"\n") else data + b"\n"
    return _assemble([(data, 0, 1, data.count(b"\n"))], [name])


def _assemble(pieces: list[tuple[bytes, int, int, int]], names: Sequence[str]) -> LineBlock:
    body = b"".join(p[0] for p in pieces)
    buffer = np.frombuffer(body + bytes(MAX_FIELD_BYTES), dtype=np.uint8)
    newlines = np.flatnonzero(buffer[: len(body)] == ord("\n"))
    starts = np.concatenate(([0], newlines[:-1] + 1))
    ends = newlines.copy()
    ends -= (buffer[np.maximum(ends - 1, 0)] == ord("\r")) & (ends > starts)  # CRLF files
    per_piece = np.array([p[3] for p in pieces])
    first_index = np.cumsum(per_piece) - per_piece
    numbers = np.arange(newlines.size) + np.repeat(np.array([p[2] for p in pieces]) - first_index, per_piece)
    files = np.repeat(np.array([p[1] for p in pieces], dtype=np.int32), per_piece)
    return LineBlock(buffer, starts, ends, files, numbers, names)


@dataclass
class SkippedLines:
    """Malformed lines per reason: how many, and where the first ``keep`` of them are."""

    keep: int = 5
    counts: dict[str, int] = field(default_factory=dict)
    first: dict[str, list[tuple[str, int]]] = field(default_factory=dict)

    def add(self, reason: str, block: LineBlock, lines: np.ndarray) -> None:
        """Record ``block``'s lines at indices ``lines`` (ascending) as skipped for ``reason``."""
        if lines.size == 0:
            return
        self.counts[reason] = self.counts.get(reason, 0) + int(lines.size)
        kept = self.first.setdefault(reason, [])
        for i in lines[: max(0, self.keep - len(kept))]:
            kept.append((block.paths[block.files[i]], int(block.numbers[i])))

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def describe(self) -> str:
        """One line: ``reason count (file:line, ...)`` per reason."""
        if not self.counts:
            return "no malformed lines"
        parts = []
        for reason, count in self.counts.items():
            where = ", ".join(f"{Path(p).name}:{n}" for p, n in self.first[reason])
            more = ", ..." if count > len(self.first[reason]) else ""
            parts.append(f"{reason} {count:,} ({where}{more})")
        return f"skipped {self.total:,} malformed lines: " + "; ".join(parts)

    def as_dict(self) -> dict:
        return {reason: {"count": count, "first": [f"{p}:{n}" for p, n in self.first[reason]]}
                for reason, count in self.counts.items()}


@dataclass
class Fields:
    """The lines of a block that have the expected column count, split into fields.

    ``start[:, k]``/``end[:, k]`` bound field k of each row in ``block.buffer``; ``lines`` are the
    rows' line indices in the block. ``alive`` marks rows not rejected yet: a reader rejects rows
    reason by reason (:meth:`reject`), so each malformed line is counted once, for its first problem.
    """

    block: LineBlock
    lines: np.ndarray
    start: np.ndarray
    end: np.ndarray
    skipped: SkippedLines
    alive: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.alive = np.ones(self.lines.size, dtype=bool)

    def column(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        return self.start[:, k], self.end[:, k]

    def reject(self, reason: str, bad: np.ndarray) -> None:
        """Skip the rows where ``bad`` holds (among those still alive), counting them under ``reason``."""
        newly = bad & self.alive
        self.skipped.add(reason, self.block, self.lines[newly])
        self.alive &= ~newly

    def strings(self, k: int) -> np.ndarray:
        """Field k as a bytes array (``S`` dtype); empty or over-long fields are rejected as bad fields."""
        start, end = self.column(k)
        length = end - start
        self.reject(BAD_FIELD, (length == 0) | (length > MAX_FIELD_BYTES))
        return gather_strings(self.block.buffer, start, np.where(self.alive, end, start))


def split_fields(block: LineBlock, delimiter: str, columns: int, skipped: SkippedLines) -> Fields:
    """Split every non-blank line at ``delimiter``; lines without exactly ``columns`` fields are skipped."""
    positions = np.flatnonzero(block.buffer == ord(delimiter))  # never a newline nor in the zero padding
    line_of = np.searchsorted(block.ends, positions, side="right")
    per_line = np.bincount(line_of, minlength=block.lines)
    nonblank = block.ends > block.starts
    good = nonblank & (per_line == columns - 1)
    skipped.add(BAD_COLUMNS, block, np.flatnonzero(nonblank & ~good))
    lines = np.flatnonzero(good)
    cuts = positions[good[line_of]].reshape(lines.size, columns - 1)
    start = np.column_stack([block.starts[lines], cuts + 1])
    end = np.column_stack([cuts, block.ends[lines]])
    return Fields(block, lines, start, end, skipped)


def _byte_matrix(buffer: np.ndarray, start: np.ndarray, width: int) -> np.ndarray:
    """``(n, width)`` bytes from each start (no index array: rows of a sliding-window view)."""
    if start.size == 0 or width == 0:
        return np.zeros((start.size, width), dtype=np.uint8)
    return sliding_window_view(buffer, width)[start]


def _byte_columns(buffer: np.ndarray, start: np.ndarray, width: int) -> np.ndarray:
    """The same bytes column-major, ``(width, n)``: a test or sum over a field's bytes is then a few
    whole-array operations on contiguous rows, not a reduction along a short axis per line."""
    return np.ascontiguousarray(_byte_matrix(buffer, start, width).T)


def gather_strings(buffer: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The fields as a fixed-width bytes array, e.g. for ``np.unique`` (fields must be <= MAX_FIELD_BYTES).

    >>> buf = np.frombuffer(b"ab,c" + bytes(MAX_FIELD_BYTES), np.uint8)
    >>> gather_strings(buf, np.array([0, 3]), np.array([2, 4])).tolist()
    [b'ab', b'c']
    """
    length = end - start
    width = int(length.max()) if length.size else 0
    matrix = _byte_matrix(buffer, start, width).copy()
    matrix[np.arange(width) >= length[:, None]] = 0  # trailing NULs are dropped by the S dtype
    return matrix.view(f"S{max(width, 1)}").ravel() if width else np.zeros(length.size, dtype="S1")


def _fallback(buffer: np.ndarray, start: np.ndarray, end: np.ndarray, rows: np.ndarray, parse) -> tuple[list, list]:
    """Parse the given rows one by one with a standard-library function; returns (rows parsed, values)."""
    parsed_rows, values = [], []
    for i in rows:
        text = buffer[start[i]:end[i]].tobytes().decode("ascii", "replace")
        try:
            value = parse(text)
        except (ValueError, OverflowError):
            continue
        parsed_rows.append(i)
        values.append(value)
    return parsed_rows, values


def _digit_values(columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(byte - '0', is a digit) per byte; the subtraction wraps in uint8, so one test covers both ends."""
    digits = columns - np.uint8(ord("0"))
    return digits, digits <= 9


def _horner(digits: np.ndarray, use: np.ndarray | None = None) -> np.ndarray:
    """The number each column of digit rows spells (rows where ``use`` is False are passed over)."""
    value = np.zeros(digits.shape[1], dtype=np.int64)
    for j in range(digits.shape[0]):
        step = value * 10 + digits[j]
        value = step if use is None else np.where(use[j], step, value)
    return value


def parse_decimals(buffer: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Finite floats as ``float()`` reads them; returns ``(values, ok)``.

    The fast path takes ``[+-]digits[.digits]`` with at most 15 significant digits: the mantissa is
    then exact in float64 and one division by an exact power of ten rounds correctly, so the result
    is bit-identical to ``float()``. Anything else goes through ``float()`` itself.

    >>> buf = np.frombuffer(b"116.51172 -0.5 7 1e3 x 40.71981037548853" + bytes(MAX_FIELD_BYTES), np.uint8)
    >>> v, ok = parse_decimals(buf, np.array([0, 10, 15, 17, 21, 23]), np.array([9, 14, 16, 20, 22, 40]))
    >>> v[ok].tolist(), ok.tolist()
    ([116.51172, -0.5, 7.0, 1000.0, 40.71981037548853], [True, True, True, True, False, True])
    """
    return _parse_numbers(buffer, start, end, allow_dot=True)


def parse_integers(buffer: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integers as ``int()`` reads them (fast path ``[+-]digits``, up to 18 digits); ``(int64 values, ok)``."""
    return _parse_numbers(buffer, start, end, allow_dot=False)


def _parse_numbers(buffer, start, end, allow_dot: bool):
    length = end - start
    n = length.size
    width = int(min(length.max(), 32)) if n else 0
    if width == 0:
        return np.zeros(n, dtype=float if allow_dot else np.int64), np.zeros(n, dtype=bool)
    columns = _byte_columns(buffer, start, width)
    body = np.arange(width)[:, None] < length
    negative = columns[0] == ord("-")
    body[0] &= ~(negative | (columns[0] == ord("+")))
    digits, is_digit = _digit_values(columns)
    is_digit &= body
    is_dot = body & (columns == ord("."))
    digit_count = is_digit.sum(axis=0)
    fast = ~(body & ~is_digit & ~is_dot).any(axis=0) & (digit_count >= 1) & (length <= width)
    fast &= (is_dot.sum(axis=0) <= 1) & (digit_count <= 15) if allow_dot else ~is_dot.any(axis=0) & (digit_count <= 18)
    mantissa = _horner(digits, is_digit)
    if allow_dot:
        fraction_digits = (is_digit & np.logical_or.accumulate(is_dot, axis=0)).sum(axis=0)
        values = np.where(negative, -1.0, 1.0) * (mantissa / 10.0**fraction_digits)
        parse: type[float] | type[int] = float
    else:
        values = np.where(negative, -mantissa, mantissa)
        parse = int
    ok = fast.copy()
    rows, parsed = _fallback(buffer, start, end, np.flatnonzero(~fast & (length > 0)), parse)
    for i, value in zip(rows, parsed):  # only the rare rows the fast path declined
        if math.isfinite(value) if allow_dot else -(2**63) <= value < 2**63:
            values[i] = value
            ok[i] = True
    return values, ok


@dataclass(frozen=True)
class TimeLayout:
    """A fixed-width timestamp layout: where each number sits, which bytes are literal.

    ``parts`` maps year, month, day, hour, minute, second (and optionally ``zone`` for ``+HHMM``)
    to their byte ranges; ``month_names`` when the month is ``Jan``..``Dec``; ``weekday`` the
    range of an ``Mon``..``Sun`` name. ``strptime`` is the equivalent standard-library format,
    used for anything the fast path rejects.
    """

    width: int
    parts: dict
    literals: dict
    strptime: str
    month_names: bool = False
    weekday: tuple[int, int] | None = None


ISO_SECONDS = TimeLayout(  # 2008-02-02 15:36:08 (T-Drive, local time)
    width=19,
    parts={"year": (0, 4), "month": (5, 7), "day": (8, 10), "hour": (11, 13), "minute": (14, 16), "second": (17, 19)},
    literals={4: "-", 7: "-", 10: " ", 13: ":", 16: ":"},
    strptime="%Y-%m-%d %H:%M:%S",
)
TWITTER_UTC = TimeLayout(  # Tue Apr 03 18:00:09 +0000 2012 (Foursquare)
    width=30,
    parts={"month": (4, 7), "day": (8, 10), "hour": (11, 13), "minute": (14, 16), "second": (17, 19),
           "zone": (20, 25), "year": (26, 30)},
    literals={3: " ", 7: " ", 10: " ", 13: ":", 16: ":", 19: " ", 25: " "},
    strptime="%a %b %d %H:%M:%S %z %Y",
    month_names=True,
    weekday=(0, 3),
)
_MONTHS = np.array([b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec"])
_WEEKDAYS = np.array([b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat", b"Sun"])


def parse_times(buffer: np.ndarray, start: np.ndarray, end: np.ndarray, layout: TimeLayout,
                utc_offset_minutes: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Epoch seconds of timestamps in ``layout``; ``(int64 values, ok)``.

    A timestamp without a zone is local time ``utc_offset_minutes`` ahead of UTC (T-Drive is Beijing
    time, +480). Validation is the calendar's (no 30 February, no hour 24), as in ``strptime``.

    >>> buf = np.frombuffer(b"2008-02-02 13:30:44|2008-02-30 00:00:00|Tue Apr 03 18:00:09 +0000 2012"
    ...                     + bytes(MAX_FIELD_BYTES), np.uint8)
    >>> parse_times(buf, np.array([0, 20]), np.array([19, 39]), ISO_SECONDS, 480)
    (array([1201930244,          0]), array([ True, False]))
    >>> parse_times(buf, np.array([40]), np.array([70]), TWITTER_UTC)[0].tolist()
    [1333476009]
    """
    n = start.size
    columns = _byte_columns(buffer, start, layout.width)
    ok = (end - start) == layout.width
    for position, char in layout.literals.items():
        ok &= columns[position] == ord(char)
    numbers = {}
    for name, (a, b) in layout.parts.items():
        if name == "month" and layout.month_names:
            matches = _names(columns, a, b)[:, None] == _MONTHS[None, :]
            ok &= matches.any(axis=1)
            numbers[name] = matches.argmax(axis=1) + 1
            continue
        digits_from = a + 1 if name == "zone" else a  # the zone's sign is checked below
        digits, is_digit = _digit_values(columns[digits_from:b])
        ok &= is_digit.all(axis=0)
        numbers[name] = _horner(digits)
    if layout.weekday is not None:
        ok &= np.isin(_names(columns, *layout.weekday), _WEEKDAYS)
    year, month, day = numbers["year"], numbers["month"], numbers["day"]
    ok &= (year >= 1) & (month >= 1) & (month <= 12) & (day >= 1) & (day <= _days_in_month(year, np.clip(month, 1, 12)))
    ok &= (numbers["hour"] <= 23) & (numbers["minute"] <= 59) & (numbers["second"] <= 59)
    offset = np.full(n, utc_offset_minutes, dtype=np.int64)
    if "zone" in numbers:
        zone_start = layout.parts["zone"][0]
        sign = np.where(columns[zone_start] == ord("-"), -1, 1)
        ok &= (columns[zone_start] == ord("+")) | (columns[zone_start] == ord("-"))
        ok &= (numbers["zone"] // 100 <= 23) & (numbers["zone"] % 100 <= 59)  # strptime's limits
        offset = sign * (numbers["zone"] // 100 * 60 + numbers["zone"] % 100)
    seconds = (_days_from_civil(year, month, day) * 86400 + numbers["hour"] * 3600 + numbers["minute"] * 60
               + numbers["second"] - offset * 60)
    seconds = np.where(ok, seconds, 0)
    rows, parsed = _fallback(buffer, start, end, np.flatnonzero(~ok & (end > start)),
                             lambda text: _strptime_epoch(text, layout.strptime, utc_offset_minutes))
    if rows:
        seconds[rows] = parsed
        ok[rows] = True
    return seconds.astype(np.int64), ok


def _names(columns: np.ndarray, a: int, b: int) -> np.ndarray:
    """Bytes a..b of each field as an ``S`` array (month and weekday names)."""
    return np.ascontiguousarray(columns[a:b].T).view(f"S{b - a}").ravel()


def _strptime_epoch(text: str, layout: str, utc_offset_minutes: int) -> int:
    moment = datetime.strptime(text, layout)
    if moment.tzinfo is None:
        return calendar.timegm(moment.timetuple()) - utc_offset_minutes * 60
    return int(moment.astimezone(timezone.utc).timestamp())


def _days_in_month(year: np.ndarray, month: np.ndarray) -> np.ndarray:
    leap = ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)
    days = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])[month - 1]
    return days + (leap & (month == 2))


def _days_from_civil(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm, vectorised)."""
    y = year - (month <= 2)
    era = np.floor_divide(y, 400)
    year_of_era = y - era * 400
    day_of_year = (153 * (month + np.where(month > 2, -3, 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def decode_label(raw: bytes) -> str:
    """Text of a label: UTF-8, or Latin-1 for the files that use it (TSMC2014 has ``Caf\\xe9``)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")

