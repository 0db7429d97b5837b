"""The shared preprocessing rules against their loop-by-loop statement, on random record streams."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wevent.bench.producers import reference_matrix
from wevent.core.validation import ParameterError
from wevent.producers.preprocess import Interner, Observations, keyed_uniform, user_values

record = st.tuples(st.sampled_from(["3", "10", "7", "200", "0"]), st.integers(0, 2_000), st.integers(0, 4))


@settings(max_examples=150, deadline=None)
@given(records=st.lists(record, min_size=1, max_size=60), absent=st.sampled_from(["carry-forward", "category", "none"]),
       slot_seconds=st.sampled_from([1.0, 60.0, 137.0]), max_slots=st.one_of(st.none(), st.integers(1, 30)),
       split=st.integers(0, 60))
def test_user_values_equal_the_reference_on_random_records(records, absent, slot_seconds, max_slots, split):
    observations = Observations()
    for part in (records[:split], records[split:]):  # two blocks, so ids are matched across blocks
        if part:
            ids, times, values = zip(*part)
            observations.add(np.array([i.encode() for i in ids]), np.array(times), np.array(values))
    labels = list("abcde")
    got = user_values(observations, labels, slot_seconds, absent, max_slots)
    want = reference_matrix(records, labels, slot_seconds, absent, max_slots)
    assert got.user_ids == want.user_ids
    assert got.labels == want.labels and got.start == want.start
    assert np.array_equal(got.values, want.values)


def test_ids_that_are_not_all_numbers_sort_by_bytes():
    observations = Observations()
    observations.add(np.array([b"b", b"10", b"a", b"9"]), np.arange(4), np.zeros(4, dtype=int))
    assert user_values(observations, ["x"], 60, "none").user_ids == ["10", "9", "a", "b"]


def test_interner_matches_across_blocks_of_different_widths():
    words = Interner()
    codes = [words.add(np.array([b"JP", b"US"])), words.add(np.array([b"GB", b"JP", b"ZZZZZZ"]))]
    distinct, final = words.finish()
    assert distinct.tolist() == [b"GB", b"JP", b"US", b"ZZZZZZ"]
    assert [final[c].tolist() for c in codes] == [[1, 2], [0, 1, 3]]


def test_keyed_uniform_is_uniform_and_independent_of_width():
    ids = np.array([str(i).encode() for i in range(20_000)])
    u = keyed_uniform(ids, 3)
    assert np.array_equal(u, keyed_uniform(ids.astype("S30"), 3))
    assert abs((u < 0.05).mean() - 0.05) < 0.006  # ~4 standard deviations
    assert np.histogram(u, 10, (0, 1))[0].min() > 1_800
    assert not np.array_equal(u, keyed_uniform(ids, 4))


def test_bad_settings_are_refused():
    observations = Observations()
    observations.add(np.array([b"1"]), np.array([0]), np.array([0]))
    with pytest.raises(ParameterError, match="absent policy"):
        user_values(observations, ["a"], 60, "forward")
    with pytest.raises(ParameterError, match="slot length"):
        user_values(observations, ["a"], 0, "none")
