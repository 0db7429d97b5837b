"""T-Drive reader: Beijing taxi trajectories (Yuan et al., KDD'11) -> a (slot x taxi) grid-cell matrix.

The sample's layout is one text file per taxi (``release/taxi_log_2008_by_id/1.txt`` ...), lines
``taxi_id,YYYY-MM-DD HH:MM:SS,longitude,latitude`` in Beijing local time (UTC+8). Points outside
the profile's bounding box are skipped (counted, like malformed lines); the box is cut into a
``rows x cols`` grid whose cells are the domain; slots, the latest-point rule and carry-forward are
:mod:`wevent.producers.preprocess`'s.

Profiles (every setting can be overridden):

* ``personalized`` (default): the personalized paper's "10x10 grid with 1-minute
  slots": lon [116, 116.8] x lat [39.5, 40.3], 10 x 10 cells (d = 100), 60 s slots, carry-forward
  (every taxi has a cell in every slot; before its first point, its first cell).
* ``ldp-ids``: LDP-IDS Section 7.1.2 Taxi: d = 5 "grid areas" in 10-minute slots. The paper does not say
  how the 5 areas are cut; we use the same box as 1 x 5 longitude strips. A taxi without a point
  in a slot is ``ABSENT`` there (policy ``none``): a local stream's devices answer for it with
  their own "absent" category, the sixth they answer in (GRR still needs 3 bits, as the paper's
  table says), whose estimate no release holds.

On the full sample the personalized profile gives 10,357 taxis x 8,889 slots (as Du et al. 2025 report: T = 8,889).

>>> from wevent.producers.fixtures import FIXTURES
>>> data = read_tdrive([FIXTURES / "tdrive"])
>>> data.values.domain_size, data.values.slot_seconds, data.values.users > 100
(100, 60.0, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from wevent.core.validation import ParameterError

from .preprocess import BoundingBox, Grid, Observations, Preprocessed, parse_grid, user_values
from .profiles import SlotSettings, resolve, setting
from .textio import (BAD_NUMBER, BAD_TIME, BLOCK_BYTES, ISO_SECONDS, LineBlock, SkippedLines, parse_decimals,
                     parse_times, read_blocks, split_fields)

__all__ = ["TDriveProfile", "PROFILES", "OUTSIDE_BOX", "tdrive_files", "read_tdrive"]

OUTSIDE_BOX = "outside box"
BEIJING = BoundingBox(116.0, 116.8, 39.5, 40.3)  # Du et al. 2025, Section 5.1


def utc_offset(text: str) -> int:
    """A time zone offset in minutes: a whole number within +-24 hours."""
    minutes = int(text)
    if abs(minutes) > 24 * 60:
        raise ValueError(f"a UTC offset is at most 1440 minutes either way, got {minutes}")
    return minutes


@dataclass(frozen=True)
class TDriveProfile(SlotSettings):
    box: BoundingBox = setting(BEIJING, "bounding box; points outside are skipped", BoundingBox.parse,
                               "LON0,LON1,LAT0,LAT1")
    grid: tuple[int, int] = setting((10, 10), "grid over the box; its cells are the domain", parse_grid, "ROWSxCOLS")
    utc_offset_minutes: int = setting(480, "time zone of the timestamps, minutes east of UTC (Beijing: 480)",
                                      utc_offset, "MINUTES")

    def layout(self) -> Grid:
        return Grid(self.box, *self.grid)


PROFILES = {
    "personalized": TDriveProfile(
        description="Du et al. 2025 Section 5.1 Taxi: 10x10 grid over lon 116-116.8, lat 39.5-40.3, "
        "1-minute slots, carry-forward"),
    "ldp-ids": TDriveProfile(
        description="LDP-IDS Section 7.1.2 Taxi: 5 areas (1x5 grid), 10-minute slots, absent taxis without a value",
        grid=(1, 5), slot_seconds=600.0, absent="none"),
}


def tdrive_files(paths: Sequence[str | Path]) -> list[str]:
    """The taxi files: each path is a file, or a directory searched recursively for ``*.txt`` (sorted)."""
    files: list[str] = []
    for path in map(Path, paths):
        if path.is_dir():
            found = sorted(str(p) for p in path.rglob("*.txt"))
            if not found:
                raise ParameterError(f"no *.txt taxi files under {path}")
            files.extend(found)
        elif path.exists():
            files.append(str(path))
        else:
            raise ParameterError(f"input not found: {path}")
    if not files:
        raise ParameterError("no T-Drive input given")
    return files


def read_tdrive(paths: Sequence[str | Path], profile: TDriveProfile | str = "personalized",
                block_bytes: int = BLOCK_BYTES, **overrides) -> Preprocessed:
    """Read T-Drive files (or directories of them) into a (slot x taxi) matrix of grid cells."""
    if isinstance(profile, str):
        profile = resolve(PROFILES, profile, **overrides)
    grid = profile.layout()
    skipped = SkippedLines()
    observations = Observations()
    lines = 0
    for block in read_blocks(tdrive_files(paths), block_bytes):
        lines += block.lines
        observations.add(*_points(block, profile, grid, skipped))
    values = user_values(observations, grid.labels(), profile.slot_seconds, profile.absent, profile.max_slots,
                         name="tdrive")
    return Preprocessed(values, skipped, lines)


def _points(block: LineBlock, profile: TDriveProfile, grid: Grid, skipped: SkippedLines):
    """(taxi ids, epoch seconds, cells) of the block's valid in-box points."""
    fields = split_fields(block, ",", 4, skipped)
    taxis = fields.strings(0)
    times, ok = parse_times(block.buffer, *fields.column(1), ISO_SECONDS, profile.utc_offset_minutes)
    fields.reject(BAD_TIME, ~ok)
    lon, lon_ok = parse_decimals(block.buffer, *fields.column(2))
    lat, lat_ok = parse_decimals(block.buffer, *fields.column(3))
    fields.reject(BAD_NUMBER, ~(lon_ok & lat_ok))
    fields.reject(OUTSIDE_BOX, ~profile.box.contains(lon, lat))
    keep = fields.alive
    return taxis[keep], times[keep], grid.cells(lon[keep], lat[keep])
