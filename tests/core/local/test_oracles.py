"""Frequency oracles and the Hybrid Mechanism: unbiasedness, variances, Ada's choice.

Statistical tolerances are 4 standard errors derived from the variance formulas under test:
the mean of R independent estimates has standard error sqrt(Var/R); the sample variance of R
(approximately normal) estimates has standard error Var * sqrt(2/(R-1)).
"""

import math

import numpy as np
import pytest
from scipy import optimize

from wevent.core.local import GRR, OUE, HybridMechanism, choose, make_oracle
from wevent.core.local.exact_draws import exp_share
from wevent.core.local.hybrid import EPS_STAR, component_variance, stochastic_rounding_constant
from wevent.core.local.piecewise import DiscretePiecewise
from wevent.core.randomness import KeyStream
from wevent.core.validation import ParameterError

SE = 4  # tolerance in standard errors

# a reference set-up
D, EPS, N_REPORTS = 5, 1.0, 2000
F = np.array([0.5, 0.2, 0.15, 0.1, 0.05])
VALUES = np.repeat(np.arange(D), (F * N_REPORTS).astype(int))


# --- deterministic oracles -----------------------------------------------------------------
def test_ada_choice_examples():  # item 9
    assert choose(0.05, 5) == "grr"  # 5 < 3e^0.05 + 2 = 5.154
    assert choose(0.05, 6) == "oue"
    assert choose(2.0, 77) == "oue"  # 77 > 24.17
    assert make_oracle("ada", 0.05, 5).name == "grr" and make_oracle("ada", 2.0, 77).name == "oue"


def test_variance_modes_and_empty():  # the printed and exact averages of V
    for eps in (0.1, 1.0, 3.0):
        assert len({GRR(eps, 2, mode).variance(100) for mode in ("exact_avg", "paper_literal", "approx")}) == 1
    for oracle in (GRR(1.0, 5), OUE(1.0, 5), HybridMechanism(1.0)):
        assert oracle.variance(0) == math.inf
    # printed GRR form = exact average + (d-2)(1-1/d)/(n(e^eps-1)); approx drops the frequency term
    e = math.e
    assert GRR(1, D, "paper_literal").variance(N_REPORTS) - GRR(1, D).variance(N_REPORTS) == pytest.approx(
        (D - 2) * (1 - 1 / D) / (N_REPORTS * (e - 1)), rel=1e-12)
    assert GRR(1, D, "approx").variance(N_REPORTS) == pytest.approx((D - 2 + e) / (N_REPORTS * (e - 1) ** 2), rel=1e-12)
    assert OUE(1, D).variance(N_REPORTS) == pytest.approx(4 * e / (N_REPORTS * (e - 1) ** 2) + 1 / (D * N_REPORTS))


def test_hm_constants():  # item 11
    assert HybridMechanism(1.0).worst_case_variance == pytest.approx(4.289, abs=5e-4)
    assert HybridMechanism(2.0).worst_case_variance == pytest.approx(1.042, abs=5e-4)
    assert stochastic_rounding_constant(1.0) ** 2 == pytest.approx(4.683, abs=5e-4)

    def pm_mix_minus_sr(eps):  # where mixing in PM starts to pay off
        a = math.exp(eps / 2)
        return (stochastic_rounding_constant(eps) ** 2 + (a + 3) / (3 * (a - 1))) / a - stochastic_rounding_constant(eps) ** 2

    assert optimize.brentq(pm_mix_minus_sr, 0.3, 1.0) == pytest.approx(0.6094, abs=5e-5)
    assert EPS_STAR == 0.61
    # continuous at eps*: the mixed form equals C_d^2 there (up to the rounding of eps*)
    assert HybridMechanism(EPS_STAR + 1e-9).worst_case_variance == pytest.approx(HybridMechanism(EPS_STAR).worst_case_variance, rel=1e-3)


def test_paper_literal_switches_reproduce_printed_forms():  # item 13
    a = math.exp(0.5)
    printed = (stochastic_rounding_constant(1.0) ** 2 + (a + 3) / (3 * (a - 1) ** 2)) / a
    assert HybridMechanism(1.0, var_mode="paper_literal").worst_case_variance == pytest.approx(printed)
    assert printed == pytest.approx(5.07, abs=0.01)
    e = math.e
    assert GRR(1, D, "paper_literal").variance(10) == pytest.approx((D - 2 + e) / (10 * (e - 1) ** 2) + (D - 2) / (10 * (e - 1)))


def test_privacy_ratios():  # item 12
    for eps in (0.1, 1.0, 4.0):
        g = GRR(eps, 7)
        assert g.p / g.q == pytest.approx(math.exp(eps), rel=1e-12)
        o = OUE(eps, 7)
        # a bit's likelihood ratio between inputs that differ in it: p/q for a 1, (1-q)/(1-p) for a 0
        assert max(o.p / o.q, (1 - o.q) / (1 - o.p)) <= math.exp(eps) * (1 + 1e-12)
        # SR: output +C_d has probability 1/2 + x(2p-1)/2 in [1-p, p], p = K/2^64: ratio p/(1-p)
        share = exp_share(eps)
        assert share / (2**64 - share) == pytest.approx(math.exp(eps), rel=1e-12)
        # PM: every output has weight R (in the window) or S (out of it): ratio R/S
        grid = DiscretePiecewise(eps)
        assert grid.inside / grid.outside == pytest.approx(math.exp(eps), rel=1e-9)


