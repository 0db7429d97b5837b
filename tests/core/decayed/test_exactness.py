"""Decayed range indexes: exact answers with noise off, node layout,
O(1) operation counts, privacy hygiene and memory recycling."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import CountingNoise
from tests.core.decayed.helpers import exact_prefixes, naive_decayed, node_range, zero_noise
from wevent.core.decayed import RTPDMM, DecayedFenwick, ReleaseIndex
from wevent.core.decayed.tree import decomposition, height_of
from wevent.core.randomness import SecretKey
from wevent.core.validation import ParameterError

EXACT_DECAYS = {1.0: Fraction(1), 0.5: Fraction(1, 2)}


@st.composite
def streams(draw, max_window=24, max_block=32):
    window = draw(st.integers(1, max_window))
    block_size = 1 << draw(st.integers(0, max_block.bit_length() - 1))
    length = draw(st.integers(1, 2 * window + 2 * block_size + 3))
    data = draw(st.lists(st.integers(0, 1 << 10), min_size=length, max_size=length))
    return window, block_size, data


def all_ranges(t, window):
    for l in range(max(1, t - window + 1), t + 1):
        for r in range(l, t + 1):
            yield l, r


# 2. prefix and range: exact with noise off ------------------------------------------------------
def check_exact_answers(stream, decay):
    """p = 1 (integers) and p = 1/2 (dyadic rationals, L <= 32 and W <= 24 keep every partial sum
    within 53 bits): the answer is exactly the naive sum, for every range of every time,
    including warm-up (t < W) and windows over 2 and 3+ blocks (L < W)."""
    window, block_size, data = stream
    index = ReleaseIndex(window, decay, block_size=block_size)
    # noise="laplace" with zero noise: the store's exact arithmetic (discrete noise snaps nodes to a grid)
    private = RTPDMM(1.0, window, decay, block_size=block_size, noise="laplace", randomness=zero_noise())
    for t, value in enumerate(data, start=1):
        index.insert(float(value), variance=0.0)
        private.insert(float(value))
        exact = exact_prefixes(data, EXACT_DECAYS[decay], t)
        for l, r in all_ranges(t, window):
            expected = float(exact[r] - exact[l - 1])
            assert index.query(l, r)[0][0] == expected
            assert private.query(l, r)[0][0] == expected


@settings(max_examples=20, deadline=None)
@given(stream=streams(), decay=st.sampled_from([1.0, 0.5]))
def test_every_in_window_range_equals_the_naive_decayed_sum_exactly(stream, decay):
    check_exact_answers(stream, decay)


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(stream=streams(), decay=st.sampled_from([1.0, 0.5]))
def test_every_in_window_range_equals_the_naive_decayed_sum_exactly_many(stream, decay):
    check_exact_answers(stream, decay)


@settings(max_examples=40, deadline=None)
@given(stream=streams(max_window=40, max_block=64), decay=st.floats(0.05, 1.0))
def test_every_in_window_range_matches_the_naive_sum_for_any_decay(stream, decay):
    window, block_size, data = stream
    index = ReleaseIndex(window, decay, bins=2, block_size=block_size)
    rows = np.column_stack([data, np.arange(len(data))]).astype(float)
    for t, row in enumerate(rows, start=1):
        index.insert(row, variance=0.0)
    t = len(rows)
    # An answer is at most a difference of prefixes, each a sum of at most W + 2L terms p^k·D <= max|D|:
    # rounding is a few ulps of that magnitude, far below 1e-12 of it.
    scale = (window + 2 * block_size) * (np.abs(rows).max() + 1)
    for l, r in all_ranges(t, window):
        np.testing.assert_allclose(index.query(l, r)[0], naive_decayed(rows, decay, l, r, t), rtol=0, atol=1e-12 * scale)


# 1. exact tree contents ------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(stream=streams(max_window=8, max_block=32), decay=st.sampled_from([1.0, 0.5, 0.9]))
def test_released_nodes_hold_their_decayed_range_after_every_insert(stream, decay):
    window, block_size, data = stream
    index = RTPDMM(1.0, window, decay, block_size=block_size, noise="laplace", randomness=zero_noise())
    for t, value in enumerate(data, start=1):
        index.insert(float(value))
        block, local = divmod(t - 1, block_size)
        if local + 1 == block_size:
            continue  # sealed: node values are freed (checked below)
        for k in range(1, local + 2):
            expected = sum(Fraction(decay) ** (k - j) * data[block * block_size + j - 1] for j in node_range(k))
            got = index.node(block * block_size + k)[0]
            if decay in EXACT_DECAYS:
                assert got == expected
            else:
                assert got == pytest.approx(float(expected), rel=1e-12)


# 3. the paper's example ------------------------------------------------------------------------
PAPER_DATA = (1, 3, 5, 2, 4, 7, 6)


def paper_store(p):
    store = DecayedFenwick(p, window=7, block_size=4)
    nodes = [float(store.insert(float(x))) for x in PAPER_DATA]
    return store, nodes


def test_paper_example_undecayed():
    store, nodes = paper_store(1.0)
    assert nodes == [1, 4, 5, 11, 4, 11, 6]
    assert [store.decayed_sum(1, r, t=r) for r in range(1, 5)] == [1, 4, 9, 11]  # P_0
    assert [store.decayed_sum(5, r, t=r) for r in range(5, 8)] == [4, 11, 17]  # P_1 (block-local)


@pytest.mark.parametrize("p", [0.3, 0.5, 0.9995, 1.0])
def test_paper_example_symbolic_nodes(p):
    _, nodes = paper_store(p)
    assert nodes[1] == pytest.approx(p + 3, rel=1e-12)
    assert nodes[3] == pytest.approx(p**3 + 3 * p**2 + 5 * p + 2, rel=1e-12)
    assert nodes[5] == pytest.approx(4 * p + 7, rel=1e-12)


def test_paper_example_half():
    store, nodes = paper_store(0.5)
    assert nodes[3] == 5.375
    assert store.decayed_sum(1, 3, t=3) == 6.75
    assert store.decayed_sum(2, 5) == 1.65625
    assert store.noise_terms(2, 5)[0].tolist() == [1, 4, 5]  # S_1, S_4, S_5 only


# 9. node count, and the noise layout checked by injecting unit noise ---------------------------
@settings(max_examples=30, deadline=None)
@given(stream=streams(max_window=20, max_block=16), decay=st.floats(0.3, 1.0))
def test_noise_terms_are_what_the_answer_carries(stream, decay):
    window, block_size, data = stream
    n = len(data)
    values = np.array(data, dtype=float)

    def store_with(noise_slot):
        store = DecayedFenwick(decay, window, block_size)
        for i in range(1, n + 1):
            store.insert(values[i - 1], 1.0 if i == noise_slot else None)
        return store

    clean = store_with(None)
    ranges = list(all_ranges(n, window))
    coefficients = np.zeros((len(ranges), n))
    for slot in range(max(1, n - window - 2 * block_size), n + 1):  # older nodes cannot matter
        noisy = store_with(slot)
        for q, (l, r) in enumerate(ranges):
            coefficients[q, slot - 1] = noisy.decayed_sum(l, r) - clean.decayed_sum(l, r)
    height = height_of(block_size)
    for q, (l, r) in enumerate(ranges):
        positions, terms = clean.noise_terms(l, r)
        injected = np.zeros(n)
        injected[positions - 1] = terms
        # the injected difference is p^k ± rounding of the prefix magnitudes
        np.testing.assert_allclose(coefficients[q], injected, rtol=0, atol=1e-9 * (1 + values.sum()))
        between = max(0, (r - 1) // block_size - (l - 1) // block_size - 1)
        assert len(positions) <= 2 * height + between


@settings(max_examples=40, deadline=None)
@given(stream=streams(max_window=30, max_block=32), decay=st.floats(0.2, 1.0), seed=st.integers(0, 1000))
def test_o1_variance_equals_the_sum_over_the_noise_terms(stream, decay, seed):
    window, block_size, data = stream
    node_variance = np.random.default_rng(seed).uniform(0.1, 10.0, block_size + 1)
    store = DecayedFenwick(decay, window, block_size, node_variance=node_variance)
    for value in data:
        store.insert(float(value))
    for l, r in all_ranges(store.time, window):
        positions, coefficients = store.noise_terms(l, r)
        expected = np.sum(coefficients**2 * node_variance[(positions - 1) % block_size + 1])
        # the O(1) form subtracts prefix variances of at most H terms: rounding ~H ulps, far below 1e-9
        assert store.noise_variance(l, r) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("block_size", [4, 16, 64])
def test_prefix_inside_one_block_touches_popcount_nodes(block_size):
    store = DecayedFenwick(0.9, 2 * block_size, block_size)
    for _ in range(2 * block_size):
        store.insert(1.0)
    for local in range(1, block_size + 1):
        positions, _ = store.noise_terms(block_size + 1, block_size + local)
        assert len(positions) == bin(local).count("1")
        assert (positions - block_size).tolist() == sorted(decomposition(local))


# 10. O(1) behaviour --------------------------------------------------------------------------
def test_an_insert_updates_at_most_one_parent_and_draws_once():
    block_size = 16
    randomness = CountingNoise(SecretKey.from_seed(3))
    index = RTPDMM(1.0, 40, 0.9, bins=3, block_size=block_size, randomness=randomness)
    counter = index.node_noise  # the node noise has a derived stream of its own
    rng = np.random.default_rng(0)
    for t in range(1, 3 * block_size + 1):
        local = (t - 1) % block_size + 1
        before = None if local == 1 else index._store._nodes.copy()
        index.insert(rng.poisson(5, 3).astype(float))
        assert counter.publication_slots == list(range(1, t + 1))  # exactly one draw per insert
        if before is None or local == block_size:
            continue
        changed = set(np.flatnonzero((index._store._nodes != before).any(axis=1)).tolist())
        parent = local + (local & -local)
        assert changed == ({local, parent} if parent <= block_size else {local})


class CountingReads(np.ndarray):
    reads = 0

    def __getitem__(self, item):
        CountingReads.reads += 1
        return super().__getitem__(item)


def test_a_query_reads_a_constant_number_of_prefixes_when_w_le_l_plus_1():
    block_size = 64
    store = DecayedFenwick(0.99, block_size + 1, block_size)
    for _ in range(3 * block_size + 7):
        store.insert(1.0)
    store._prefixes = [prefix.view(CountingReads) for prefix in store._prefixes]
    t = store.time
    most = 0
    for l, r in all_ranges(t, block_size + 1):
        CountingReads.reads = 0
        store.decayed_sum(l, r)
        most = max(most, CountingReads.reads)
    assert most == 3


# 11. post-processing and privacy hygiene ----------------------------------------------------
def test_queries_neither_draw_nor_change_any_release():
    def run(queries_per_slot):
        randomness = CountingNoise(SecretKey.from_seed(5))
        index = RTPDMM(1.0, 20, 0.95, bins=2, block_size=8, randomness=randomness)
        released, answers = [], []
        for t in range(1, 41):
            released.append(index.insert([t % 7, t % 3]))
            for q in range(queries_per_slot):
                l = max(1, t - 19) + q % min(t, 20)
                answers.append(index.query(l, t))
        return index, released, answers

    quiet, quiet_released, _ = run(0)
    busy, busy_released, busy_answers = run(15)
    assert len(busy_answers) == 600
    assert all((a == b).all() for a, b in zip(quiet_released, busy_released))
    assert quiet.node_noise.publication_slots == busy.node_noise.publication_slots == list(range(1, 41))
    assert quiet.node_noise._bits.state == busy.node_noise._bits.state
    assert (quiet.query(21, 40)[0] == busy.query(21, 40)[0]).all()


def test_unreleased_nodes_are_not_readable_and_released_ones_do_not_change():
    index = RTPDMM(1.0, 16, 0.9, block_size=16, randomness=CountingNoise(SecretKey.from_seed(1)))
    for t in range(1, 6):
        index.insert(float(t))
    with pytest.raises(ParameterError, match="not released"):
        index.node(6)  # node 6 already holds a partial sum pushed by node 5
    assert index.node(4) == index.node(4)
    assert index.query(2, 5)[0] == index.query(2, 5)[0]
    assert len(index.state_dict()["dynamic"]["nodes"]) == 5  # the state holds released nodes only
    for _ in range(11):
        index.insert(1.0)
    with pytest.raises(ParameterError, match="sealed"):
        index.node(3)


# 13. memory recycling ------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(stream=streams(max_window=20, max_block=16), decay=st.floats(0.3, 1.0))
def test_freeing_expired_blocks_changes_no_answer(stream, decay):
    window, block_size, data = stream
    recycled = DecayedFenwick(decay, window, block_size, node_variance=np.ones(block_size + 1))
    keeps_all = DecayedFenwick(decay, len(data), block_size, node_variance=np.ones(block_size + 1))
    for t, value in enumerate(data, start=1):
        recycled.insert(float(value))
        keeps_all.insert(float(value))
        oldest = max(1, t - window + 1)
        assert recycled._first_block == (oldest - 1) // block_size  # everything older is freed
        assert len(recycled._prefixes) <= -(-(window - 1) // block_size) + 1
        for l, r in all_ranges(t, window):
            assert recycled.decayed_sum(l, r) == keeps_all.decayed_sum(l, r)
            assert recycled.noise_variance(l, r) == keeps_all.noise_variance(l, r)
