"""Foursquare readers (Dingqi Yang's datasets) -> a (slot x user) matrix of countries or venue categories.

* **TIST2015** (global, Apr 2012 - Sep 2013): ``dataset_TIST2015_Checkins.txt`` (tab-separated
  user id, venue id, UTC time ``Tue Apr 03 18:00:09 +0000 2012``, time-zone offset in minutes)
  joined with ``dataset_TIST2015_POIs.txt`` (venue id, latitude, longitude, category, ISO country
  code). The domain is the set of country codes in the POI file, sorted (77 on the full data).
  Check-ins at a venue missing from the POI file are skipped as ``unknown venue``; when a venue is
  listed twice, its last line counts.
* **TSMC2014** (New York or Tokyo, Apr 2012 - Feb 2013): one file of 8 tab-separated columns (user,
  venue, category id, category name, latitude, longitude, offset, UTC time). The domain is the set
  of category names in the file, sorted by their bytes. The files are Latin-1 in places.

Times are UTC; slots, the latest check-in rule and carry-forward are :mod:`wevent.producers.preprocess`'s.
A user sample keeps each user with probability ``sample_rate``, decided by a keyed hash of
(seed, user id) (:func:`~wevent.producers.preprocess.keyed_uniform`), so the same users are kept on every
run and whatever the block boundaries.

Profiles (every setting can be overridden):

* ``personalized`` (default): Du et al. 2025, Section 5.1: TIST2015, countries, a 5% user sample,
  100-minute slots (T = 7,649 on the full data), carry-forward.
* ``ldp-ids``: LDP-IDS Section 7.1.2: TIST2015, countries (d = 77), every user. The paper gives T = 447
  but no slot length; 102,800 s (~28.6 h) slots give T = 447 over the full data's span. Absent
  slots carry forward (the paper's 77 OUE bits leave no room for an extra category).
* ``tsmc2014``: TSMC2014 with venue categories as the domain (not in the papers): 100-minute slots
  like the Foursquare setting above, every user, carry-forward.

>>> from wevent.producers.fixtures import TIST_CHECKINS
>>> data = read_foursquare(TIST_CHECKINS, "personalized", sample_rate=1.0)
>>> data.values.labels[:3], data.values.slot_seconds
(['BR', 'GB', 'ID'], 6000.0)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wevent.core.validation import ParameterError

from .preprocess import Interner, Observations, Preprocessed, keyed_uniform, user_values
from .profiles import SlotSettings, resolve, setting
from .textio import (BAD_NUMBER, BAD_TIME, BLOCK_BYTES, TWITTER_UTC, Fields, SkippedLines, decode_label,
                     parse_decimals, parse_integers, parse_times, read_blocks, split_fields)

__all__ = ["FoursquareProfile", "PROFILES", "FORMATS", "UNKNOWN_VENUE", "read_foursquare", "read_tist2015",
           "read_tsmc2014"]

UNKNOWN_VENUE = "unknown venue"
FORMATS = ("tist2015", "tsmc2014")
TIST_CHECKINS = "dataset_TIST2015_Checkins.txt"
TIST_POIS = "dataset_TIST2015_POIs.txt"


def _sample_rate(text: str) -> float:
    rate = float(text)
    if not 0 < rate <= 1:
        raise ValueError(f"expected a fraction in (0, 1], got {text!r}")
    return rate


@dataclass(frozen=True)
class FoursquareProfile(SlotSettings):
    format: str = setting("tist2015", "file layout: tist2015 (global; countries) or tsmc2014 (NYC/Tokyo; "
                          "venue categories)", str, "FORMAT", FORMATS)
    sample_rate: float = setting(1.0, "keep each user with this probability", _sample_rate, "P")
    seed: int = setting(0, "seed of the user sample", int, "SEED")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.format not in FORMATS:
            raise ParameterError(f"format must be one of {', '.join(FORMATS)}, got {self.format!r}")
        if not 0 < self.sample_rate <= 1:
            raise ParameterError(f"sample rate must be in (0, 1], got {self.sample_rate!r}")


PROFILES = {
    "personalized": FoursquareProfile(
        description="Du et al. 2025 Section 5.1: TIST2015 countries, 5% of users, 100-minute slots, carry-forward",
        slot_seconds=6000.0, sample_rate=0.05),
    "ldp-ids": FoursquareProfile(
        description="LDP-IDS Section 7.1.2: TIST2015 countries, all users, 102,800 s slots (T = 447 on the full data), "
        "carry-forward", slot_seconds=102_800.0),
    "tsmc2014": FoursquareProfile(
        description="TSMC2014 (NYC or Tokyo): venue categories, all users, 100-minute slots, carry-forward",
        format="tsmc2014", slot_seconds=6000.0),
}


def read_foursquare(path: str | Path, profile: FoursquareProfile | str = "personalized", pois: str | Path | None = None,
                    block_bytes: int = BLOCK_BYTES, **overrides) -> Preprocessed:
    """Read a Foursquare dataset in the profile's format.

    For TIST2015, ``path`` is the check-in file or the directory holding both files; the POI file
    is ``pois`` or ``dataset_TIST2015_POIs.txt`` beside the check-ins. For TSMC2014 it is the file.
    """
    if isinstance(profile, str):
        profile = resolve(PROFILES, profile, **overrides)
    path = Path(path)
    if profile.format == "tsmc2014":
        if pois is not None:
            raise ParameterError("a POI file is only used with the tist2015 format")
        return read_tsmc2014(path, profile, block_bytes)
    checkins = path / TIST_CHECKINS if path.is_dir() else path
    return read_tist2015(checkins, Path(pois) if pois else checkins.parent / TIST_POIS, profile, block_bytes)


def _sampled(fields: Fields, users: np.ndarray, profile: FoursquareProfile) -> np.ndarray:
    """Rows still valid whose user is in the sample."""
    if profile.sample_rate >= 1:
        return fields.alive
    return fields.alive & (keyed_uniform(users, profile.seed) < profile.sample_rate)


def read_tist2015(checkins: Path, pois: Path, profile: FoursquareProfile,
                  block_bytes: int = BLOCK_BYTES) -> Preprocessed:
    """TIST2015 check-ins joined to their venues' countries."""
    skipped = SkippedLines()
    venues, venue_country, countries, lines = _venue_countries(pois, skipped, block_bytes)
    observations = Observations()
    for block in read_blocks([checkins], block_bytes):
        lines += block.lines
        fields = split_fields(block, "\t", 4, skipped)
        users, venue = fields.strings(0), fields.strings(1)
        times, ok = parse_times(block.buffer, *fields.column(2), TWITTER_UTC)
        fields.reject(BAD_TIME, ~ok)
        fields.reject(BAD_NUMBER, ~parse_integers(block.buffer, *fields.column(3))[1])
        at = np.minimum(np.searchsorted(venues, venue), max(venues.size - 1, 0))
        fields.reject(UNKNOWN_VENUE, venues[at] != venue if venues.size else np.ones(venue.size, bool))
        keep = _sampled(fields, users, profile)
        observations.add(users[keep], times[keep], venue_country[at[keep]])
    values = user_values(observations, countries, profile.slot_seconds, profile.absent, profile.max_slots,
                         name="foursquare-tist2015")
    return Preprocessed(values, skipped, lines)


