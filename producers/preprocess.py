"""The papers' preparation of a record stream into a (slot x user) value matrix, shared by every reader.

A reader turns lines into *observations*: who (an id), when (epoch seconds), which value (an index
into the domain). :func:`user_values` then applies the rules of LDP-IDS (Section 7.1.2)
and Du et al. 2025 (Section 5.1):

* **Slots**: slot 1 starts at the first observation's time; slot k covers
  ``[start + (k-1) L, start + k L)`` for the slot length L. T runs to the last observation
  (or stops at ``max_slots``).
* **Latest record**: a user's value in a slot is the value of their latest observation in it;
  observations with the same time keep the one read last (file order, then line order). Exact
  duplicate records therefore change nothing, which is the papers' "drop duplicates".
* **Absent slots** (the papers do not say how they handled them), the ``absent`` policy:
  ``carry-forward`` repeats the previous value and gives the slots before a user's first
  observation that first value, so every user has a value in every slot;
  ``category`` adds one more domain value, ``absent``, for slots without an observation;
  ``none`` leaves them ``ABSENT`` (-1): the user is not counted in that slot.
* **Users** are the ids with at least one valid observation, numbered 0..N-1 in ascending id
  order: numerically when every id is a string of decimal digits (T-Drive taxis 1, 2, ..., 10357;
  precisely, by length and then bytes), otherwise by their bytes. ``UserValues.user_ids`` keeps
  the original ids.

>>> obs = Observations()
>>> obs.add(np.array([b"7", b"10", b"7"]), np.array([0, 30, 130]), np.array([2, 1, 0]))
>>> v = user_values(obs, labels=["a", "b", "c"], slot_seconds=60, absent="carry-forward")
>>> v.user_ids, v.values.tolist()
(['7', '10'], [[2, 1], [2, 1], [0, 1]])
>>> user_values(obs, labels=["a", "b", "c"], slot_seconds=60, absent="none").values.tolist()
[[2, 1], [-1, -1], [0, -1]]
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from wevent.core.data import ABSENT, UserValues
from wevent.core.validation import ParameterError

from .textio import SkippedLines, decode_label

__all__ = ["ABSENT_POLICIES", "ABSENT_LABEL", "BoundingBox", "Grid", "parse_grid", "Interner", "Observations",
           "Preprocessed", "check_slot_seconds", "check_absent", "user_values",
           "keyed_uniform", "value_dtype"]

ABSENT_POLICIES = ("carry-forward", "category", "none")
ABSENT_LABEL = "absent"  # the extra domain value of the "category" policy (last index)


@dataclass(frozen=True)
class BoundingBox:
    """A closed longitude/latitude box; points on its edges are inside.

    >>> box = BoundingBox(116.0, 116.8, 39.5, 40.3)
    >>> box.contains(np.array([116.0, 116.8, 116.81]), np.array([39.5, 40.3, 40.0])).tolist()
    [True, True, False]
    """

    lon_min: float
    lon_max: float
    lat_min: float
    lat_max: float

    def __post_init__(self) -> None:
        if not (self.lon_min < self.lon_max and self.lat_min < self.lat_max):
            raise ParameterError(f"bounding box needs lon_min < lon_max and lat_min < lat_max, got {self}")

    def contains(self, lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
        return (lon >= self.lon_min) & (lon <= self.lon_max) & (lat >= self.lat_min) & (lat <= self.lat_max)

    @classmethod
    def parse(cls, text: str) -> "BoundingBox":
        """``lon_min,lon_max,lat_min,lat_max``, e.g. ``116,116.8,39.5,40.3``."""
        parts = text.split(",")
        try:
            if len(parts) != 4:
                raise ValueError
            return cls(*(float(p) for p in parts))
        except (ValueError, ParameterError):
            raise ValueError(f"expected lon_min,lon_max,lat_min,lat_max with min < max, got {text!r}") from None

    def __str__(self) -> str:
        return f"{self.lon_min:g},{self.lon_max:g},{self.lat_min:g},{self.lat_max:g}"


@dataclass(frozen=True)
class Grid:
    """``rows x cols`` equal cells over a box; cell ``row * cols + col``, row 0 south, col 0 west.

    A point on the box's east or north edge belongs to the last column or row.

    >>> grid = Grid(BoundingBox(116.0, 116.8, 39.5, 40.3), rows=10, cols=10)
    >>> grid.cells(np.array([116.0, 116.8, 116.45]), np.array([39.5, 40.3, 39.93])).tolist()
    [0, 99, 55]
    >>> grid.labels()[55]
    'r5c5'
    """

    box: BoundingBox
    rows: int
    cols: int

    def __post_init__(self) -> None:
        if self.rows < 1 or self.cols < 1:
            raise ParameterError(f"a grid needs at least one row and one column, got {self.rows}x{self.cols}")

    @property
    def size(self) -> int:
        return self.rows * self.cols

    def cells(self, lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
        """Cell index of each point (points must be inside the box)."""
        b = self.box
        col = np.minimum(((lon - b.lon_min) / (b.lon_max - b.lon_min) * self.cols).astype(np.int64), self.cols - 1)
        row = np.minimum(((lat - b.lat_min) / (b.lat_max - b.lat_min) * self.rows).astype(np.int64), self.rows - 1)
        return row * self.cols + col

    def labels(self) -> list[str]:
        return [f"r{r}c{c}" for r in range(self.rows) for c in range(self.cols)]


def parse_grid(text: str) -> tuple[int, int]:
    """``ROWSxCOLS``, e.g. ``10x10``."""
    try:
        rows, cols = (int(p) for p in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"expected ROWSxCOLS such as 10x10, got {text!r}") from None
    if rows < 1 or cols < 1:
        raise ValueError(f"a grid needs at least one row and one column, got {text!r}")
    return rows, cols


class Interner:
    """Strings seen block by block, coded against the sorted set of all of them at the end.

    :meth:`add` returns provisional codes (unique across blocks); :meth:`finish` returns the sorted
    distinct strings and, for every provisional code, its index among them. Each block is sorted
    once (``np.unique``); only the blocks' distinct strings are merged at the end.

    >>> words = Interner()
    >>> first, second = words.add(np.array([b"US", b"JP", b"US"])), words.add(np.array([b"BR", b"US"]))
    >>> distinct, final = words.finish()
    >>> distinct.tolist(), final[first].tolist(), final[second].tolist()
    ([b'BR', b'JP', b'US'], [2, 1, 2], [0, 2])
    """

    def __init__(self) -> None:
        self._distinct: list[np.ndarray] = []
        self._size = 0

    def add(self, strings: np.ndarray) -> np.ndarray:
        distinct, local = np.unique(strings, return_inverse=True)
        codes = local.astype(np.int64) + self._size
        self._distinct.append(distinct)
        self._size += distinct.size
        return codes.astype(np.int32) if self._size < 2**31 else codes

    def finish(self) -> tuple[np.ndarray, np.ndarray]:
        if not self._distinct:
            return np.zeros(0, dtype="S1"), np.zeros(0, dtype=np.int64)
        return np.unique(np.concatenate(self._distinct), return_inverse=True)


class Observations:
    """Valid records collected block by block: user id (bytes), epoch seconds, value index."""

    def __init__(self) -> None:
        self._ids = Interner()
        self._users: list[np.ndarray] = []
        self._times: list[np.ndarray] = []
        self._values: list[np.ndarray] = []

    def add(self, ids: np.ndarray, times: np.ndarray, values: np.ndarray) -> None:
        if ids.size == 0:
            return
        self._users.append(self._ids.add(ids))
        self._times.append(np.asarray(times, dtype=np.int64))
        self._values.append(np.asarray(values, dtype=np.int32))

    def remap_values(self, mapping: np.ndarray) -> None:
        """Replace every value v by ``mapping[v]`` (e.g. provisional category codes -> domain index)."""
        self._values = [mapping[v].astype(np.int32) for v in self._values]

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(ids, user, times, values)``: the distinct ids in user order and, per record, its user index."""
        if not self._times:
            raise ParameterError("no valid records in the input")
        ids, final = self._ids.finish()
        order = _id_order(ids)
        rank = np.empty(order.size, dtype=np.int64)
        rank[order] = np.arange(order.size)
        user = rank[final][np.concatenate(self._users)]
        return ids[order], user, np.concatenate(self._times), np.concatenate(self._values)


