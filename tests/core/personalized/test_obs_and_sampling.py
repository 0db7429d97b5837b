"""OBS and the Sampling Mechanism (Du et al. 2025, Algorithm 1 and Section 4.1): the paper's examples and SM's tightness."""

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.conftest import derived
from wevent.core.personalized import RequirementTypes, candidate_errors, keep_probabilities, obs, sample_counts
from wevent.core.personalized.dissimilarity import DissimilarityCalculation
from wevent.core.personalized.sampling import log_expm1
from wevent.core.randomness import Phase


def naive_errors(budgets, sizes, sensitivity=1.0):
    """err(theta) for every distinct budget, straight from Section 4.1's definition (expm1 ratios, O(m^2))."""
    values = sorted(set(budgets))
    out = []
    for theta in values:
        variance = bias = 0.0
        for v in values:
            if v < theta:
                n = sum(s for b, s in zip(budgets, sizes) if b == v)
                p = math.expm1(v) / math.expm1(theta)
                variance += n * p * (1 - p)
                bias += n * (1 - p)
        out.append(variance + bias**2 + 2 * sensitivity**2 / theta**2)
    return values, out


# 1. Example 2 -----------------------------------------------------------------------------------
def test_obs_example_2():
    budgets = np.array([0.1, 0.4, 0.4, 0.1, 0.4, 0.4, 0.8, 0.8, 0.8, 0.4])  # the paper's order
    selection = obs(budgets)
    assert selection.theta == 0.4
    assert selection.error == pytest.approx(15.308424246782675, abs=1e-9)
    assert candidate_errors(budgets).errors == pytest.approx([200.0, 15.308424, 27.733024], abs=1e-6)


# 2. small populations ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "budgets, theta, error",
    [
        ([0.5] * 9 + [1.0], 0.5, 8.0),
        ([0.5] + [1.0] * 9, 1.0, 2.6224593312),
        ([0.5] * 5 + [1.0] * 5, 0.5, 8.0),
    ],
)
def test_obs_two_values(budgets, theta, error):
    selection = obs(np.array(budgets))
    assert selection.theta == theta and selection.error == pytest.approx(error, abs=1e-9)


@pytest.mark.parametrize("e, n", [(0.1, 1), (0.37, 25), (3.0, 1000), (1e6, 3)])
def test_obs_identical_budgets(e, n):
    selection = obs(np.full(n, e))
    assert selection.theta == e and selection.error == pytest.approx(2 / e**2, rel=1e-12)


def test_obs_counts_pool_equal_budgets_of_different_types():
    pooled = obs(np.array([0.1, 0.4, 0.8]), np.array([2, 5, 3]))
    split = obs(np.array([0.4, 0.1, 0.8, 0.4, 0.1]), np.array([3, 1, 3, 2, 1]))
    assert pooled == split


# 3. DC budgets of four types -------------------------------------------------------------------
def test_obs_on_dissimilarity_budgets_of_four_types():
    types = RequirementTypes([120, 120, 80, 40], [0.6, 0.8, 1.0, 0.6], [250] * 4)
    assert types.dissimilarity_budgets == pytest.approx([0.0025, 0.0033333333333, 0.00625, 0.0075], rel=1e-9)
    candidates = candidate_errors(types.dissimilarity_budgets, types.sizes)
    assert candidates.errors == pytest.approx([320000, 183962.938492, 122637.144285, 156666.991294], abs=1e-6)
    dc = DissimilarityCalculation(types, domain_size=2)
    assert dc.theta == types.dissimilarity_budgets[2] == pytest.approx(0.00625, rel=1e-12)
    assert obs(types.dissimilarity_budgets, types.sizes).error == pytest.approx(122637.144285, abs=1e-6)


