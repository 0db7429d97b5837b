"""The benchmark's central mechanisms (FAST_w, RescueDP, DSAT_w, PeGaSus, AdaPub, BD and BA with grouping).

A property test checks the exact (rational) window spend of each; statistical tests check, with
fixed seeds and tolerances derived from variance formulas, the property of each that its paper
makes checkable; deterministic tests check the groupings on constructed inputs.
"""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import derived
from wevent.core.central import (
    DSAT,
    AdaPub,
    FASTw,
    GroupedBudgetAbsorption,
    GroupedBudgetDistribution,
    PeGaSus,
    RescueDP,
)
from wevent.core.central.column_groups import ColumnGroupDissimilarity
from wevent.core.central.time_groups import DeviationGrouper

NEW = [FASTw, RescueDP, DSAT, PeGaSus, AdaPub, GroupedBudgetDistribution, GroupedBudgetAbsorption]


@st.composite
def scenarios(draw):
    cls = draw(st.sampled_from(NEW))
    epsilon = draw(st.floats(min_value=1e-3, max_value=20, allow_nan=False))
    window = draw(st.integers(1, 25))
    domain = draw(st.integers(1, 12))
    slots = draw(st.integers(1, 3 * window + 12))
    seed = draw(st.integers(0, 2**32 - 1))
    counts = np.random.default_rng(seed).poisson(draw(st.sampled_from([0.5, 20.0, 5000.0])), (slots, domain))
    script = draw(st.lists(st.sampled_from([None, True, False]), min_size=slots, max_size=slots))
    options = {"noise": draw(st.sampled_from(["discrete", "laplace"])), "decision_override": lambda t: script[t - 1]}
    if cls in (GroupedBudgetDistribution, GroupedBudgetAbsorption):
        options["groups"] = draw(st.integers(1, domain))
        options["period"] = draw(st.integers(1, 6))
    if cls is RescueDP:
        options["dynamic_grouping"] = draw(st.booleans())
        options["group_limit"] = 1e9  # every bin may join a group, so grouping runs often
    return cls, epsilon, window, domain, counts.astype(float), seed, options


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_no_window_spends_more_than_epsilon_in_exact_arithmetic(scenario):
    cls, epsilon, window, domain, counts, seed, options = scenario
    m = cls(epsilon, window, domain, randomness=derived(seed % 1000), **options)
    charges = [Fraction(r.eps1) + Fraction(r.eps2) for r in m.run(counts)]
    assert m.window_spend_bound <= epsilon
    for end in range(len(charges)):
        assert sum(charges[max(0, end - window + 1) : end + 1], Fraction(0)) <= Fraction(epsilon)


# --- FAST_w ----------------------------------------------------------------------------------
def test_fast_w_releases_a_blocks_first_slot_unbiased_and_samples_at_most_m_per_block():
    # A block's first slot releases c + Lap(1/eps_s) per bin: the mean residual over n values has
    # sd sqrt(2)/eps_s/sqrt(n) (Var Lap(b) = 2b^2); 5 sd bounds it.
    w, d, blocks = 20, 30, 60
    counts = np.full((w * blocks, d), 400.0)
    m = FASTw(1.0, w, d, randomness=derived(11), noise="laplace")
    results = m.run(counts)
    first = np.stack([results[b * w].release for b in range(blocks)]) - 400.0
    scale = 1.0 / m.sample_budget
    assert abs(first.mean()) <= 5 * math.sqrt(2) * scale / math.sqrt(first.size)
    per_block = [sum(r.published for r in results[b * w : (b + 1) * w]) for b in range(blocks)]
    assert max(per_block) == m.samples_per_block == 3


# --- RescueDP ----------------------------------------------------------------------------------
def test_rescuedp_samples_are_unbiased_with_the_slots_noise_scale():
    # With Q large the filter's gain is 1 - O(R/Q), so a sampled bin's release is its noisy count:
    # residual * eps_t is Lap(1); over n residuals the mean has sd sqrt(2/n) and |.| has mean 1, sd 1.
    d, T = 40, 300
    counts = np.random.default_rng(5).poisson(300, (T, d)).astype(float)
    m = RescueDP(1.0, 10, d, dynamic_grouping=False, process_noise=1e12, randomness=derived(12), noise="laplace")
    scaled = []
    for row in counts:
        before = m.next_sample.copy()
        r = m.step(row)
        if r.published:
            sampled = before <= r.slot
            scaled.append((r.release[sampled] - row[sampled]) * r.eps2)
    pooled = np.concatenate(scaled)
    assert pooled.size > 2000
    assert abs(pooled.mean()) <= 5 * math.sqrt(2 / pooled.size)
    assert abs(np.abs(pooled).mean() - 1.0) <= 5 / math.sqrt(pooled.size)


def test_rescuedp_groups_bins_that_move_together_and_keeps_the_others_apart():
    m = RescueDP(1.0, 10, 6, randomness=derived(0))
    m.samples[:] = m.history
    m.sampled_releases[:] = [[1, 2, 3], [1, 2, 3.5], [2, 3, 4], [3, 2, 1], [40, 41, 42], [5, 5, 5]]
    groups = sorted(sorted(g.tolist()) for g in m._groups(np.arange(6)))
    # 0, 1 and 2 rise together; 3 falls (correlation -1); 4 is predicted above tau_1 = 30; 5 is
    # constant (no correlation is defined).
    assert groups == [[0, 1, 2], [3], [4], [5]]
    assert sorted(sorted(g.tolist()) for g in RescueDP(1.0, 10, 6, dynamic_grouping=False)._groups(np.arange(6))) == [
        [i] for i in range(6)]


