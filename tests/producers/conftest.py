"""Shared data for the producer tests: the fixture files read once, and slow line-by-line references.

The references parse with ``str.split``, ``datetime.strptime`` and ``float``/``int``, one line at
a time, and build the matrix with :func:`wevent.bench.producers.reference_matrix` (plain loops):
nothing is shared with the vectorised readers but the rules themselves.
"""

from __future__ import annotations

import calendar
import math
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

import pytest

from wevent.producers.fixtures import TDRIVE, TIST_CHECKINS, TIST_POIS, TSMC_NYC
from wevent.producers.fixtures.generate import samples
from wevent.producers.foursquare import read_foursquare
from wevent.producers.tdrive import read_tdrive, tdrive_files


@pytest.fixture(scope="session")
def generated():
    """The generator's files by path below the fixtures directory (content and injected bad lines)."""
    return {sample.path: sample for sample in samples(0)}


@pytest.fixture(scope="session")
def tdrive_data():
    return read_tdrive([TDRIVE])


@pytest.fixture(scope="session")
def tdrive_paths():
    return tdrive_files([TDRIVE])


@pytest.fixture(scope="session")
def tist_data():
    return read_foursquare(TIST_CHECKINS, "personalized", sample_rate=1.0)


def twitter_epoch(text: str) -> int:
    return int(datetime.strptime(text, "%a %b %d %H:%M:%S %z %Y").astimezone(timezone.utc).timestamp())


def _int_ok(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _float_ok(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _time_ok(text: str) -> int | None:
    try:
        return twitter_epoch(text)
    except ValueError:
        return None


def reference_tist(checkins: Path = TIST_CHECKINS, pois: Path = TIST_POIS):
    """(records, countries, skipped) of TIST2015 read line by line; skipped maps reason -> [(path, line)]."""
    skipped = defaultdict(list)
    venue_country = {}
    for number, line in enumerate(pois.read_text().split("\n"), start=1):
        cols = line.split("\t")
        if not line:
            continue
        if len(cols) != 5:
            skipped["wrong column count"].append((str(pois), number))
        elif not cols[0] or not cols[4]:
            skipped["bad field"].append((str(pois), number))
        elif not (_float_ok(cols[1]) and _float_ok(cols[2])):
            skipped["bad number"].append((str(pois), number))
        else:
            venue_country[cols[0]] = cols[4]  # a later line for the same venue wins
    countries = sorted(set(venue_country.values()))
    records = []
    for number, line in enumerate(checkins.read_text().split("\n"), start=1):
        cols = line.split("\t")
        if not line:
            continue
        if len(cols) != 4:
            skipped["wrong column count"].append((str(checkins), number))
        elif not cols[0] or not cols[1]:
            skipped["bad field"].append((str(checkins), number))
        elif (moment := _time_ok(cols[2])) is None:
            skipped["bad time"].append((str(checkins), number))
        elif not _int_ok(cols[3]):
            skipped["bad number"].append((str(checkins), number))
        elif cols[1] not in venue_country:
            skipped["unknown venue"].append((str(checkins), number))
        else:
            records.append((cols[0], moment, countries.index(venue_country[cols[1]])))
    return records, countries, dict(skipped)


def reference_tsmc(path: Path = TSMC_NYC):
    """(records, category names, skipped) of a TSMC2014 file read line by line."""
    skipped = defaultdict(list)
    rows = []
    for number, line in enumerate(path.read_bytes().decode("latin-1").split("\n"), start=1):
        cols = line.split("\t")
        if not line:
            continue
        if len(cols) != 8:
            skipped["wrong column count"].append((str(path), number))
        elif not cols[0] or not cols[3]:
            skipped["bad field"].append((str(path), number))
        elif not (_float_ok(cols[4]) and _float_ok(cols[5]) and _int_ok(cols[6])):
            skipped["bad number"].append((str(path), number))
        elif (moment := _time_ok(cols[7])) is None:
            skipped["bad time"].append((str(path), number))
        else:
            rows.append((cols[0], moment, cols[3]))
    names = sorted({name for _, _, name in rows}, key=lambda n: n.encode("latin-1"))
    records = [(user, moment, names.index(name)) for user, moment, name in rows]
    return records, names, dict(skipped)


def local_epoch(stamp: str, offset_minutes: int = 480) -> int:
    """Epoch seconds of a T-Drive timestamp (Beijing time)."""
    return calendar.timegm(datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").timetuple()) - offset_minutes * 60


def expected_first(skipped: dict[str, list[tuple[str, int]]], keep: int = 5) -> dict[str, list[tuple[str, int]]]:
    return {reason: where[:keep] for reason, where in skipped.items()}
