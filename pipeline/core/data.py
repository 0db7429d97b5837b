"""Datasets as the core sees them: a (slot x user) value matrix, or a (slot x bin) count matrix.

:class:`UserValues` is what a feed's preprocessing produces (``wevent replay ... --dump``) and what
``wevent simulate --input`` reads back: ``values[t, u]`` is user u's value at slot t+1, an integer
in ``0..d-1``, or ``ABSENT`` (-1) when the user has no value in that slot (such a user is not
counted). It is stored as a ``.npz`` file, and recognised by its content (a zip archive), whatever
the file's name: :func:`is_dump`.

A count matrix (``T`` rows of ``d`` non-negative numbers) is read from CSV by
:func:`load_counts_csv`, with one clear error per problem.

>>> v = UserValues(np.array([[0, 1, 1], [2, ABSENT, 0]]), domain_size=3)
>>> v.counts().tolist()
[[1, 2, 0], [1, 0, 1]]
"""

from __future__ import annotations

import csv
import functools
import math
import os
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .validation import ParameterError

__all__ = ["ABSENT", "UserValues", "histograms", "is_dump", "load_counts_csv", "load_dump", "load_input"]

ABSENT = -1
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a .npz is a zip archive (the second: an empty one)
_FEW_VALUES = 8  # domains up to this size are counted value by value


def is_dump(path: str | Path) -> bool:
    """Whether ``path`` holds a dump (a zip archive, as ``.npz`` files are), by its first bytes."""
    try:
        with open(path, "rb") as fh:
            return fh.read(4) in _ZIP_MAGIC
    except OSError:
        return False


def histograms(values: np.ndarray, domain_size: int) -> np.ndarray:
    """Per-row histograms of a (T, N) integer matrix (ABSENT entries ignored): a count of each value
    over the rows for a few values (a pass over the matrix each, in its own type: 15 times faster
    than the bincount on 10,000 x 10,000 binary values), one ``bincount`` of (row, value) cells for more."""
    values = np.asarray(values)
    slots = values.shape[0]
    if domain_size <= _FEW_VALUES:
        counts = np.zeros((slots, domain_size), dtype=np.int64)
        for value in range(domain_size):
            counts[:, value] = np.count_nonzero(values == value, axis=1)
        return counts
    present = values >= 0
    flat = (values + (np.arange(slots, dtype=np.int64) * domain_size)[:, None])[present]
    return np.bincount(flat, minlength=slots * domain_size).reshape(slots, domain_size)


