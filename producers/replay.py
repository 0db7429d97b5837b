"""Replay a feed slot by slot, in event-time order, into a sink.

A **feed** holds every user's value at every slot (:class:`Feed`: a preprocessed dataset as a
:class:`MatrixFeed`, or a generated stream, :class:`wevent.producers.synthetic.SyntheticFeed`). The
**replay loop** (:func:`replay`) walks slots ``from_slot..T`` in order and hands each slot's batch to
a **sink**: ``send_slot(slot, start, end, users, values)`` with the 1-based slot number, the slot's
``[start, end)`` in epoch seconds, the users present (``int64`` indices into ``feed.user_ids``,
ascending) and their values (integers in ``0..d-1``, the feed's dtype). A user ``ABSENT`` in a
slot is not in the batch. After the last slot the loop calls ``sink.close()``; when the loop
fails or is interrupted it does not, so a sink never finalises a partial run as if complete.

Speed: ``speed = 0`` sends as fast as the sink takes it; ``speed = s > 0`` sends slot k once
``(end_k - start_first) / s`` seconds of wall-clock time have passed since the replay began, i.e.
``s`` times real time, each slot when it has closed.

:class:`DumpSink` writes what it receives as a :class:`wevent.core.data.UserValues` ``.npz``
(``wevent replay --dump``), which ``wevent simulate --input`` reads.

A replay into Kafka names itself in its watermarks (``wevent replay --producer-id``), so that
several producers can feed one stream: by default :func:`default_producer_id`, the same for every
replay of the same feed, so that a restarted replay carries on as the producer it was.

>>> from wevent.core.data import UserValues
>>> feed = MatrixFeed(UserValues(np.array([[0, 1], [-1, 1]]), domain_size=2, slot_seconds=60))
>>> class Printer:
...     def send_slot(self, slot, start, end, users, values): print(slot, start, end, users, values)
...     def close(self): print("closed")
>>> replay(feed, Printer())
1 0.0 60.0 [0 1] [0 1]
2 60.0 120.0 [1] [1]
closed
ReplayStats(first_slot=1, last_slot=2, reports=3)

Feeds
-----

`wevent replay tdrive|foursquare|synthetic` reads the original file formats and prepares them the
papers' way:

- the bounding box and grid, or countries, or venue categories;
- the slot length;
- each user's latest record per slot;
- carry-forward of a user's previous value, and back-fill of their first.

It then replays slot by slot in event-time order, as fast as possible or at a multiple of real
time, as batched binary reports with per-partition watermarks, as one producer of the stream
(`--producer-id`, see :mod:`wevent.stream.wire.reports`). It can resume from a slot
(`--from-slot`), shows a progress bar and prints a summary of users, slots, domain and skipped
lines (with their first line numbers). `--dump FILE` writes the prepared (slot x user) matrix
instead, for `wevent simulate --input` and for the device fleet. For a local-model stream, replay
sends only the clock: the values stay with the devices.

### Getting the datasets

- **T-Drive** (Microsoft Research, 10,357 Beijing taxis, 2-8 February 2008): download the sample
  from <https://www.microsoft.com/en-us/research/publication/t-drive-trajectory-data-sample/> and
  unzip every part into one directory: one `N.txt` per taxi, with lines
  `taxi_id,YYYY-MM-DD HH:MM:SS,longitude,latitude` in Beijing time.
  `wevent replay tdrive DIR --dump taxi.npz` uses the 10x10 grid and 1-minute slots of the
  personalized paper. `--profile ldp-ids` gives LDP-IDS's 5 areas in 10-minute slots.
- **Foursquare** (Dingqi Yang, <https://sites.google.com/site/yangdingqi/home/foursquare-dataset>):
  - the global TIST2015 check-ins: keep `dataset_TIST2015_Checkins.txt` and
    `dataset_TIST2015_POIs.txt` together; countries are the domain, and the default samples 5% of users;
  - the NYC/Tokyo TSMC2014 files (`--profile tsmc2014`): venue categories are the domain.

| feed | profile | settings (every one overridable: `--grid`, `--slot-seconds`, `--box`, `--absent`, ...) |
|---|---|---|
| tdrive | `personalized` (default) | lon [116, 116.8] x lat [39.5, 40.3], 10x10 grid (d = 100), 60 s slots, carry-forward: 10,357 taxis x 8,889 slots |
| tdrive | `ldp-ids` | the same box as 1x5 longitude strips (d = 5), 600 s slots, a taxi without a point in a slot absent there (a local stream's devices answer for it in their "absent" category) |
| foursquare | `personalized` (default) | TIST2015, countries, 5% of users (keyed hash), 6,000 s slots (T = 7,649), carry-forward |
| foursquare | `ldp-ids` | TIST2015, countries, all users, 102,800 s slots (T = 447), carry-forward |
| foursquare | `tsmc2014` | TSMC2014, venue category names, all users, 6,000 s slots, carry-forward |
| synthetic | `personalized` / `ldp-ids` | LNS/Sin/Log: N = T = 10,000 / N = 200,000, T = 800 |

Parsing is vectorised (8 MB blocks of whole lines, numpy field and number parsing). Malformed
lines are counted by reason and skipped, with their first `file:line` locations: wrong column
count, bad field, bad time, bad number, outside the box, unknown venue. Users are numbered
0..N-1 in ascending id order (numerically when every id is digits), and their original ids are
kept.

The sample files under `producers/fixtures/` are written by
`python -m wevent.producers.fixtures.generate` (deterministic from a seed, in exactly the original
formats): 250 taxis over a day around Beijing, about 3,600 TIST2015 check-ins over 10 countries
with their POI file, and 2,000 NYC TSMC2014 check-ins. The tests and `wevent run` use them.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Protocol

import numpy as np

from wevent.core.data import ABSENT, UserValues
from wevent.core.validation import ParameterError

from .preprocess import MAX_MATRIX_VALUES, value_dtype

__all__ = ["Feed", "SlotSink", "MatrixFeed", "DumpSink", "ReplayStats", "replay", "slot_bounds", "check_dump_path",
           "check_from_slot", "first_slots", "default_producer_id"]


class Feed(Protocol):
    """Every user's value at every slot, and what the values mean."""

    name: str
    domain_size: int
    labels: list[str]
    user_ids: list[str]
    slot_seconds: float
    start: float

    @property
    def slots(self) -> int: ...

    @property
    def users(self) -> int: ...

    def values_at(self, slot: int) -> np.ndarray:
        """Every user's value at 1-based ``slot`` (``ABSENT`` = no value), one integer per user."""


