"""The Foursquare readers on the fixture files, against line-by-line references and the generator's truth."""

from __future__ import annotations

import numpy as np
import pytest

from wevent.bench.producers import reference_matrix
from wevent.core.validation import ParameterError
from wevent.producers.fixtures import FIXTURES, TIST_CHECKINS, TIST_POIS, TSMC_NYC
from wevent.producers.foursquare import read_foursquare
from wevent.producers.preprocess import keyed_uniform

from .conftest import expected_first, reference_tist, reference_tsmc


def _truth(generated, *paths):
    """reason -> [(path, line)] of the generator's injected lines, in the reader's file order."""
    out: dict[str, list] = {}
    for path in paths:
        for number, reason in sorted(generated[path.relative_to(FIXTURES).as_posix()].injected.items()):
            out.setdefault(reason, []).append((str(path), number))
    return out


def test_tist_matches_the_line_by_line_reference(tist_data):
    records, countries, skipped = reference_tist()
    reference = reference_matrix(records, countries, 6000.0, "carry-forward")
    values = tist_data.values
    assert values.labels == countries and values.domain_size == 10
    assert values.user_ids == reference.user_ids
    assert np.array_equal(values.values, reference.values)
    assert values.slots == reference.slots and values.users == reference.users
    assert tist_data.skipped.counts == {reason: len(where) for reason, where in skipped.items()}


def test_tist_skips_exactly_the_injected_lines(tist_data, generated):
    truth = _truth(generated, TIST_POIS, TIST_CHECKINS)
    assert tist_data.skipped.counts == {reason: len(where) for reason, where in truth.items()}
    assert tist_data.skipped.first == expected_first(truth)
    assert {"wrong column count", "bad time", "bad number", "unknown venue"} <= set(truth)


def test_tist_user_sample_is_keyed_by_user_and_seed():
    records, countries, _ = reference_tist()
    sampled = read_foursquare(TIST_CHECKINS, "personalized")  # 5% of users
    keep = {u for u, _, _ in records if keyed_uniform(np.array([u.encode()]), 0)[0] < 0.05}
    reference = reference_matrix([r for r in records if r[0] in keep], countries, 6000.0, "carry-forward")
    assert sampled.values.user_ids == reference.user_ids and 5 <= sampled.values.users <= 40
    assert np.array_equal(sampled.values.values, reference.values)
    other_seed = read_foursquare(TIST_CHECKINS, "personalized", seed=1)
    assert other_seed.values.user_ids != sampled.values.user_ids
    small_blocks = read_foursquare(TIST_CHECKINS, "personalized", block_bytes=2048)
    assert small_blocks.values.user_ids == sampled.values.user_ids
    assert np.array_equal(small_blocks.values.values, sampled.values.values)


def test_tist_ldp_ids_profile_and_inputs(tist_data):
    ldp = read_foursquare(FIXTURES / "foursquare", "ldp-ids")  # a directory holding both files
    assert ldp.values.slot_seconds == 102_800.0 and ldp.values.users == tist_data.values.users
    days = (tist_data.values.slots * 6000) // 102_800
    assert ldp.values.slots in (days, days + 1)
    explicit = read_foursquare(TIST_CHECKINS, "ldp-ids", pois=TIST_POIS)
    assert np.array_equal(explicit.values.values, ldp.values.values)
    with pytest.raises(ParameterError, match="cannot read"):
        read_foursquare(TIST_CHECKINS, "ldp-ids", pois=FIXTURES / "missing.txt")


def test_tsmc_matches_the_reference_with_latin1_categories(generated):
    data = read_foursquare(TSMC_NYC, "tsmc2014")
    records, names, skipped = reference_tsmc()
    reference = reference_matrix(records, names, 6000.0, "carry-forward")
    assert data.values.labels == names and "Caf\u00e9" in names
    assert data.values.user_ids == reference.user_ids
    assert np.array_equal(data.values.values, reference.values)
    truth = _truth(generated, TSMC_NYC)
    assert data.skipped.counts == {reason: len(where) for reason, where in truth.items()}
    assert {reason: len(where) for reason, where in skipped.items()} == data.skipped.counts


def test_tsmc_absent_policies_and_max_slots():
    records, names, _ = reference_tsmc()
    for absent in ("none", "category"):
        data = read_foursquare(TSMC_NYC, "tsmc2014", absent=absent, slot_seconds=3600.0, max_slots=50)
        reference = reference_matrix(records, names, 3600.0, absent, max_slots=50)
        assert data.values.slots == 50 and np.array_equal(data.values.values, reference.values)
    with pytest.raises(ParameterError, match="only used with the tist2015"):
        read_foursquare(TSMC_NYC, "tsmc2014", pois=TIST_POIS)