@dataclass
class UserValues:
    """Every user's value at every slot, plus what the values mean."""

    values: np.ndarray
    domain_size: int
    labels: list[str] = field(default_factory=list)  # name of each value (cell, country, ...)
    user_ids: list[str] = field(default_factory=list)  # original id of each column
    slot_seconds: float = 0.0  # slot length; 0 when the data has no clock
    start: float = 0.0  # epoch seconds at which slot 1 starts
    name: str = "data"

    def __post_init__(self) -> None:
        self.values = np.asarray(self.values)
        if self.values.ndim != 2:
            raise ParameterError(f"user values must be a (slots, users) matrix, got shape {self.values.shape}")
        if not np.issubdtype(self.values.dtype, np.integer):
            raise ParameterError("user values must be integers")
        if self.values.size and (self.values.max() >= self.domain_size or self.values.min() < ABSENT):
            raise ParameterError(f"user values must lie in 0..{self.domain_size - 1} (or {ABSENT} for absent)")

    @property
    def slots(self) -> int:
        return int(self.values.shape[0])

    @property
    def users(self) -> int:
        return int(self.values.shape[1])

    def counts(self) -> np.ndarray:
        return histograms(self.values, self.domain_size)

    def save(self, path: str | Path) -> None:
        with open(path, "wb") as fh:  # a file object keeps numpy from appending ".npz"
            np.savez_compressed(
                fh,
                values=self.values,
                domain_size=self.domain_size,
                labels=np.array(self.labels, dtype=str),
                user_ids=np.array(self.user_ids, dtype=str),
                slot_seconds=self.slot_seconds,
                start=self.start,
                name=self.name,
            )

    @classmethod
    def load(cls, path: str | Path) -> "UserValues":
        """A dump written by :meth:`save`; anything else (truncated, not a dump, empty) is a ParameterError."""
        not_a_dump = f"{path} is not a wevent dump (.npz from `wevent replay --dump`)"
        try:
            with open(path, "rb") as fh:
                if fh.read(4) not in _ZIP_MAGIC:
                    raise ParameterError(f"{not_a_dump}: it is not a zip archive")
                fh.seek(0)
                with np.load(fh, allow_pickle=False) as npz:
                    values = cls(
                        values=npz["values"],
                        domain_size=int(npz["domain_size"]),
                        labels=npz["labels"].tolist(),
                        user_ids=npz["user_ids"].tolist(),
                        slot_seconds=float(npz["slot_seconds"]),
                        start=float(npz["start"]),
                        name=str(npz["name"]),
                    )
        except ParameterError:
            raise
        except FileNotFoundError:
            raise ParameterError(f"input file not found: {path}") from None
        except OSError as exc:
            raise ParameterError(f"cannot read {path}: {exc.strerror or exc}") from None
        except (KeyError, ValueError, TypeError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
            raise ParameterError(f"{not_a_dump}: {' '.join(str(exc).split())}") from None
        if not (values.slots and values.users and values.domain_size >= 1):
            raise ParameterError(f"{path} holds no data: {values.slots} slots of {values.users} users, "
                                 f"domain size {values.domain_size}")
        return values


def load_counts_csv(path: str | Path) -> np.ndarray:
    """A (T, d) matrix of non-negative counts from CSV; an optional first row of names is skipped."""
    try:
        handle = open(path, newline="", encoding="utf-8")
    except FileNotFoundError:
        raise ParameterError(f"input file not found: {path}") from None
    except OSError as exc:
        raise ParameterError(f"cannot read input file {path}: {exc.strerror}") from None
    rows: list[list[float]] = []
    width = None
    with handle:
        for line_no, row in _numbered_rows(path, handle):
            cells = [cell.strip() for cell in row]
            if not cells or cells == [""] or cells[0].startswith("#"):
                continue
            try:
                numbers = [float(cell) for cell in cells]
            except ValueError:
                if width is None and not rows:
                    width = len(cells)  # a header row: it fixes the width, its names are not needed
                    continue
                bad = next(c for c in cells if not _is_number(c))
                raise ParameterError(f"{path}, line {line_no}: {bad!r} is not a number") from None
            if width is None:
                width = len(numbers)
            if len(numbers) != width:
                raise ParameterError(f"{path}, line {line_no}: {len(numbers)} columns, expected {width} (ragged rows)")
            for value in numbers:
                if not math.isfinite(value):
                    raise ParameterError(f"{path}, line {line_no}: counts must be finite, got {value}")
                if value < 0:
                    raise ParameterError(f"{path}, line {line_no}: counts must be >= 0, got {value:g}")
            rows.append(numbers)
    if not rows:
        raise ParameterError(f"{path} holds no rows of counts")
    return np.array(rows, dtype=float)


def _numbered_rows(path, handle):
    """The CSV rows with their line numbers; bytes that are not UTF-8 text are a ParameterError."""
    try:
        yield from enumerate(csv.reader(handle), start=1)
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ParameterError(f"{path} is neither a CSV of counts nor a dump: {' '.join(str(exc).split())}") from None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def load_dump(path: str | Path) -> UserValues:
    """:meth:`UserValues.load`, with the last dump read kept in memory (read-only) while its file is
    unchanged: ``wevent reproduce`` runs many ``wevent simulate`` cells of one dump in a row in one
    process, and a dump of 10,000 x 10,000 values takes longer to decompress than most cells to run."""
    return _cached_dump(*_file_identity(path))


def load_input(path: str | Path) -> tuple[np.ndarray, UserValues | None]:
    """Counts from a CSV, or counts and user values from a dump (recognised by its content; both kept
    in memory like :func:`load_dump`'s)."""
    if is_dump(path):
        identity = _file_identity(path)
        return _cached_dump_counts(*identity), _cached_dump(*identity)
    return load_counts_csv(path), None


def _file_identity(path: str | Path) -> tuple[str, int, int, int]:
    """``(path, inode, modification time, size)``: a replaced or rewritten file is read again."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        raise ParameterError(f"input file not found: {path}") from None
    except OSError as exc:
        raise ParameterError(f"cannot read {path}: {exc.strerror or exc}") from None
    return str(path), stat.st_ino, stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=1)
def _cached_dump(path: str, inode: int, mtime_ns: int, size: int) -> UserValues:
    values = UserValues.load(path)
    values.values.flags.writeable = False
    return values


@functools.lru_cache(maxsize=1)
def _cached_dump_counts(path: str, inode: int, mtime_ns: int, size: int) -> np.ndarray:
    counts = _cached_dump(path, inode, mtime_ns, size).counts().astype(float)
    counts.flags.writeable = False
    return counts