class SlotSink(Protocol):
    """Where the replay loop sends each slot's batch (a dump file, or Kafka)."""

    def send_slot(self, slot: int, start: float, end: float, users: np.ndarray, values: np.ndarray) -> None: ...

    def close(self) -> None: ...


class MatrixFeed:
    """A feed over a preprocessed :class:`UserValues` matrix."""

    def __init__(self, data: UserValues) -> None:
        self.data = data
        self.name, self.domain_size, self.labels = data.name, data.domain_size, data.labels
        self.user_ids, self.slot_seconds, self.start = data.user_ids, data.slot_seconds, data.start

    @property
    def slots(self) -> int:
        return self.data.slots

    @property
    def users(self) -> int:
        return self.data.users

    def values_at(self, slot: int) -> np.ndarray:
        return self.data.values[slot - 1]


def first_slots(feed: Feed, slots: int) -> MatrixFeed:
    """The feed cut to its first ``slots`` slots."""
    data = UserValues(np.stack([feed.values_at(t) for t in range(1, slots + 1)]), feed.domain_size, list(feed.labels),
                      list(feed.user_ids), feed.slot_seconds, feed.start, feed.name)
    return MatrixFeed(data)


def slot_bounds(feed: Feed, slot: int) -> tuple[float, float]:
    """``[start, end)`` of 1-based ``slot`` in epoch seconds."""
    begin = feed.start + (slot - 1) * feed.slot_seconds
    return begin, begin + feed.slot_seconds


