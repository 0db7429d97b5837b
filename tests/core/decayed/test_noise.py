"""RTP_DMM's noise laws, and the standard errors of Modes A and C.

Tolerances. d bins of one index are independent repetitions: every insert draws one Laplace
vector of d i.i.d. values. For n i.i.d. draws with kurtosis κ the sample variance has relative
standard deviation sqrt((κ - 1)/n); Laplace has κ = 6 and any sum of independent Laplace terms
has κ <= 6, so with n = 100,000 it is at most sqrt(5/1e5) = 0.71 %. A 3 % tolerance is therefore
more than 4.2 standard deviations (two-sided probability < 3e-5 per check).
"""

import numpy as np
import pytest
from scipy import stats

from tests.core.decayed.helpers import zero_noise
from wevent.core.decayed import RTPDMM, CombinedIndex, ReleaseIndex
from wevent.core.randomness import DerivedRandomness, SecretKey
from wevent.core.validation import ParameterError

REPEATS = 100_000
TOL = 0.03  # > 4.2 standard deviations of a sample variance from 1e5 draws (module docstring)


def twin_runs(data, **params):
    """The same RTP_DMM with noise (seeded) and without: released nodes and the two indexes."""
    noisy = RTPDMM(randomness=DerivedRandomness(SecretKey.from_seed(11), "law"), **params)
    clean = RTPDMM(randomness=zero_noise(), **params)
    released = np.array([noisy.insert(row) for row in data])
    exact = np.array([clean.insert(row) for row in data])
    return noisy, clean, released - exact


def window_ranges(index):
    t = index.slot
    return [(l, r) for l in range(index.oldest_slot, t + 1) for r in range(l, t + 1)]


# 8. noise law ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def law():
    rng = np.random.default_rng(2)
    data = np.repeat(rng.poisson(20, (21, 1)).astype(float), REPEATS, axis=1)  # the same stream in every bin
    return twin_runs(data, epsilon=1.0, window=12, decay=0.9, bins=REPEATS, block_size=8)


def test_node_errors_are_laplace_with_the_calibrated_scale(law):
    noisy, _, errors = law
    for t, error in enumerate(errors, start=1):
        scale = noisy.node_scales[(t - 1) % 8 + 1]
        assert error.var() == pytest.approx(2 * scale**2, rel=TOL)
        # KS at level 1e-3 per node (21 nodes): a fixed seed, so the outcome is deterministic
        assert stats.kstest(error / scale, "laplace").pvalue > 1e-3


def test_node_errors_are_uncorrelated(law):
    _, _, errors = law
    correlation = np.corrcoef(errors)
    off_diagonal = correlation[~np.eye(len(errors), dtype=bool)]
    # under independence each sample correlation has standard deviation 1/sqrt(n)
    assert np.abs(off_diagonal).max() < 4.5 / np.sqrt(REPEATS)


def test_answer_variance_matches_the_exact_formula(law):
    """Windows of W = 12 over blocks of L = 8 straddle two and three blocks."""
    noisy, clean, _ = law
    for l, r in window_ranges(noisy):
        answer, standard_error = noisy.query(l, r)
        error = answer - clean.query(l, r)[0]
        assert error.var() == pytest.approx(standard_error[0] ** 2, rel=TOL)
        assert abs(error.mean()) < 5 * standard_error[0] / np.sqrt(REPEATS)  # unbiased


def test_scalar_noise_path_is_laplace():
    """d = 1 uses DerivedRandomness's scalar (inverse-CDF) path: pool 40,000 standardised node errors.
    Var(Lap(1)) = 2 and the sample variance of n = 40,000 has relative sd sqrt(5/n) = 1.1 %: 5 % is 4.5 sd."""
    data = np.random.default_rng(4).poisson(9, 40_000).astype(float)
    noisy, _, errors = twin_runs(data, epsilon=0.5, window=4, decay=0.95)
    standardised = errors[:, 0] / noisy.node_scales[(np.arange(data.size) % 4) + 1]
    assert standardised.var() == pytest.approx(2.0, rel=0.05)
    assert stats.kstest(standardised, "laplace").pvalue > 1e-3