def _venue_countries(pois: Path, skipped: SkippedLines, block_bytes: int):
    """Sorted venue ids, each venue's country index, the country codes, lines read."""
    venue_blocks, country_codes = [], Interner()
    country_blocks, lines = [], 0
    for block in read_blocks([pois], block_bytes):
        lines += block.lines
        fields = split_fields(block, "\t", 5, skipped)
        venue, country = fields.strings(0), fields.strings(4)
        latitude_ok = parse_decimals(block.buffer, *fields.column(1))[1]
        longitude_ok = parse_decimals(block.buffer, *fields.column(2))[1]
        fields.reject(BAD_NUMBER, ~(latitude_ok & longitude_ok))
        venue_blocks.append(venue[fields.alive])
        country_blocks.append(country_codes.add(country[fields.alive]))
    countries, final = country_codes.finish()
    listed = np.concatenate(venue_blocks)
    country_of_listed = final[np.concatenate(country_blocks)]
    # np.unique keeps the first of equal ids; run it backwards so a venue's last line counts
    venues, last = np.unique(listed[::-1], return_index=True)
    return venues, country_of_listed[::-1][last], [decode_label(c) for c in countries.tolist()], lines


def read_tsmc2014(path: Path, profile: FoursquareProfile, block_bytes: int = BLOCK_BYTES) -> Preprocessed:
    """TSMC2014 check-ins with their venue category names as values."""
    skipped = SkippedLines()
    observations, categories = Observations(), Interner()
    lines = 0
    for block in read_blocks([path], block_bytes):
        lines += block.lines
        fields = split_fields(block, "\t", 8, skipped)
        users, category = fields.strings(0), fields.strings(3)
        numbers_ok = (parse_decimals(block.buffer, *fields.column(4))[1]
                      & parse_decimals(block.buffer, *fields.column(5))[1]
                      & parse_integers(block.buffer, *fields.column(6))[1])
        fields.reject(BAD_NUMBER, ~numbers_ok)
        times, ok = parse_times(block.buffer, *fields.column(7), TWITTER_UTC)
        fields.reject(BAD_TIME, ~ok)
        keep = _sampled(fields, users, profile)
        observations.add(users[keep], times[keep], categories.add(category[keep]))
    names, final = categories.finish()
    observations.remap_values(final)
    values = user_values(observations, [decode_label(n) for n in names.tolist()], profile.slot_seconds,
                         profile.absent, profile.max_slots, name="foursquare-tsmc2014")
    return Preprocessed(values, skipped, lines)
