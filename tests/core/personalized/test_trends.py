"""The synthetic generators the experiments use, and monotone error trends.

The trends are measured over 10 seeds on a small stream (n = 2000, T = 500). They are soft
(expected from the papers' figures, not theorems), so they are tested as statistics of the seeds
(:func:`assert_trend`): the whole range follows the trend on average, and no step goes against it
by more than 3 standard errors of its per-seed paired difference (a one-sided t test with 9
degrees of freedom, false alarm about 0.8% per step for a flat step). The personalized runs use
the papers' continuous Laplace noise, under which the papers measured them.
"""

from functools import lru_cache

import numpy as np
import pytest

from tests.conftest import derived
from wevent.core.central import BudgetDistribution
from wevent.core.personalized import PersonalizedBudgetAbsorption, PersonalizedBudgetDistribution, grouped
from wevent.core.synthetic import synthetic

USERS, SLOTS, SEEDS = 2000, 500, range(10)


# 12. data generators -----------------------------------------------------------------------------
def test_sin_and_log_closed_forms_and_tlns_range():
    for t in (1, 100, 1000):
        assert synthetic("sin", 10, 1000).p[t - 1] == pytest.approx(0.05 * np.sin(0.01 * t) + 0.075, abs=1e-15)
        assert synthetic("log", 10, 1000).p[t - 1] == pytest.approx(0.25 / (1 + np.exp(-0.01 * t)), abs=1e-15)
    p = synthetic("lns", 10, 10_000, seed=4).p
    assert p.min() >= 0 and p.max() <= 1
    data = synthetic("sin", 500, 20, seed=1)
    assert (data.counts.sum(axis=1) == 500).all()
    assert all(int(data.values_at(t).sum()) == data.counts[t - 1, 1] for t in (1, 7, 20))


# 17. monotone trends -----------------------------------------------------------------------------
def assert_trend(errors: np.ndarray) -> None:
    """``errors[i, s]``: the error at the i-th setting for seed s, expected not to increase with i."""
    steps = errors[:-1] - errors[1:]  # paired by seed: the seed's data, requirements and noise key
    standard_error = steps.std(axis=1, ddof=1) / np.sqrt(errors.shape[1])
    assert np.all(steps.mean(axis=1) > -3 * standard_error), (errors.mean(axis=1), standard_error)
    assert errors[0].mean() > errors[-1].mean(), errors.mean(axis=1)


@lru_cache(maxsize=None)
def stream(seed):
    data = synthetic("sin", USERS, SLOTS, seed=seed)
    return data.values(), data.counts


def personalized_mse(cls, epsilon, seed):
    values, counts = stream(seed)
    requirements = grouped(USERS, epsilon, 120, seed=seed)
    m = cls.for_requirements(requirements, 2, randomness=derived(seed), noise="laplace")
    releases = np.array([r.release for r in m.run(requirements.type_counts(row, 2) for row in values)])
    return float(np.mean((releases - counts) ** 2))


@pytest.mark.slow
@pytest.mark.parametrize("cls", [PersonalizedBudgetDistribution, PersonalizedBudgetAbsorption])
def test_error_does_not_increase_with_epsilon(cls):
    epsilons = [0.2, 0.4, 0.6, 0.8, 1.0]
    assert_trend(np.array([[personalized_mse(cls, eps, seed) for seed in SEEDS] for eps in epsilons]))


@pytest.mark.slow
def test_bd_error_does_not_decrease_with_window():
    windows = [40, 80, 120, 160, 200]
    errors = []
    for w in windows:
        errors.append([])
        for seed in SEEDS:
            counts = stream(seed)[1].astype(float)
            releases = np.array([r.release for r in BudgetDistribution(0.6, w, 2, randomness=derived(seed)).run(counts)])
            errors[-1].append(np.mean((releases - counts) ** 2))
    assert_trend(-np.array(errors))  # the error does not decrease with the window