# 4. Lemma 4.1 and agreement with the direct formula ------------------------------------------
budget_lists = st.lists(
    st.tuples(st.sampled_from([0.001, 0.0025, 0.01, 0.05, 0.1, 0.3, 0.4, 0.8, 1.0, 2.5, 7.0]), st.integers(1, 400)),
    min_size=1, max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(budget_lists)
def test_obs_lemma_4_1_bound_and_direct_formula(pairs):
    budgets = np.array([b for b, _ in pairs])
    sizes = np.array([s for _, s in pairs])
    selection = obs(budgets, sizes)
    n = sizes.sum()
    n_max = sizes[budgets == budgets.max()].sum()
    bound = min(2 / budgets.min() ** 2, (n - n_max) * (n - n_max + 0.25) + 2 / budgets.max() ** 2)
    assert selection.error <= bound * (1 + 1e-12)
    assert selection.error <= 2 / budgets.min() ** 2 * (1 + 1e-12)
    assert selection.theta in budgets.tolist()
    values, errors = naive_errors(budgets.tolist(), sizes.tolist())
    candidates = candidate_errors(budgets, sizes)
    assert candidates.values.tolist() == values
    assert candidates.errors == pytest.approx(errors, rel=1e-9)
    assert selection.theta == values[int(np.argmin(errors))]


def test_obs_sensitivity_scales_the_noise_term():
    candidates = candidate_errors(np.array([0.1, 0.4]), np.array([2, 5]), sensitivity=0.5)
    assert candidates.noise_errors == pytest.approx([2 * 0.25 / 0.01, 2 * 0.25 / 0.16])


def test_obs_skips_zero_budgets_and_has_no_selection_without_positive_ones():
    assert obs(np.array([0.0, 0.0])) is None
    assert obs(np.array([0.0, 0.3]), np.array([100, 1])).theta == 0.3
    assert obs(np.array([1e-200])) is None  # 2/theta^2 overflows: no finite error, no selection


def test_obs_with_huge_budgets_stays_finite():
    candidates = candidate_errors(np.array([1e3, 1e6, 2e6]), np.array([1, 1, 1]))
    assert np.all(np.isfinite(candidates.errors))
    # p of the smaller budgets is exp(-1e6)-small: both are dropped, so the bias is 2^2.
    assert candidates.sampling_errors[2] == pytest.approx(4.0)
    assert obs(np.array([1e3, 1e6, 2e6])).theta == 1e3


# I7: SM tightness ---------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(1e-6, 50.0), min_size=1, max_size=20), st.floats(1e-6, 50.0))
@example([1e-6], 1.0000000000000002e-06)  # one ulp below theta: the ratio rounds to 1
def test_sm_keep_probability_is_tight(budgets, theta):
    budgets = np.array(budgets)
    p = keep_probabilities(budgets, theta)
    below = budgets < theta
    assert np.all(p[~below] == 1.0)
    assert np.all((p[below] >= 0) & (p[below] < 1))
    assert 1 + p[below] * np.expm1(theta) == pytest.approx(np.exp(budgets[below]), rel=1e-12, abs=0)


def test_sm_keep_probability_for_huge_thresholds_and_zero_budgets():
    p = keep_probabilities(np.array([0.0, 699.0, 1e6 - 1, 1e6]), 1e6)
    assert p[0] == 0.0 and p[3] == 1.0
    assert p[2] == pytest.approx(math.exp(-1.0), rel=1e-12)  # exp(e - theta)(1-e^-e)/(1-e^-theta)
    assert 0.0 <= p[1] < 1e-300
    assert log_expm1(np.array([1e-300, 1e6]))[1] == 1e6


# 13. inclusion frequency -----------------------------------------------------------------------
def test_sm_inclusion_frequency():
    # 2000 slots x 50 users of budget 0.1 at theta 0.4: 10^5 coins, kept ~ Binomial(10^5, p).
    randomness = derived(13)
    budgets = np.array([0.1, 0.4, 0.9])
    p = keep_probabilities(budgets, 0.4)
    counts = np.array([[30, 20], [7, 3], [1, 0]])
    kept_low = 0
    for slot in range(1, 2001):
        kept = sample_counts(counts, p, randomness, slot, Phase.SAMPLE_PUBLICATION)
        assert np.array_equal(kept[1:], counts[1:])  # e >= theta: always kept
        kept_low += int(kept[0].sum())
    trials = 2000 * 50
    sigma = math.sqrt(trials * p[0] * (1 - p[0]))  # binomial standard deviation
    assert p[0] == pytest.approx(math.expm1(0.1) / math.expm1(0.4), rel=1e-12)
    assert abs(kept_low - trials * p[0]) < 5 * sigma


# 14. squared count error equals err_s ----------------------------------------------------------
def test_sm_count_error_matches_sampling_error():
    budgets, sizes, theta = np.array([0.1, 0.4, 0.8]), np.array([2, 5, 3]), 0.4
    err_s = candidate_errors(budgets, sizes).sampling_errors[1]
    assert err_s == pytest.approx(2.8084242468, abs=1e-9)
    p = keep_probabilities(budgets, theta)
    counts = sizes[:, None] * np.array([[1, 0]])
    trials = 20_000
    randomness = derived(14)
    sq = np.array([(counts.sum() - sample_counts(counts, p, randomness, t, Phase.SAMPLE_DISSIMILARITY).sum()) ** 2
                   for t in range(1, trials + 1)], dtype=float)
    # (K - n)^2 = D^2 with D ~ Binomial(2, q), q = 1 - p: Var(D^2) = E[D^4] - E[D^2]^2 from its pmf.
    q = 1 - p[0]
    pmf = np.array([(1 - q) ** 2, 2 * q * (1 - q), q**2])
    d = np.arange(3.0)
    var = (pmf * d**4).sum() - (pmf * d**2).sum() ** 2
    assert (pmf * d**2).sum() == pytest.approx(err_s, rel=1e-12)
    assert abs(sq.mean() - err_s) < 5 * math.sqrt(var / trials)


# 15. noise of SM_d and of DC ---------------------------------------------------------------------
def laplace_moments_ok(samples, b):
    """Mean 0 (sd sqrt(2/M) b) and mean square 2 b^2 (Var X^2 = 24b^4 - 4b^4 = 20 b^4), at 5 sigma."""
    m = samples.size
    return abs(samples.mean()) < 5 * math.sqrt(2 / m) * b and abs((samples**2).mean() - 2 * b * b) < 5 * math.sqrt(20 / m) * b * b


def test_publication_noise_has_variance_2_over_theta_squared():
    from wevent.core.personalized import PersonalizedBudgetAbsorption

    # One type with w = 1: every slot publishes one share, theta = eps/2; sampling keeps everyone.
    eps, d, slots = 0.8, 5, 4000
    m = PersonalizedBudgetAbsorption([1], [eps], [100], d, randomness=derived(15), decision_override=lambda s: True,
                                     noise="laplace")  # the paper's Lap(1/theta) law; the discrete one: tests/core/test_noise.py
    counts = np.array([[20, 20, 20, 20, 20]])
    noise = np.array([r.release - counts[0] for r in m.run([counts] * slots)])
    assert laplace_moments_ok(noise.ravel(), 1 / (eps / 2))


def test_dissimilarity_noise_has_variance_2_over_d_theta_squared():
    types = RequirementTypes([10], [1.0], [50])
    d = 4
    dc = DissimilarityCalculation(types, d, noise="laplace")
    counts = np.array([[10, 20, 0, 20]])
    randomness = derived(16)
    values = np.array([dc.measure(t, counts, counts[0].astype(float), randomness).value for t in range(1, 20_001)])
    assert laplace_moments_ok(values, 1 / (d * dc.theta))
