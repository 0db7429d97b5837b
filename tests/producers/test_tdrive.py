"""The T-Drive reader on the fixture files, against the generator's ground truth and a csv-module loop."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from wevent.bench.producers import csv_baseline
from wevent.core.data import ABSENT
from wevent.core.validation import ParameterError
from wevent.producers.fixtures import TDRIVE
from wevent.producers.preprocess import BoundingBox
from wevent.producers.profiles import resolve
from wevent.producers.tdrive import PROFILES, read_tdrive

from .conftest import expected_first, local_epoch


def _valid_points(generated) -> dict[str, list[tuple[int, float, float]]]:
    """Per taxi id, its (epoch, lon, lat) points that the generator did not inject as bad, in file order."""
    points = {}
    for path, sample in generated.items():
        if not path.startswith("tdrive/"):
            continue
        for number, line in enumerate(sample.lines, start=1):
            if number not in sample.injected:
                taxi, stamp, lon, lat = line.split(",")
                points.setdefault(taxi, []).append((local_epoch(stamp), float(lon), float(lat)))
    return points


def _cell(lon: float, lat: float) -> int:
    col = min(int((lon - 116.0) / 0.8 * 10), 9)
    row = min(int((lat - 39.5) / 0.8 * 10), 9)
    return row * 10 + col


def test_shape_follows_the_generated_tracks(tdrive_data, generated):
    points = _valid_points(generated)
    times = [t for track in points.values() for t, _, _ in track]
    values = tdrive_data.values
    assert values.domain_size == 100 and len(values.labels) == 100
    assert values.users == len(points)  # neither the empty file nor the always-outside taxi
    assert values.slots == (max(times) - min(times)) // 60 + 1
    assert values.start == min(times) and values.slot_seconds == 60.0
    assert sorted(values.user_ids, key=int) == values.user_ids == sorted(points, key=int)
    assert (values.values >= 0).all()  # carry-forward: every taxi has a cell in every slot


def test_matrix_equals_the_csv_reference(tdrive_data, tdrive_paths):
    reference, _ = csv_baseline(tdrive_paths, PROFILES["personalized"])
    assert np.array_equal(tdrive_data.values.values, reference.values)
    assert tdrive_data.values.user_ids == reference.user_ids


@pytest.mark.parametrize("overrides", [dict(absent="category", grid=(1, 5), slot_seconds=600.0),
                                       dict(absent="none", max_slots=300), dict(slot_seconds=1800.0)])
def test_other_settings_equal_the_csv_reference(tdrive_paths, overrides):
    profile = resolve(PROFILES, "personalized", **overrides)
    data = read_tdrive(tdrive_paths, profile)
    reference, _ = csv_baseline(tdrive_paths, profile)
    assert np.array_equal(data.values.values, reference.values)
    assert data.values.labels == reference.labels


def test_malformed_lines_are_the_injected_ones(tdrive_data, tdrive_paths, generated):
    injected: dict[str, list[tuple[str, int]]] = {}
    for path in tdrive_paths:  # the reader's file order
        sample = generated[Path(path).relative_to(TDRIVE.parent).as_posix()]
        for number, reason in sorted(sample.injected.items()):
            injected.setdefault(reason, []).append((path, number))
    assert tdrive_data.skipped.counts == {reason: len(where) for reason, where in injected.items()}
    assert tdrive_data.skipped.first == expected_first(injected)
    assert set(injected) == {"wrong column count", "bad time", "bad number", "outside box"}


def test_latest_point_in_a_slot_wins(tdrive_data, generated):
    points = _valid_points(generated)
    column = {taxi: i for i, taxi in enumerate(tdrive_data.values.user_ids)}
    start = tdrive_data.values.start
    checked = 0
    for taxi, track in points.items():
        by_slot: dict[int, tuple[int, int, int]] = {}
        for order, (t, lon, lat) in enumerate(track):
            slot = int((t - start) // 60)
            by_slot[slot] = max(by_slot.get(slot, (t, order, 0)), (t, order, _cell(lon, lat)))
        for slot, (_, _, cell) in by_slot.items():
            assert tdrive_data.values.values[slot, column[taxi]] == cell
            checked += 1
    assert checked > 10_000


def test_same_second_twice_keeps_the_later_line(tdrive_data, generated):
    """Taxis with a duplicated second at another place (generator quirk 4): the later line's cell."""
    column = {taxi: i for i, taxi in enumerate(tdrive_data.values.user_ids)}
    seen = 0
    for path, sample in generated.items():
        stamps = [line.split(",")[1] for line in sample.lines] if path.startswith("tdrive/") else []
        for i in range(1, len(stamps)):
            first, second = sample.lines[i - 1].split(","), sample.lines[i].split(",")
            if stamps[i] == stamps[i - 1] and first[2:] != second[2:] and i + 1 not in sample.injected:
                slot = int((local_epoch(stamps[i]) - tdrive_data.values.start) // 60)
                later = _cell(float(second[2]), float(second[3]))
                if _cell(float(first[2]), float(first[3])) != later:
                    seen += 1
                assert tdrive_data.values.values[slot, column[second[0]]] == later
    assert seen >= 1


def test_carry_forward_and_first_cell_back_fill(tdrive_data, generated):
    points = _valid_points(generated)
    values, start = tdrive_data.values, tdrive_data.values.start
    for column, taxi in enumerate(values.user_ids):
        track = sorted(points[taxi], key=lambda p: p[0])  # by time; equal times keep file order
        slots = [int((t - start) // 60) for t, _, _ in track]
        first_slot = slots[0]
        first_cell = next(_cell(lon, lat) for (t, lon, lat), s in zip(reversed(track), reversed(slots))
                          if s == first_slot)
        assert (values.values[:first_slot, column] == first_cell).all()
        # between two points the cell of the earlier one's slot holds
        for (a, b) in zip(slots, slots[1:]):
            if b > a + 1:
                assert (values.values[a + 1:b, column] == values.values[a, column]).all()
        assert (values.values[slots[-1]:, column] == values.values[slots[-1], column]).all()


def test_bounding_box_edges_and_a_smaller_box(tdrive_paths, tdrive_data):
    # the generator puts a point on the north-east corner of the box: inside, in the last cell
    assert (tdrive_data.values.values == 99).any()
    small = BoundingBox(116.3, 116.5, 39.8, 40.0)
    data = read_tdrive(tdrive_paths, "personalized", box=small, absent="none")
    reference, skipped = csv_baseline(tdrive_paths, resolve(PROFILES, "personalized", box=small, absent="none"))
    assert data.skipped.counts["outside box"] == len(skipped["outside box"]) > tdrive_data.skipped.counts["outside box"]
    assert np.array_equal(data.values.values, reference.values)
    full_box = read_tdrive(tdrive_paths, "personalized", absent="none")
    assert 0 < (data.values.values != ABSENT).sum() < (full_box.values.values != ABSENT).sum()


def test_same_output_on_every_run_and_any_block_size(tdrive_paths, tdrive_data):
    again = read_tdrive(tdrive_paths, block_bytes=4096)  # files split across many blocks
    assert np.array_equal(again.values.values, tdrive_data.values.values)
    assert again.values.user_ids == tdrive_data.values.user_ids
    assert again.skipped == tdrive_data.skipped and again.lines == tdrive_data.lines


def test_garbage_and_crlf_never_crash(tmp_path, tdrive_paths):
    rng = np.random.default_rng(5)
    clean = Path(tdrive_paths[0]).read_bytes()
    noise = [bytes(rng.integers(0, 256, int(rng.integers(1, 400)), dtype=np.uint8)).replace(b"\n", b"")
             for _ in range(50)]
    noise += [b",,,", b"1,2008-02-03 10:00:00,116.4", b"x" * 5000 + b",2008-02-03 10:00:00,116.4,39.9",
              b"1,2008-02-03 10:00:00,inf,39.9", b"1,2008-02-03 10:00:00,nan,39.9", b"1,2008-13-03 10:00:00,116.4,39.9"]
    noise = [line for line in noise if line.strip(b"\r")]  # blank lines are not counted
    (tmp_path / "noisy.txt").write_bytes(clean.replace(b"\n", b"\r\n") + b"\n".join(noise) + b"\n")
    noisy = read_tdrive([tmp_path / "noisy.txt"])
    plain = read_tdrive([tdrive_paths[0]])
    assert np.array_equal(noisy.values.values, plain.values.values)
    assert noisy.skipped.total == plain.skipped.total + len(noise)


def test_no_valid_point_is_a_clear_error(tmp_path):
    (tmp_path / "1.txt").write_text("1,2008-02-03 10:00:00,0.0,0.0\n")
    with pytest.raises(ParameterError, match="no valid records"):
        read_tdrive([tmp_path])
    with pytest.raises(ParameterError, match="not found"):
        read_tdrive([tmp_path / "missing"])


def test_profiles_and_overrides(tdrive_paths):
    ldp = read_tdrive(tdrive_paths, "ldp-ids")
    assert ldp.values.domain_size == 5 and "absent" not in ldp.values.labels  # the devices' category, not a value
    assert ldp.values.slot_seconds == 600.0
    assert (ldp.values.values == ABSENT).any() and (ldp.values.values >= 0).any()
    with pytest.raises(ParameterError, match="unknown profile"):
        read_tdrive(tdrive_paths, "nope")
    with pytest.raises(ParameterError, match="no setting"):
        read_tdrive(tdrive_paths, "personalized", colour="red")


def test_grid_cells_follow_the_personalized_grid():
    """The grid of Du et al. 2025, Section 5.1: col = floor((lon-116)/0.08), row = floor((lat-39.5)/0.08),
    clamped to 9 at the upper edge. On five-decimal coordinates (as in the data) the reader agrees
    everywhere except exactly on a cell edge, where a float division can round down a
    quotient that is exactly whole; there the reader's cell is the mathematically right one."""
    from decimal import Decimal

    from wevent.producers.tdrive import BEIJING
    from wevent.producers.preprocess import Grid

    rng = np.random.default_rng(12)
    lon = np.round(rng.uniform(116.0, 116.8, 200_000), 5)
    lat = np.round(rng.uniform(39.5, 40.3, 200_000), 5)
    edges = np.round(116.0 + 0.08 * np.arange(11), 5), np.round(39.5 + 0.08 * np.arange(11), 5)
    lon[:11], lat[11:22] = edges  # every edge itself
    cells = Grid(BEIJING, 10, 10).cells(lon, lat)
    spec = np.minimum(np.floor((lat - 39.5) / 0.08), 9) * 10 + np.minimum(np.floor((lon - 116) / 0.08), 9)
    differ = np.flatnonzero(cells != spec)
    assert differ.size < 20  # only edge points
    for i in differ:
        exact_col = min(int((Decimal(str(float(lon[i]))) - Decimal("116")) / Decimal("0.08")), 9)
        exact_row = min(int((Decimal(str(float(lat[i]))) - Decimal("39.5")) / Decimal("0.08")), 9)
        assert cells[i] == exact_row * 10 + exact_col