def test_invalid_inputs_give_parameter_errors():
    with pytest.raises(ParameterError, match="d >= 2"):
        GRR(1.0, 1)
    with pytest.raises(ParameterError, match="outside the domain"):
        GRR(1.0, 3).perturb(np.array([0, 3]), KeyStream.from_seed(0))
    with pytest.raises(ParameterError, match="outside the domain"):
        OUE(1.0, 3).perturb(np.array([-1]), KeyStream.from_seed(0))
    with pytest.raises(ParameterError, match="integers"):
        GRR(1.0, 3).perturb(np.array([0.5]), KeyStream.from_seed(0))
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ParameterError, match="epsilon"):
            OUE(bad, 3)
    with pytest.raises(ParameterError, match="bound"):
        HybridMechanism(1.0, bound=0)
    with pytest.raises(ParameterError, match="finite"):
        HybridMechanism(1.0).perturb(np.array([np.nan]), KeyStream.from_seed(0))
    with pytest.raises(ParameterError, match="var_mode"):
        GRR(1.0, 3, "exact")


# --- device side -----------------------------------------------------------------------------
def test_grr_reports_sum_to_one_and_estimator_matches_formula():
    g = GRR(EPS, D)
    reports = g.perturb(VALUES, KeyStream.from_seed(3))
    support = g.support(reports)
    assert support.sum() == VALUES.size
    assert g.estimate(support, VALUES.size).sum() == pytest.approx(1.0, abs=1e-12)
    assert g.estimate(support, VALUES.size) == pytest.approx((support / VALUES.size - g.q) / (g.p - g.q))


def test_oue_packed_reports_round_trip_and_one_hot_bit():
    o = OUE(2.0, 11)
    values = np.random.default_rng(0).integers(0, 11, 1000)
    reports = o.perturb(values, KeyStream.from_seed(1))
    assert reports.shape == (1000, 2) and reports.dtype == np.uint8
    bits = np.unpackbits(reports, axis=1, count=11).astype(bool)
    assert (o.support(reports) == bits.sum(axis=0)).all()
    assert (o.perturbed_support(values, KeyStream.from_seed(1)) == bits.sum(axis=0)).all()  # same draws
    # the true bit is 1 with probability 1/2: 1000 draws, 4 standard errors of sqrt(0.25/1000)
    assert abs(bits[np.arange(1000), values].mean() - 0.5) < SE * math.sqrt(0.25 / 1000)


@pytest.mark.parametrize("eps", [0.3, 1.0, 2.5, 6.0])
def test_oue_zero_bits_are_exactly_q(eps):
    """The byte threshold plus a word for the bytes at it gives P(0 -> 1) = q (not floor(256 q)/256)."""
    o = OUE(eps, 64)
    values = np.zeros(20_000, dtype=np.int64)
    counts = o.perturbed_support(values, KeyStream.from_seed(7))[1:]  # bins 1..63 hold no value
    trials = 63 * values.size
    rate = counts.sum() / trials
    se = math.sqrt(o.q * (1 - o.q) / trials)
    assert abs(rate - o.q) < SE * se
    coarse = math.floor(256 * o.q) / 256  # what the bytes alone would give
    if abs(o.q - coarse) > 8 * se:
        assert abs(rate - coarse) > SE * se


def test_oue_batches_are_drawn_as_if_each_were_alone():
    """A fleet process holding one block draws that block's reports alone; the simulation draws all
    blocks in one pass: both must give the same bits (each batch reads its lanes, then its ties' words)."""
    o = OUE(1.0, 13)
    values = np.random.default_rng(0).integers(0, 13, 3000)
    sizes = [1, 1200, 1799]
    together = o.batches_support(values, [KeyStream.from_seed(b) for b in range(3)], sizes)
    alone = sum(o.perturbed_support(part, KeyStream.from_seed(b))
                for b, part in enumerate(np.split(values, np.cumsum(sizes)[:-1])))
    assert np.array_equal(together, alone)


# --- statistics ---------------------------------------------------------------------------
def repeated_estimates(oracle, values, reps, seed, mode):
    if mode == "report":  # one device keystream, read on from draw to draw
        draw, source = oracle.perturbed_support, KeyStream.from_seed(seed)
    else:
        draw, source = oracle.sample_support, np.random.default_rng(seed)
    return np.array([oracle.estimate(draw(values, source), values.size) for _ in range(reps)])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["grr", "oue"])