def _id_order(ids: np.ndarray) -> np.ndarray:
    """Permutation of sorted byte ids into the user order: by (length, bytes) when every id is a
    string of decimal digits (numeric order, ids having no leading zeros), else as they are."""
    if ids.size and np.char.isdigit(ids).all():
        lengths = np.char.str_len(ids)
        return np.lexsort((ids, lengths))  # equal-length digit strings compare like their numbers
    return np.arange(ids.size)


def value_dtype(domain_size: int) -> np.dtype:
    """The smallest signed integer type holding 0..domain_size-1 and ABSENT."""
    for dtype in (np.int8, np.int16, np.int32):
        if domain_size - 1 <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


@dataclass
class Preprocessed:
    """A reader's result: the matrix, the malformed lines it skipped, and how many lines it read."""

    values: UserValues
    skipped: SkippedLines
    lines: int


def check_slot_seconds(slot_seconds: float) -> float:
    if not 0 < slot_seconds < math.inf:
        raise ParameterError(f"slot length must be a finite number of seconds > 0, got {slot_seconds!r}")
    return slot_seconds


def check_absent(policy: str) -> str:
    if policy not in ABSENT_POLICIES:
        raise ParameterError(f"absent policy must be one of {', '.join(ABSENT_POLICIES)}, got {policy!r}")
    return policy