def default_producer_id(feed: Feed) -> str:
    """The producer id of a replay of ``feed`` unless one is given: ``replay-`` and 16 hex digits of
    a BLAKE2b digest of the feed's name and its users' ids (what the feed is, not where or when it
    runs). A replay restarted on any host, from any slot, at any speed, has the id it had; a feed of
    other users has another.

    >>> from wevent.core.data import UserValues
    >>> feed = MatrixFeed(UserValues(np.zeros((2, 3), dtype=np.int8), 2, user_ids=["a", "b", "c"], name="taxi"))
    >>> default_producer_id(feed) == default_producer_id(first_slots(feed, 1)), default_producer_id(feed)[:7]
    (True, 'replay-')
    """
    identity = "\0".join([feed.name, *feed.user_ids]).encode()
    return f"replay-{hashlib.blake2b(identity, digest_size=8, person=b'wevent-producer').hexdigest()}"


@dataclass(frozen=True)
class ReplayStats:
    first_slot: int
    last_slot: int
    reports: int  # (user, value) pairs sent

    @property
    def slots(self) -> int:
        return self.last_slot - self.first_slot + 1


def check_from_slot(feed: Feed, from_slot: int) -> int:
    if isinstance(from_slot, bool) or not isinstance(from_slot, int) or not 1 <= from_slot <= feed.slots:
        raise ParameterError(f"--from-slot must be a slot of the feed, 1..{feed.slots}, got {from_slot!r}")
    return from_slot


def check_dump_path(path: str | Path) -> Path:
    path = Path(path)
    if not path.parent.is_dir():
        raise ParameterError(f"cannot write {path}: no directory {path.parent}")
    return path


def replay(feed: Feed, sink: SlotSink, from_slot: int = 1, speed: float = 0.0,
           progress: Callable[[Iterable[int], int], Iterable[int]] | None = None,
           clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> ReplayStats:
    """Send slots ``from_slot..feed.slots`` to ``sink`` in order, then close it (see the module docstring).

    ``progress(slots, total)`` may wrap the slot iterator (a progress bar).
    """
    check_from_slot(feed, from_slot)
    if not speed >= 0:
        raise ParameterError(f"speed must be >= 0 (0: as fast as possible), got {speed!r}")
    slots: Iterable[int] = range(from_slot, feed.slots + 1)
    if progress is not None:
        slots = progress(slots, feed.slots - from_slot + 1)
    began, origin = clock(), slot_bounds(feed, from_slot)[0]
    reports = 0
    for slot in slots:
        start, end = slot_bounds(feed, slot)
        if speed > 0:
            wait = began + (end - origin) / speed - clock()
            if wait > 0:
                sleep(wait)
        values = feed.values_at(slot)
        users = np.flatnonzero(values != ABSENT)
        sink.send_slot(slot, start, end, users, values[users])
        reports += users.size
    sink.close()
    return ReplayStats(from_slot, feed.slots, reports)


class DumpSink:
    """Collects the replayed slots into a matrix and writes it as a ``UserValues`` ``.npz`` on close.

    With ``from_slot = k`` the dump holds slots k..T and starts at slot k's start time.
    """

    def __init__(self, path: str | Path, feed: Feed, from_slot: int = 1) -> None:
        self.path, self.feed, self.first = check_dump_path(path), feed, check_from_slot(feed, from_slot)
        slots = feed.slots - from_slot + 1
        if slots * feed.users > MAX_MATRIX_VALUES:
            raise ParameterError(f"a dump of {slots:,} slots x {feed.users:,} users is over the limit of "
                                 f"{MAX_MATRIX_VALUES:,} values: dump fewer slots or users")
        self.matrix = np.full((slots, feed.users), ABSENT, dtype=value_dtype(feed.domain_size))

    def send_slot(self, slot: int, start: float, end: float, users: np.ndarray, values: np.ndarray) -> None:
        self.matrix[slot - self.first, users] = values

    def close(self) -> None:
        feed = self.feed
        dump = UserValues(self.matrix, domain_size=feed.domain_size, labels=list(feed.labels),
                          user_ids=list(feed.user_ids), slot_seconds=feed.slot_seconds,
                          start=slot_bounds(feed, self.first)[0], name=feed.name)
        try:
            dump.save(self.path)
        except OSError as exc:
            raise ParameterError(f"cannot write {self.path}: {exc.strerror}") from None