@pytest.mark.parametrize("mode", ["report", "sufficient"])
def test_unbiased_and_per_bin_variance_match_spec(name, mode):
    oracle = make_oracle(name, EPS, D)
    reps = 10_000
    estimates = repeated_estimates(oracle, VALUES, reps, seed=11, mode=mode)
    variance = oracle.bin_variance(F, N_REPORTS)
    reference = {"grr": [1.405, 1.143, 1.099, 1.056, 1.012], "oue": [2.091, 1.941, 1.916, 1.891, 1.866]}[name]
    assert variance * 1e3 == pytest.approx(reference, abs=6e-4)  # to 3 decimals
    assert (np.abs(estimates.mean(axis=0) - F) < SE * np.sqrt(variance / reps)).all()  # item 1
    empirical = estimates.var(axis=0, ddof=1)
    assert (np.abs(empirical - variance) < SE * variance * math.sqrt(2 / (reps - 1))).all()  # item 2
    # item 3: the bin average matches V (exact_avg), and is far from the printed form
    average_se = variance.mean() * math.sqrt(2 / (reps - 1))  # bins are correlated: bound by the mean SE
    assert abs(empirical.mean() - oracle.variance(N_REPORTS)) < SE * average_se
    literal = make_oracle(name, EPS, D, var_mode="paper_literal").variance(N_REPORTS)
    if name == "grr":
        assert abs(empirical.mean() - literal) > SE * average_se


def test_modes_agree_in_distribution_quick():
    """Per-report and sufficient-statistic supports: same mean and variance per bin (Var_k * n^2 ...)."""
    for oracle in (GRR(1.0, 4), OUE(1.0, 4)):
        values = np.repeat(np.arange(4), [300, 100, 50, 50])
        reps = 2000
        a = repeated_estimates(oracle, values, reps, 1, "report")
        b = repeated_estimates(oracle, values, reps, 2, "sufficient")
        variance = oracle.bin_variance(np.bincount(values) / values.size, values.size)
        # difference of two means of R estimates: standard error sqrt(2 Var / R)
        assert (np.abs(a.mean(axis=0) - b.mean(axis=0)) < SE * np.sqrt(2 * variance / reps)).all()
        # difference of two sample variances: standard error Var * sqrt(4 / (R-1))
        assert (np.abs(a.var(axis=0, ddof=1) - b.var(axis=0, ddof=1)) < SE * variance * math.sqrt(4 / (reps - 1))).all()


@pytest.mark.slow
@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("component", ["sr", "pm", "hm"])
def test_hybrid_components_unbiased_with_spec_variance(eps, component):  # item 5
    hm = HybridMechanism(eps, bound=2.0)
    n = 200_000
    stream = KeyStream.from_seed(5)
    for x in (-1.0, -0.8, 0.0, 0.5, 1.0):
        value = (x + 1) * hm.bound / 2  # the device maps it back to x
        outputs = hm.perturb(np.full(n, value), stream, component=component)
        variance = float(component_variance(component, eps, x))
        assert abs(outputs.mean() - x) < SE * math.sqrt(variance / n)
        # sample variance of n draws: SE = sqrt((mu4 - var^2)/n); bounded outputs: mu4 <= C^2 var
        bound = max(stochastic_rounding_constant(eps), (math.exp(eps / 2) + 1) / (math.exp(eps / 2) - 1)) + 1
        assert abs(outputs.var() - variance) < SE * math.sqrt(bound**2 * variance / n)
    if component == "hm" and eps > EPS_STAR:  # flat in x, equal to Var*
        assert component_variance("hm", eps, np.array([-1, 0, 0.5])) == pytest.approx(hm.worst_case_variance)


@pytest.mark.parametrize("eps", [0.5, 1.0])  # SR alone below eps* = 0.61; SR and PM above
def test_hybrid_sufficient_sums_are_unbiased_with_the_outputs_variance(eps):
    """The sum of 500 outputs drawn at once, over 4,000 repetitions: mean within 4 standard errors of
    the inputs' sum, sample variance within 4 of its standard deviations of the summed variances."""
    hm = HybridMechanism(eps, bound=1.0)
    values = np.linspace(0.0, 1.0, 500)
    x = hm.unit_inputs(values)
    rng, reps = np.random.default_rng(4), 4000
    sums = np.array([hm.sample_support(values, rng)[0] for _ in range(reps)])
    variance = float(component_variance("hm", eps, x).sum())
    assert abs(sums.mean() - x.sum()) < SE * math.sqrt(variance / reps)
    assert abs(sums.var(ddof=1) - variance) < SE * variance * math.sqrt(2 / (reps - 1))


def test_hybrid_estimate_maps_back_and_clips():
    hm = HybridMechanism(1.0, bound=10.0)
    outputs = hm.perturb(np.array([-5.0, 20.0]), KeyStream.from_seed(0), component="sr")
    assert set(np.round(np.abs(outputs), 9)) == {round(stochastic_rounding_constant(1.0), 9)}
    assert hm.unit_inputs([-5.0, 0.0, 5.0, 20.0]).tolist() == [-1.0, -1.0, 0.0, 1.0]
    assert hm.estimate(np.array([0.0]), 4)[0] == 5.0  # m = 0 is the middle of [0, B]
    assert hm.variance(100) == pytest.approx(25 * hm.worst_case_variance / 100)
