"""The baselines of Sun et al.'s comparison: LP (noisy answers) and EX (noisy dyadic blocks)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wevent.core.decayed.exact_sums import ExactDecayedSums
from wevent.core.decayed.interval_tree import IntervalTree
from wevent.core.decayed.lp_answer import LPAnswer
from wevent.core.validation import ParameterError

DECAY = 0.97


def _naive(values, l, r, decay):
    t = len(values)
    return sum(decay ** (t - i) * values[i - 1] for i in range(l, r + 1))


def test_exact_sums_equal_the_naive_decayed_sum():
    values = np.random.default_rng(1).integers(0, 1000, 300).astype(float)
    sums = ExactDecayedSums(DECAY)
    for v in values:
        sums.insert(v)
    for l, r in [(1, 300), (1, 1), (300, 300), (17, 250), (120, 121)]:
        assert sums.query(l, r) == pytest.approx(_naive(values, l, r, DECAY), rel=1e-10)


def test_interval_tree_blocks_tile_the_range_aligned_and_few():
    ex = IntervalTree(1.0, 100, DECAY, rng=np.random.default_rng(0))
    for _ in range(300):
        ex.insert(1.0)
    for l in range(201, 301):
        for r in range(l, 301, 7):
            blocks = ex.blocks(l, r)
            assert blocks[0][0] == l and blocks[-1][1] == r
            assert all(b[1] + 1 == c[0] for b, c in zip(blocks, blocks[1:]))
            for start, end in blocks:
                size = end - start + 1
                assert size & (size - 1) == 0 and (start - 1) % size == 0  # aligned dyadic blocks
            assert len(blocks) <= 2 * math.ceil(math.log2(100))


def test_interval_tree_charges_each_slot_once_per_level():
    """Event-level privacy: a slot lies in exactly one released block per level, of weight <= 1."""
    ex = IntervalTree(1.0, 128, DECAY, rng=np.random.default_rng(0))  # 128 slots: nothing left the window yet
    for _ in range(128):
        ex.insert(0.0)
    for slot in (1, 37, 64, 65, 128):
        containing = [level for level, released in enumerate(ex._released)
                      for end in released if end - (1 << level) < slot <= end]
        assert sorted(containing) == list(range(ex.levels))


def test_lp_sensitivity_is_the_weight_of_one_slot_over_its_window():
    lp = LPAnswer(1.0, 50, DECAY, rng=np.random.default_rng(0))
    assert lp.sensitivity == pytest.approx(sum(DECAY**k for k in range(50)))


def test_lp_answers_one_query_per_slot():
    lp = LPAnswer(1.0, 10, DECAY, rng=np.random.default_rng(0))
    lp.insert(5.0)
    lp.query(1, 1)
    with pytest.raises(ParameterError, match="one query per slot"):
        lp.query(1, 1)
    lp.insert(5.0)
    lp.query(1, 2)


@pytest.mark.parametrize("cls", [LPAnswer, IntervalTree])
def test_answers_are_unbiased_with_the_stated_variance(cls):
    """Over 4,000 seeds: mean error within 4 standard errors of 0, mean squared error within
    4 standard deviations of the stated variance (a Laplace square has variance 5 sigma^4)."""
    values = np.arange(1.0, 41.0)
    exact = _naive(values, 13, 37, DECAY)
    runs = 4000
    errors, variance = np.empty(runs), None
    for seed in range(runs):
        index = cls(0.5, 32, DECAY, rng=np.random.default_rng(seed))
        for v in values:
            index.insert(v)
        answer, standard_error = index.query(13, 37)
        errors[seed], variance = answer - exact, standard_error**2
    # an EX answer sums a few Laplace blocks: its fourth moment is at most a single Laplace's
    assert abs(errors.mean()) < 4 * math.sqrt(variance / runs)
    assert abs(np.mean(errors**2) - variance) < 4 * math.sqrt(5 / runs) * variance