# 12. noise modes ------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["none", "paper", "cai"])
def test_paper_literal_over_exact_mse_is_h_over_delta_squared(variant):
    params = dict(epsilon=1.0, window=20, decay=0.9995, bins=2_000, block_size=16, lambda_variant=variant,
                  noise="laplace")  # H/Δ is the Laplace ratio; discrete noise adds each mode's own rounding term
    data = np.random.default_rng(0).poisson(30, (37, 2_000)).astype(float)
    exact_index, clean, _ = twin_runs(data, **params)
    literal_index, _, _ = twin_runs(data, noise_mode="paper_literal", **params)
    ratio = (5 / exact_index.sensitivity) ** 2  # H = 5 for L = 16
    for l, r in window_ranges(exact_index):  # analytically, for every range
        assert (literal_index.query(l, r)[1][0] / exact_index.query(l, r)[1][0]) ** 2 == pytest.approx(ratio, rel=1e-12)
    # Empirically, on one range over 2,000 independent bins. The two noise modes draw independent
    # noise (their scales differ, so they must never share a draw). The ratio of mean squared errors
    # has relative standard error sqrt(cv_a^2 + cv_b^2 / n) by the delta method, cv being the
    # coefficient of variation of a bin's squared error: the tolerance is 5 of them.
    l, r = window_ranges(exact_index)[len(window_ranges(exact_index)) // 2]
    truth = clean.query(l, r)[0]
    literal_sq = (literal_index.query(l, r)[0] - truth) ** 2
    exact_sq = (exact_index.query(l, r)[0] - truth) ** 2
    empirical = literal_sq.mean() / exact_sq.mean()
    cv = [sq.std() / sq.mean() for sq in (literal_sq, exact_sq)]
    tolerance = 5 * np.sqrt((cv[0] ** 2 + cv[1] ** 2) / literal_sq.size)
    assert empirical == pytest.approx(ratio, rel=tolerance)


def test_fixed_seeds_give_deterministic_output():
    def run(seed):
        index = RTPDMM(1.0, 30, 0.99, bins=3, randomness=DerivedRandomness(SecretKey.from_seed(seed), "s"))
        nodes = np.array([index.insert([t, 2 * t, 0]) for t in range(50)])
        return nodes, index.query(25, 45)[0]

    (a_nodes, a_answer), (b_nodes, b_answer), (c_nodes, _) = run(1), run(1), run(2)
    assert (a_nodes == b_nodes).all() and (a_answer == b_answer).all()
    assert not (a_nodes == c_nodes).any()


# Mode A: correlated noise of repeated releases --------------------------------------------------
def test_release_index_standard_error_accounts_for_repeats():
    """Fresh releases carry Lap(b_f) noise; repeats carry the same draw. Slot 1 repeats r_0 = 0."""
    rng = np.random.default_rng(9)
    schedule = "RFRRFFRFRRRFFRFRRRRF"
    index = ReleaseIndex(10, 0.8, bins=REPEATS, block_size=4)
    truth_of_release, release = np.zeros(REPEATS), np.zeros(REPEATS)
    truths = []
    for slot, kind in enumerate(schedule, start=1):
        if kind == "F":
            scale = rng.uniform(0.5, 3.0)
            truth_of_release = np.full(REPEATS, float(rng.poisson(40)))
            release = truth_of_release + rng.laplace(0.0, scale, REPEATS)
            index.insert(release, variance=2 * scale**2)
        else:
            index.insert(release, repeated=True)
        truths.append(truth_of_release)
    truths = np.array(truths)
    t = len(schedule)
    for l, r in window_ranges(index):
        answer, standard_error = index.query(l, r)
        expected = (0.8 ** (t - np.arange(l, r + 1)))[:, None] * truths[l - 1 : r]
        error = answer - expected.sum(axis=0)
        assert error.var() == pytest.approx(standard_error[0] ** 2, rel=TOL, abs=1e-12)


# Mode C: inverse-variance combination ----------------------------------------------------------
def test_combined_index_has_the_inverse_variance_error():
    window, decay, scale = 16, 0.95, 4.0
    counts = np.random.default_rng(5).poisson(25, (40, REPEATS)).astype(float)
    released = ReleaseIndex(window, decay, bins=REPEATS)
    private = RTPDMM(0.5, window, decay, bins=REPEATS, lambda_variant="cai",
                     randomness=DerivedRandomness(SecretKey.from_seed(8), "c"))
    clean = ReleaseIndex(window, decay, bins=REPEATS)
    noise = np.random.default_rng(6)
    for row in counts:
        released.insert(row + noise.laplace(0.0, scale, REPEATS), variance=2 * scale**2)
        private.insert(row)
        clean.insert(row, variance=0.0)
    combined = CombinedIndex(released, private)
    for l, r in [(25, 40), (38, 40), (30, 33)]:
        answer, standard_error = combined.query(l, r)
        error = answer - clean.query(l, r)[0]
        assert error.var() == pytest.approx(standard_error[0] ** 2, rel=TOL)
        var_a, var_b = released.query(l, r)[1][0] ** 2, private.query(l, r)[1][0] ** 2
        assert standard_error[0] ** 2 == pytest.approx(var_a * var_b / (var_a + var_b), rel=1e-12)


# an analytic accuracy snapshot (average variance of in-block decayed prefixes, ε = 1) --
@pytest.mark.parametrize("block_size, p, expected", [
    (4096, 1.0, {"none": 2028, "paper": 1738, "cai": 927}),
    (4096, 0.9995, {"none": 1196, "paper": 1503, "cai": 822}),
    (512, 1.0, {"none": 900, "paper": 694, "cai": 459}),
    (512, 0.9995, {"none": 797, "paper": 632}),
])
def test_prefix_variance_matches_the_snapshot(block_size, p, expected):
    """Written down to 3-4 significant digits: within 0.1 % (plus rounding) of the exact formula."""
    for variant, value in expected.items():
        index = RTPDMM(1.0, block_size, p, block_size=block_size, lambda_variant=variant, randomness=zero_noise())
        average = np.mean([index._store.noise_variance(1, r, t=r) for r in range(1, block_size + 1)])
        assert average == pytest.approx(value, abs=0.5 + 1e-3 * value)


def test_rtp_dmm_starts_only_at_block_boundaries_and_ties_noise_to_its_parameters():
    randomness = DerivedRandomness(SecretKey.from_seed(3), "s")
    with pytest.raises(ParameterError, match="block boundary"):
        RTPDMM(1.0, 16, 0.99, block_size=16, first_slot=5, randomness=randomness)
    aligned = RTPDMM(1.0, 16, 0.99, block_size=16, first_slot=17, randomness=randomness)
    assert aligned.slot == 16
    # Same parameters, same draws (identical rebuilds); any scale-setting parameter changed, new draws.
    def first_node(**changes):
        index = RTPDMM(**{"epsilon": 1.0, "window": 16, "decay": 0.99, "block_size": 16, "randomness": randomness,
                          **changes})
        return index.insert(0.0)
    assert first_node() == first_node()
    for change in ({"epsilon": 0.5}, {"privacy_window": 3}, {"lambda_variant": "cai"}, {"block_size": 8}):
        assert first_node(**change) != first_node()