# The (slot x user) matrix takes a byte per value, and carry-forward builds it twice: 2 GB at most.
MAX_MATRIX_VALUES = 1_000_000_000


def user_values(observations: Observations, labels: Sequence[str], slot_seconds: float, absent: str,
                max_slots: int | None = None, name: str = "data") -> UserValues:
    """The (slot x user) matrix of the observations under the rules in the module docstring."""
    check_slot_seconds(slot_seconds)
    check_absent(absent)
    ids, user, times, values = observations.arrays()
    start = int(times.min())
    slot = ((times - start) // slot_seconds).astype(np.int64)
    slots = int(slot.max()) + 1 if max_slots is None else min(int(slot.max()) + 1, int(max_slots))
    if slots * ids.size > MAX_MATRIX_VALUES:
        raise ParameterError(f"{slots:,} slots x {ids.size:,} users are over the limit of {MAX_MATRIX_VALUES:,} "
                             "values: use longer slots (--slot-seconds) or fewer (--max-slots)")

    # Latest observation per (user, slot): a stable sort by (user, time) keeps equal times in read
    # order, so the last row of each (user, slot) run is the one to keep.
    order = np.lexsort((times, user))
    user, slot, values = user[order], slot[order], values[order]
    last = np.ones(user.size, dtype=bool)
    last[:-1] = (user[1:] != user[:-1]) | (slot[1:] != slot[:-1])
    user, slot, values = user[last], slot[last], values[last]

    labels = list(labels)
    if absent == "carry-forward":
        matrix = _carried_forward(user, slot, values, ids.size, slots, value_dtype(len(labels)))
    else:
        if absent == "category":
            labels.append(ABSENT_LABEL)
        matrix = np.full((slots, ids.size), ABSENT, dtype=value_dtype(len(labels)))
        inside = slot < slots
        matrix[slot[inside], user[inside]] = values[inside]
        if absent == "category":
            matrix[matrix == ABSENT] = len(labels) - 1
    return UserValues(matrix, domain_size=len(labels), labels=labels,
                      user_ids=[decode_label(i) for i in ids.tolist()], slot_seconds=float(slot_seconds),
                      start=float(start), name=name)


def _carried_forward(user, slot, values, users: int, slots: int, dtype) -> np.ndarray:
    """Each user's value held from one observation to the next, the first one back to slot 1.

    Rows are one observation per (user, slot), sorted by user then slot. Every user's run of values
    is laid out with one ``np.repeat`` (user-major), then transposed to (slot, user).
    """
    first = np.ones(user.size, dtype=bool)
    first[1:] = user[1:] != user[:-1]
    slot = np.where(first, 0, slot)  # back-fill: the first value reaches back to slot 1
    keep = slot < slots
    user, slot, values = user[keep], slot[keep], values[keep]
    following = np.append(slot[1:], slots)
    following[np.append(user[1:] != user[:-1], True)] = slots  # a user's last run lasts to the end
    runs = following - slot
    return np.repeat(values.astype(dtype), runs).reshape(users, slots).T.copy()


def keyed_uniform(ids: np.ndarray, seed: int) -> np.ndarray:
    """A uniform number in [0, 1) per id (bytes array), fixed by (seed, id) alone.

    Used to keep each user with a given probability: the decision for a user does not depend on the
    other ids, so it is the same in every block, every run and every subset of the data. The hash is
    FNV-1a over the id's bytes started from the mixed seed, then the SplitMix64 finaliser, all in
    numpy (one pass per byte position, not per id).

    >>> keyed_uniform(np.array([b"50756", b"190571", b"50756"]), seed=0).round(4).tolist()
    [0.9826, 0.8536, 0.9826]
    """
    ids = np.ascontiguousarray(ids)
    width = ids.dtype.itemsize
    matrix = ids.view(np.uint8).reshape(ids.size, width)
    lengths = np.char.str_len(ids)
    mixed_seed = _splitmix64(np.uint64((seed + 0x9E3779B97F4A7C15) % 2**64))
    state = np.full(ids.size, mixed_seed ^ np.uint64(0xCBF29CE484222325))  # FNV-1a offset basis
    for j in range(width):  # NUL padding beyond an id's length is not hashed: widths may differ
        state = np.where(j < lengths, (state ^ matrix[:, j]) * np.uint64(0x100000001B3), state)
    return (_splitmix64(state) >> np.uint64(11)) * 2.0**-53


def _splitmix64(x):
    with np.errstate(over="ignore"):  # multiplication modulo 2**64 is the point (numpy warns on scalars)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))
