"""PLBU: each type's per-slot budget, GRR's keep probability, unbiased counts with the stated variance."""

import math

import numpy as np
import pytest

from wevent.core.personalized.plbu import PersonalizedLBU
from wevent.core.validation import ParameterError


def test_every_window_of_a_user_spends_their_epsilon():
    windows, epsilons = np.array([40, 80, 120]), np.array([1.0, 0.6, 0.8])
    plbu = PersonalizedLBU(windows, epsilons, [1, 1, 1], 4, rng=np.random.default_rng(0))
    assert (plbu.slot_epsilons * windows) == pytest.approx(epsilons)


@pytest.mark.parametrize("domain_size", [2, 5])
def test_grr_keeps_the_value_with_probability_p(domain_size):
    n = 200_000
    plbu = PersonalizedLBU([2], [2.0], [n], domain_size, rng=np.random.default_rng(1))  # e = 1 per slot
    counts = np.zeros((1, 1, domain_size), dtype=np.int64)
    counts[0, 0, 0] = n
    estimate = plbu.releases(counts)[0]
    p = math.e / (math.e + domain_size - 1)
    offset = n * plbu._other[0] * plbu._weights[0]
    kept = (estimate[0] + offset) / plbu._weights[0]  # the reports equal to 0
    assert abs(kept / n - p) < 4 * math.sqrt(p * (1 - p) / n)
    # the others spread uniformly over the d - 1 other values
    moved = (estimate[1:] + offset) / plbu._weights[0]
    share = (1 - p) / (domain_size - 1)
    assert np.all(np.abs(moved / n - share) < 4 * math.sqrt(share * (1 - share) / n))


@pytest.mark.parametrize("domain_size", [2, 3])
def test_counts_are_unbiased_with_the_stated_variance(domain_size):
    """The last bin, which no user holds: mean within 4 standard errors of 0, sample variance within
    4 of its own standard deviations (normal approximation over 2,000 slots) of the stated variance;
    bin 0's mean within 4 standard errors of its 1,000 holders."""
    windows, epsilons = np.array([40, 80, 120, 40]), np.array([0.6, 0.8, 1.0, 1.0])
    sizes = np.array([700, 800, 900, 600])
    plbu = PersonalizedLBU(windows, epsilons, sizes, domain_size, rng=np.random.default_rng(3))
    holders = np.array([300, 200, 250, 250])  # hold value 0; every other user holds value 1
    counts = np.zeros((2000, 4, domain_size), dtype=np.int64)
    counts[:, :, 0], counts[:, :, 1] = holders, sizes - holders
    estimates = plbu.releases(counts)
    slots = len(estimates)
    empty = estimates[:, -1] if domain_size > 2 else None
    if empty is not None:
        assert abs(empty.mean()) < 4 * math.sqrt(plbu.variance / slots)
        assert abs(empty.var(ddof=1) - plbu.variance) < 4 * plbu.variance * math.sqrt(2 / (slots - 1))
    p, q, w = plbu._keep, plbu._other, plbu._weights
    held_variance = plbu.variance + float((holders * (p * (1 - p) - q * (1 - q)) * w**2).sum())
    assert abs(estimates[:, 0].mean() - holders.sum()) < 4 * math.sqrt(held_variance / slots)
    assert abs(estimates[:, 0].var(ddof=1) - held_variance) < 4 * held_variance * math.sqrt(2 / (slots - 1))


def test_counts_outside_the_types_are_refused():
    plbu = PersonalizedLBU([2, 2], [1.0, 0.5], [1, 1], 3, rng=np.random.default_rng(0))
    with pytest.raises(ParameterError):
        plbu.releases(np.zeros((1, 3, 3), dtype=np.int64))  # three types, not two
    with pytest.raises(ParameterError):
        plbu.releases(np.array([[[2, 0, 0], [0, 0, 0]]]))  # two users of a type of one
