"""An exchangeable binary slot: hypergeometric counts of sampled users, exact for the mechanisms' requests."""

import math

import numpy as np
import pytest

from tests.core.local.conftest import make
from wevent.core.local.exchangeable import ExchangeableBinarySlot
from wevent.core.metrics import FREQUENCY_MRE_FLOOR, mre
from wevent.core.synthetic import synthetic
from wevent.core.validation import ParameterError

SE = 4


def test_sampled_requests_hold_hypergeometric_counts_given_the_earlier_ones():
    """Two disjoint requests of 300 and 500 of 2,000 users, 400 of them ones: the first holds
    Hypergeometric(400, 1600, 300), the second the same given the first's ones. Means within 4
    standard errors of the hypergeometric means, over 4,000 slots."""
    rng, slots = np.random.default_rng(5), 4000
    draws = []
    for _ in range(slots):
        slot = ExchangeableBinarySlot(2000, 400)
        first = slot.counts(np.arange(0, 600, 2), rng)[1]  # 300 users
        draws.append((first, slot.counts(np.arange(1000, 1500), rng)[1]))
    first, second = np.array(draws, dtype=float).T
    mean, variance = 300 * 0.2, 300 * 0.2 * 0.8 * (2000 - 300) / (2000 - 1)
    assert abs(first.mean() - mean) < SE * math.sqrt(variance / slots)
    assert abs(first.var(ddof=1) - variance) < SE * variance * math.sqrt(2 / (slots - 1))
    conditional = 500 * (400 - first) / 1700  # E[second | first]
    residual = second - conditional
    assert abs(residual.mean()) < SE * residual.std(ddof=1) / math.sqrt(slots)


def test_every_user_holds_the_slots_ones_and_an_overlap_is_refused():
    slot = ExchangeableBinarySlot(10, 4)
    rng = np.random.default_rng(0)
    assert slot.counts(None, rng).tolist() == [6, 4]
    assert slot.counts(np.array([1, 3, 5]), rng).sum() == 3
    assert slot.counts(None, rng).tolist() == [6, 4]  # every user again: exactly the slot's histogram
    with pytest.raises(ParameterError, match="earlier request"):
        slot.counts(np.array([0, 5]), rng)
    with pytest.raises(ParameterError):
        ExchangeableBinarySlot(10, 11)


@pytest.mark.parametrize("name", ["lpd", "lpa", "lpu"])
def test_a_population_method_errs_alike_on_values_and_on_their_counts(name):
    """The MRE of a run on a synthetic stream's values and on its exchangeable slots, over 60 seeds
    each: their means differ by less than 4 standard errors of the difference."""
    population, slots, window = 2000, 60, 5
    errors = {"values": [], "counts": []}
    for seed in range(60):
        stream = synthetic("lns", population, slots, seed=seed, step_std=0.02)
        truth = stream.counts / population
        for kind in errors:
            m = make(name, 1.0, window, population=population, seed=seed)
            rows = (stream.values_at(t) if kind == "values" else ExchangeableBinarySlot(population, k)
                    for t, k in enumerate(stream.ones, start=1))
            releases = np.array([m.step(row).release for row in rows])
            errors[kind].append(mre(releases, truth, FREQUENCY_MRE_FLOOR))
    values, counts = np.array(errors["values"]), np.array(errors["counts"])
    spread = math.sqrt(values.var(ddof=1) / values.size + counts.var(ddof=1) / counts.size)
    assert abs(values.mean() - counts.mean()) < SE * spread