# --- DSAT_w ----------------------------------------------------------------------------------
def test_dsat_publishes_at_most_c_per_window_with_lap_one_over_eps2():
    # |residual| * eps2 at a publication is Exponential(1): mean 1, sd 1 over n values.
    rng = np.random.default_rng(3)
    T, d, w = 3000, 30, 20
    counts = rng.poisson(rng.uniform(200, 2000, d), (T, d)).astype(float)
    m = DSAT(1.0, w, d, randomness=derived(3), noise="laplace")
    results = m.run(counts)
    published = np.array([r.published for r in results])
    assert np.convolve(published, np.ones(w))[:T].max() <= m.cutoff == 3
    pooled = np.concatenate([np.abs(r.release - counts[i]) * r.eps2 for i, r in enumerate(results) if r.published])
    assert pooled.size > 1000
    assert abs(pooled.mean() - 1.0) <= 5 / math.sqrt(pooled.size)


# --- PeGaSus and AdaPub's grouper ----------------------------------------------------------------
def test_a_constant_count_fails_its_test_at_the_rate_of_the_noise_difference():
    # With groups of at most 2 slots every group holds exactly one test, with its own rho and nu
    # (Laplace, scale b = 3/eps): the test fails iff nu - rho >= theta (the deviation of equal counts
    # is 0), P = (2 + theta/b) exp(-theta/b) / 4 for the difference of two Laplace(b). Tests are
    # independent: the failure count is binomial, 5 sd bounds its share.
    eps, theta, d, T = 0.3, 12.0, 50, 800
    b = 3 / eps
    expected = (2 + theta / b) * math.exp(-theta / b) / 4
    grouper = DeviationGrouper(d, limit=2, epsilon=eps, noise="laplace")
    randomness, tests, fails = derived(21), 0, 0
    constant = np.full(d, 7.0)
    for slot in range(1, T + 1):
        testing = grouper.open & (grouper.sizes < grouper.limit)
        grouper.step(slot, constant, constant, np.full(d, theta), randomness)
        tests += int(testing.sum())
        fails += int((testing & ~grouper.open).sum())
    assert tests > 15_000
    assert abs(fails / tests - expected) <= 5 * math.sqrt(expected * (1 - expected) / tests)


def test_pegasus_median_of_a_group_is_unbiased_for_a_constant_stream():
    # Each release is the median of symmetric noise around the count; groups restart every
    # max_group slots at most, so the T releases of a bin form at least T/L independent blocks; the
    # median of Laplace noise has at most the Laplace variance 2 b^2, so the mean residual over the
    # d * T releases has sd at most sqrt(2) b sqrt(L / (d T)).
    d, T, w = 40, 400, 4
    m = PeGaSus(1.0, w, d, max_group=8, randomness=derived(22), noise="laplace")
    releases = np.stack([r.release for r in m.run(np.full((T, d), 250.0))]) - 250.0
    b = 1.0 / m.eps_p
    assert abs(releases.mean()) <= 5 * math.sqrt(2) * b * math.sqrt(8 / (d * T))
    assert np.abs(releases).mean() < b  # smoothing beats the perturber's own error (mean |Lap(b)| = b)


def test_adapub_sums_bins_with_equal_releases_and_divides_the_noise_by_their_number():
    # Slot 1 publishes every bin alone; its releases differ, but the pivots fall between them only
    # when one lands there, and once a slot groups all d bins their releases are equal, so every later
    # slot groups them too: each release is c + Lap(1/eps_p)/d, the same in every bin, and |residual|
    # has mean 1/(d eps_p), sd the same.
    d, T = 8, 2000
    m = AdaPub(1.0, 5, d, pivots=20, max_group=1, randomness=derived(23), noise="laplace")
    releases = np.stack([r.release for r in m.run(np.full((T, d), 90.0))])
    merged = np.flatnonzero((releases == releases[:, :1]).all(axis=1))
    assert merged.size and (np.diff(merged) == 1).all() and merged[-1] == T - 1  # once merged, merged for good
    tail = releases[merged, 0] - 90.0
    scale = 1.0 / (d * m.eps_p)
    assert tail.size > T - 50
    assert abs(np.abs(tail).mean() - scale) <= 5 * scale / math.sqrt(tail.size)


# --- BD and BA with grouping ---------------------------------------------------------------------
def test_the_partition_follows_the_rms_of_the_releases():
    m = ColumnGroupDissimilarity(1.0, 4, 6, groups=2, period=2)
    assert m.group_of.tolist() == [0, 0, 0, 1, 1, 1]
    for slot in (1, 2):
        m.observe(slot, np.array([50.0, 1, 60, 2, 70, 3]))
    assert m.group_of.tolist() == [1, 0, 1, 0, 1, 0]


@pytest.mark.parametrize("cls", [GroupedBudgetDistribution, GroupedBudgetAbsorption])
def test_grouped_publications_have_lap_one_over_eps2_on_the_groups_that_publish(cls):
    # |residual| * eps2 on the bins of publishing groups is Exponential(1): mean 1, sd 1 over n.
    rng = np.random.default_rng(4)
    T, d, w = 2000, 40, 8
    counts = rng.poisson(np.repeat([20.0, 3000.0], d // 2), (T, d)).astype(float)
    m = cls(1.0, w, d, groups=2, randomness=derived(4), noise="laplace")
    pooled, partial = [], 0
    for row in counts:
        before = m.last_release
        r = m.step(row)
        if r.published:
            fresh = r.release != before
            partial += int(not fresh.all())
            pooled.append(np.abs(r.release[fresh] - row[fresh]) * r.eps2)
    values = np.concatenate(pooled)
    assert values.size > 1000 and partial > 0  # some slots publish one group only
    assert abs(values.mean() - 1.0) <= 5 / math.sqrt(values.size)

