"""The index API the query service calls: validation, state round trips, Mode A's standard error."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.decayed.helpers import zero_noise
from wevent.core.decayed import RTPDMM, CombinedIndex, ReleaseIndex, host_epsilon, restore_index
from wevent.core.randomness import DerivedRandomness, SecretKey
from wevent.core.validation import ParameterError


def private(**overrides):
    params = dict(epsilon=1.0, window=10, decay=0.9, block_size=4, randomness=DerivedRandomness(SecretKey.from_seed(3)))
    params.update(overrides)
    return RTPDMM(**params)


# --- query validation: one-line reasons ------------------------------------------------------
@pytest.fixture
def filled():
    index = private()
    for t in range(1, 26):
        index.insert(float(t))
    return index  # at slot 25, window 16..25


@pytest.mark.parametrize("args, reason", [
    ((20, 19), "from slot 20 is after to slot 19"),
    ((15, 20), "outside the window: slots 16..25"),
    ((20, 26), "outside the window: slots 16..25"),
    ((0, 3), "outside the window"),
    ((16, 25, 0.0), r"decay must be a number in \(0, 1\], got 0.0"),
    ((16, 25, 1.5), r"decay must be a number in \(0, 1\]"),
    ((16, 25, -0.2), r"decay must be a number in \(0, 1\]"),
    ((16, 25, float("nan")), r"decay must be a number in \(0, 1\]"),
    ((16, 25, True), r"decay must be a number in \(0, 1\]"),
    ((16, 25, "0.9"), r"decay must be a number in \(0, 1\]"),
    ((16, 25, 0.8), "decay 0.8 is not served: this index was built for decay 0.9"),
    ((16.5, 25), "from must be an integer slot"),
    (("16", 25), "from must be an integer slot"),
    ((16, None), "to must be an integer slot"),
])
def test_bad_queries_get_a_one_line_reason(filled, args, reason):
    with pytest.raises(ParameterError, match=reason) as info:
        filled.query(*args)
    assert "\n" not in str(info.value)


def test_good_queries(filled):
    answer, standard_error = filled.query(16, 25)
    assert answer.shape == standard_error.shape == (1,)
    assert (filled.query(16, 25, 0.9)[0] == answer).all()
    assert (filled.query(16.0, 25.0, 0.9 * (1 + 1e-14))[0] == answer).all()  # the decay, up to representation
    assert (filled.query(np.int64(16), np.int64(25))[0] == answer).all()


def test_an_empty_index_refuses_queries():
    with pytest.raises(ParameterError, match="no slot ingested yet"):
        ReleaseIndex(5, 1.0).query(1, 1)


@pytest.mark.parametrize("make, reason", [
    (lambda: ReleaseIndex(0, 0.9), "window W must be an integer >= 1"),
    (lambda: ReleaseIndex(8, 1.01), r"decay must be a number in \(0, 1\]"),
    (lambda: ReleaseIndex(8, 0.9, block_size=6), "block size L must be a power of two"),
    (lambda: ReleaseIndex(8, 0.9, bins=0), "domain size d"),
    (lambda: private(epsilon=0), "epsilon must be a finite number >= 1e-290"),
    (lambda: private(epsilon=1e-320), "epsilon must be a finite number >= 1e-290, got 1e-320"),
    (lambda: private(neighbours=3), "neighbours must be 1"),
    (lambda: private(privacy_window=0), "privacy window w"),
    (lambda: private(contribution_bound=-1), "contribution bound"),
    (lambda: private(lambda_variant="best"), "lambda_variant must be one of none, paper, cai"),
    (lambda: private(noise_mode="loose"), "noise_mode must be one of exact, paper_literal"),
    (lambda: private(noise_mode="paper_literal", decay=0.01), "not private for decay 0.01: the exact sensitivity"),
])
def test_bad_parameters(make, reason):
    with pytest.raises(ParameterError, match=reason):
        make()


def test_paper_literal_holds_for_the_undecayed_tree_at_any_decay():
    """With λ ≡ 1 the exact Δ_L = Σ p^(2^b - 1) <= H always, so paper_literal is private."""
    assert private(noise_mode="paper_literal", decay=0.05, lambda_variant="none").sensitivity == 3


# --- insert validation -----------------------------------------------------------------------
def test_bad_inserts():
    index = ReleaseIndex(6, 0.9, bins=2)
    with pytest.raises(ParameterError, match="needs its noise variance"):
        index.insert([1.0, 2.0])
    with pytest.raises(ParameterError, match="finite and >= 0"):
        index.insert([1.0, 2.0], variance=-1.0)
    with pytest.raises(ParameterError, match="one number, got shape"):
        index.insert([1.0, 2.0], variance=[1.0, 2.0])
    with pytest.raises(ParameterError, match="2 bins"):
        index.insert([1.0, 2.0, 3.0], variance=1.0)
    with pytest.raises(ParameterError, match="finite"):
        index.insert([1.0, math.nan], variance=1.0)
    with pytest.raises(ParameterError, match="differs from the last fresh release"):
        index.insert([1.0, 2.0], repeated=True)  # before any fresh release a repeat is r_0 = 0
    index.insert([0.0, 0.0], repeated=True)
    with pytest.raises(ParameterError, match="pass no variance"):
        index.insert([0.0, 0.0], variance=1.0, repeated=True)
    with pytest.raises(ParameterError, match="slot 5 is not the next slot: the index expects slot 2"):
        index.insert([1.0, 2.0], variance=1.0, slot=5)
    index.insert([1.0, 2.0], variance=1.0, slot=2)
    assert index.slot == 2
    scalar = private()
    with pytest.raises(ParameterError, match="finite"):
        scalar.insert(math.inf)
    assert scalar.insert([4.0]).shape == (1,)


def test_per_bin_variance():
    index = ReleaseIndex(4, 1.0, bins=3, per_bin_variance=True)
    index.insert([1.0, 2.0, 3.0], variance=[1.0, 4.0, 9.0])
    index.insert([1.0, 2.0, 3.0], repeated=True)
    index.insert([0.0, 0.0, 0.0], variance=2.0)  # one number is broadcast to every bin
    assert index.query(1, 3)[1].tolist() == pytest.approx(np.sqrt([4 + 2, 16 + 2, 36 + 2]).tolist())
    with pytest.raises(ParameterError, match="one number or one per bin"):
        index.insert([0.0, 0.0, 0.0], variance=[1.0, 2.0])


# --- Mode A standard error against a brute-force sum over groups ------------------------------
@settings(max_examples=40, deadline=None)
@given(
    window=st.integers(1, 12),
    log_block=st.integers(0, 4),
    decay=st.floats(0.3, 1.0),
    schedule=st.lists(st.tuples(st.booleans(), st.floats(0.0, 9.0)), min_size=1, max_size=40),
)
def test_release_index_variance_is_the_sum_over_groups(window, log_block, decay, schedule):
    index = ReleaseIndex(window, decay, block_size=1 << log_block)
    fresh_slot, group_of, variance_of = 0, [], {0: 0.0}  # group 0: repeats of r_0
    release = 0.0
    for t, (fresh, variance) in enumerate(schedule, start=1):
        if fresh:
            fresh_slot, release = t, float(t)
            variance_of[t] = variance
            index.insert(release, variance=variance)
        else:
            index.insert(release, repeated=True)
        group_of.append(fresh_slot)
        for l in range(index.oldest_slot, t + 1):
            for r in range(l, t + 1):
                weights = {}
                for i in range(l, r + 1):
                    weights[group_of[i - 1]] = weights.get(group_of[i - 1], 0.0) + decay ** (t - i)
                expected = sum(variance_of[g] * c * c for g, c in weights.items())
                assert index.query(l, r)[1][0] ** 2 == pytest.approx(expected, rel=1e-9, abs=1e-12)


# --- state: public values only, identical continuation ---------------------------------------
def continue_and_record(index, rows, queries_every=1):
    out = []
    for row in rows:
        released = index.insert(row) if isinstance(index, RTPDMM) else index.insert(*row)
        out.append(None if released is None else released.tolist())
        t = index.slot
        for l in range(index.oldest_slot, t + 1, queries_every):
            answer, standard_error = index.query(l, t)
            out.append((answer.tolist(), standard_error.tolist()))
    return out


@pytest.mark.parametrize("bins", [1, 3])
@pytest.mark.parametrize("codec", ["bytes", "json"])
def test_rtp_dmm_restores_mid_block_with_identical_continuation(bins, codec):
    rng = np.random.default_rng(1)
    rows = rng.poisson(7, (90, bins)).astype(float)
    key = SecretKey.from_seed(4)
    def make():
        return RTPDMM(0.7, 20, 0.97, bins=bins, block_size=16, privacy_window=3, lambda_variant="cai",
                      randomness=DerivedRandomness(key, "restore"))
    for cut in (37, 48, 63):  # pending ancestors at local 5, at a sealed boundary, at local 15
        straight, interrupted = make(), make()
        continue_and_record(straight, rows[:cut])
        continue_and_record(interrupted, rows[:cut])
        data = interrupted.to_bytes() if codec == "bytes" else interrupted.to_json()
        restored = restore_index(data, DerivedRandomness(key, "restore"))
        assert continue_and_record(restored, rows[cut:]) == continue_and_record(straight, rows[cut:])


@settings(max_examples=25, deadline=None)
@given(window=st.integers(1, 12), log_block=st.integers(0, 3), cut=st.integers(0, 30))
def test_any_cut_restores_identically(window, log_block, cut):
    rows = [float(x) for x in np.random.default_rng(cut).poisson(5, 40)]
    key = SecretKey.from_seed(cut)
    def make():
        return RTPDMM(1.0, window, 0.9, block_size=1 << log_block, randomness=DerivedRandomness(key))
    straight, interrupted = make(), make()
    expected = continue_and_record(straight, rows)
    head = continue_and_record(interrupted, rows[:cut])
    restored = restore_index(interrupted.to_bytes(), DerivedRandomness(key))
    assert head + continue_and_record(restored, rows[cut:]) == expected


def test_release_index_restores_with_identical_continuation():
    rng = np.random.default_rng(2)
    rows, release = [], np.zeros(4)
    for t in range(60):
        if t % 3 == 1:
            rows.append((release, None, True))
        else:
            release = rng.normal(50, 5, 4)
            rows.append((release, float(rng.uniform(1, 3)), False))
    as_args = [(release, variance) if not repeated else (release, None, True) for release, variance, repeated in rows]

    def feed(index, part):
        out = []
        for release, variance, *repeat in part:
            index.insert(release, variance, repeated=bool(repeat))
            t = index.slot
            out += [tuple(a.tolist() for a in index.query(l, t)) for l in range(index.oldest_slot, t + 1)]
        return out

    def make():
        return ReleaseIndex(13, 0.93, bins=4, block_size=8)
    straight, interrupted = make(), make()
    expected = feed(straight, as_args)
    head = feed(interrupted, as_args[:29])
    restored = restore_index(interrupted.to_json())
    assert head + feed(restored, as_args[29:]) == expected


def test_restoring_rtp_dmm_needs_its_randomness_and_state_has_no_key():
    index = private()
    index.insert(1.0)
    with pytest.raises(ParameterError, match="needs the stream's randomness"):
        restore_index(index.to_bytes())
    assert "key" not in index.to_json().lower()
    with pytest.raises(ParameterError, match="unknown index"):
        restore_index('{"index": "nope", "params": {}, "dynamic": {}}')


def test_state_holds_only_the_window():
    """About W + 2 prefix rows and at most one block of released nodes, whatever the stream length."""
    index = private(window=100, block_size=64)
    for t in range(1000):
        index.insert(1.0)
    dynamic = index.state_dict()["dynamic"]
    assert sum(len(rows) for rows in dynamic["prefixes"]) <= 100 + 2
    assert len(dynamic["nodes"]) == 1000 % 64


# --- first slot, Mode C wiring, budget split -------------------------------------------------
def test_first_slot_shifts_slot_numbers_only():
    late = ReleaseIndex(5, 0.8, first_slot=101)
    early = ReleaseIndex(5, 0.8)
    for t in range(12):
        late.insert(float(t), variance=1.0, slot=101 + t)
        early.insert(float(t), variance=1.0)
    assert late.slot == 112 and late.oldest_slot == 108
    for got, expected in zip(late.query(108, 111), early.query(8, 11)):
        assert got == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ParameterError, match="slots 108..112"):
        late.query(8, 11)


def test_combined_index_checks_its_parts():
    released, noisy = ReleaseIndex(10, 0.9, block_size=4), private()
    combined = CombinedIndex(released, noisy)
    released.insert(5.0, variance=4.0)
    with pytest.raises(ParameterError, match="mode A is at slot 1 and mode B at slot 0"):
        combined.query(1, 1)
    noisy.insert(5.0)
    answer, standard_error = combined.query(1, 1)
    assert standard_error[0] < min(released.query(1, 1)[1][0], noisy.query(1, 1)[1][0])
    with pytest.raises(ParameterError, match="differ in decay"):
        CombinedIndex(ReleaseIndex(10, 0.8, block_size=4), private())
    exact = ReleaseIndex(10, 0.9, block_size=4)
    exact.insert(5.0, variance=0.0)
    assert CombinedIndex(exact, noisy).query(1, 1) == (np.array([5.0]), np.array([0.0]))


def test_host_epsilon():
    assert host_epsilon(2.0, private(epsilon=0.5)) == 1.5
    with pytest.raises(ParameterError, match="leaves nothing"):
        host_epsilon(0.5, private(epsilon=0.5))


def test_zero_noise_twin_is_exact():
    noisy, clean = private(noise="laplace"), private(noise="laplace", randomness=zero_noise())  # exact arithmetic
    for t in range(1, 30):
        noisy.insert(float(t))
        clean.insert(float(t))
    assert noisy.query(20, 29)[1] == clean.query(20, 29)[1]
    assert clean.query(20, 29)[0][0] == pytest.approx(sum(0.9 ** (29 - i) * i for i in range(20, 30)), rel=1e-12)
