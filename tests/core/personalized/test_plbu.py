"""PLBU: each user's per-slot budget, unbiased counts, and the stated variance."""

import math

import numpy as np
import pytest

from pipeline.core.personalized import Requirements
from pipeline.core.personalized.plbu import PersonalizedLBU
from pipeline.core.validation import ParameterError


def test_every_window_of_a_user_spends_their_epsilon():
    requirements = Requirements([40, 80, 120], [1.0, 0.6, 0.8])
    plbu = PersonalizedLBU(requirements, 4, rng=np.random.default_rng(0))
    assert (plbu.slot_epsilons * requirements.windows) == pytest.approx(requirements.epsilons)


def test_grr_keeps_the_value_with_probability_p_i():
    n = 200_000
    requirements = Requirements(np.full(n, 2), np.full(n, 2.0))  # e = 1 per slot
    plbu = PersonalizedLBU(requirements, 5, rng=np.random.default_rng(1))
    values = np.zeros(n, dtype=np.int64)
    estimate = plbu.step(values)
    p = math.e / (math.e + 4)
    kept = (estimate[0] + plbu._offset) / plbu._weights[0]  # the reports equal to 0
    assert abs(kept / n - p) < 4 * math.sqrt(p * (1 - p) / n)


def test_counts_are_unbiased_with_the_stated_variance():
    """A bin no user holds: mean within 4 standard errors of 0, sample variance within 4 of its
    own standard deviations (normal approximation over 2,000 slots) of the stated variance."""
    rng = np.random.default_rng(2)
    windows = rng.choice([40, 80, 120], 3000)
    epsilons = rng.choice([0.6, 0.8, 1.0], 3000)
    plbu = PersonalizedLBU(Requirements(windows, epsilons), 3, rng=np.random.default_rng(3))
    values = np.where(np.arange(3000) < 1000, 0, 1)
    slots = 2000
    estimates = np.array([plbu.step(values) for _ in range(slots)])
    empty = estimates[:, 2]
    assert abs(empty.mean()) < 4 * math.sqrt(plbu.variance / slots)
    assert abs(empty.var(ddof=1) - plbu.variance) < 4 * plbu.variance * math.sqrt(2 / (slots - 1))
    # bin 0: its 1,000 holders add p_i (1 - p_i) w_i^2 instead of q_i (1 - q_i) w_i^2
    p, q, w = plbu._keep[:1000], plbu._other[:1000], plbu._weights[:1000]
    held_variance = plbu.variance + float(((p * (1 - p) - q * (1 - q)) * w**2).sum())
    assert abs(estimates[:, 0].mean() - 1000) < 4 * math.sqrt(held_variance / slots)


def test_values_outside_the_domain_are_refused():
    plbu = PersonalizedLBU(Requirements([2, 2], [1.0, 1.0]), 3, rng=np.random.default_rng(0))
    with pytest.raises(ParameterError):
        plbu.step(np.array([0, 3]))
    with pytest.raises(ParameterError):
        plbu.step(np.array([0]))
