import numpy as np
import pytest

from wevent.core.data import ABSENT, UserValues, histograms, load_dump, load_input
from wevent.core.synthetic import synthetic
from wevent.core.validation import ParameterError


@pytest.mark.parametrize("name", ["lns", "sin", "log"])
def test_values_match_counts_and_are_reproducible_per_slot(name):
    data = synthetic(name, users=3000, slots=40, seed=5)
    values = data.values()
    assert values.shape == (40, 3000)
    assert np.array_equal(histograms(values, 2), data.counts)
    assert np.array_equal(data.values_at(17), values[16])
    assert (data.p >= 0).all() and (data.p <= 1).all()


def test_closed_forms_of_sin_and_log():
    t = np.array([1, 100, 1000])
    sin = synthetic("sin", 10, 1000).p[t - 1]
    log = synthetic("log", 10, 1000).p[t - 1]
    assert np.allclose(sin, 0.05 * np.sin(0.01 * t) + 0.075)
    assert np.allclose(log, 0.25 / (1 + np.exp(-0.01 * t)))


def test_lns_walk_steps_have_the_configured_spread():
    # Away from the clipping bounds, p_t - p_{t-1} ~ N(0, 0.0025^2); sd estimate over 4999 steps
    # has relative standard error 1/sqrt(2*4999) = 1%: allow 5%.
    p = synthetic("lns", 10, 5000, seed=1, start=0.5).p
    steps = np.diff(p)
    assert abs(steps.std() / 0.0025 - 1) < 0.05


def test_continuous_values_are_clipped_normals():
    data = synthetic("sin", 20000, 5, seed=2)
    v = data.continuous_values_at(3)
    assert v.min() >= 0 and v.max() <= 1
    # mean of clipped N(p, 0.1^2) with p ~ 0.078 is above p (clipping at 0 removes negatives);
    # unclipped mean is within 5 se (0.1/sqrt(2e4)) of p: check through the raw distribution instead.
    assert abs(np.median(v) - data.p[2]) < 5 * 0.1 * 1.2533 / np.sqrt(20000)


def test_dump_roundtrip_and_absent(tmp_path):
    v = UserValues(np.array([[0, 2, ABSENT], [1, 1, 1]]), domain_size=3, labels=["a", "b", "c"], user_ids=["x", "y", "z"],
                   slot_seconds=60, start=1.2e9, name="t")
    v.save(tmp_path / "d.npz")
    counts, back = load_input(tmp_path / "d.npz")
    assert counts.tolist() == [[1, 0, 1], [0, 3, 0]]
    assert back.labels == ["a", "b", "c"] and back.user_ids == ["x", "y", "z"] and back.slot_seconds == 60


def test_user_values_validate_domain():
    with pytest.raises(ParameterError):
        UserValues(np.array([[0, 3]]), domain_size=3)
    with pytest.raises(ParameterError):
        synthetic("nope", 10, 10)


def test_a_dump_read_again_comes_from_memory_until_its_file_changes(tmp_path):
    path = tmp_path / "d.npz"
    UserValues(np.array([[0, 1], [1, 1]]), domain_size=2).save(path)
    first = load_dump(path)
    assert load_dump(path) is first and not first.values.flags.writeable
    counts, values = load_input(path)
    assert values is first and counts.tolist() == [[1.0, 1.0], [0.0, 2.0]] and not counts.flags.writeable
    UserValues(np.array([[0, 0, 0]]), domain_size=2).save(path)
    assert load_dump(path).values.tolist() == [[0, 0, 0]]
    with pytest.raises(ParameterError, match="not found"):
        load_dump(tmp_path / "missing.npz")


@pytest.mark.parametrize("domain_size", [1, 2, 8, 9, 40])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int64])
def test_histograms_count_every_row_by_value_in_either_path(domain_size, dtype):
    # Domains of up to 8 values are counted value by value, larger ones by one bincount: both must
    # equal a plain per-row count, with absent users ignored (unsigned values have none).
    rng = np.random.default_rng(domain_size)
    low = 0 if np.dtype(dtype).kind == "u" else ABSENT
    values = rng.integers(low, domain_size, (30, 200)).astype(dtype)
    expected = np.array([[int((row == v).sum()) for v in range(domain_size)] for row in values], dtype=np.int64)
    counts = histograms(values, domain_size)
    assert counts.dtype == np.int64 and np.array_equal(counts, expected)
