"""Statistical oracles of the central mechanisms (Kellaris et al. 2014); fixed seeds, derived tolerances.

The oracles are the papers' continuous Laplace formulas (MAE = scale), so the mechanisms run with
noise="laplace" here; the discrete default has its own laws in tests/core/test_noise.py.
"""

import numpy as np
import pytest

from tests.conftest import derived
from wevent.core.central import BudgetAbsorption, BudgetDistribution, DissimilarityMeasure, Sample, Uniform
from wevent.core.randomness import Phase


def test_uniform_mae_is_w_over_epsilon():
    # |Lap(lam)| is Exponential(lam): mean lam, sd lam; the MAE over T*d cells has sd lam/sqrt(T d).
    T, d, w, eps = 400, 50, 10, 0.5
    lam = w / eps
    counts = np.full((T, d), 1000.0)
    releases = np.stack([r.release for r in Uniform(eps, w, d, randomness=derived(1), noise="laplace").run(counts)])
    mae = np.abs(releases - counts).mean()
    assert abs(mae - lam) <= 5 * lam / np.sqrt(T * d)


def test_sample_fresh_releases_have_mae_one_over_epsilon_and_blocks_share_noise():
    T, d, w, eps = 600, 40, 6, 2.0
    counts = np.full((T, d), 50.0)
    results = Sample(eps, w, d, randomness=derived(2), noise="laplace").run(counts)
    fresh = np.stack([r.release for r in results if r.published]) - 50.0
    lam = 1.0 / eps
    assert abs(np.abs(fresh).mean() - lam) <= 5 * lam / np.sqrt(fresh.size)
    # Every slot of a block repeats its block's noise exactly.
    for start in range(0, T, w):
        block = np.stack([r.release for r in results[start : start + w]])
        assert (block == block[0]).all()


@pytest.mark.parametrize("cls", [BudgetDistribution, BudgetAbsorption])
def test_published_noise_matches_lambda2(cls):
    # Residuals at a published slot are Lap(lam2) with lam2 = 1/eps2: |res|/lam2 ~ Exponential(1).
    rng = np.random.default_rng(3)
    T, d, w = 3000, 30, 8
    counts = rng.poisson(rng.uniform(200, 2000, d), (T, d)).astype(float)
    results = cls(1.0, w, d, randomness=derived(3), noise="laplace").run(counts)
    pooled = np.concatenate([np.abs(r.release - counts[i]) * r.eps2 for i, r in enumerate(results) if r.published])
    assert pooled.size > 1000
    assert abs(pooled.mean() - 1.0) <= 5 / np.sqrt(pooled.size)


@pytest.mark.parametrize("shift, d, w, expected_scale", [(False, 25, 5, 2 * 5 / (1.0 * 25)), (True, 25, 5, 1.0 / 1.0)])
def test_dissimilarity_noise_scale(shift, d, w, expected_scale):
    # mean|dis~ - dis| over N draws: mean lam1, sd lam1/sqrt(N); 2% of lam1 is 6.3 sd at N = 1e5.
    m = DissimilarityMeasure(1.0, w, d, budget_shift=shift)
    assert m.scale == pytest.approx(expected_scale)
    r = derived(4)
    noise = np.array([r.laplace(slot, Phase.DISSIMILARITY, m.scale) for slot in range(1, 100_001)])
    assert abs(np.abs(noise).mean() - expected_scale) <= 0.02 * expected_scale


@pytest.mark.slow
@pytest.mark.parametrize("w", [40, 120, 200])
def test_qualitative_orderings(w):
    """The orderings of the paper's Section 5, seed-averaged over 20 runs, d = 1000, epsilon = 1, large counts.

    * smooth stream (mean change ~0.1 count per slot): MAE(BD) <= MAE(Uniform), MAE(Sample) <
      MAE(Uniform), MAE(Uniform) ~ w/epsilon;
    * moderately changing stream (~8 counts per slot), where BD needs several releases per window
      and halves its budget each time while BA spends absorbed units: MAE(BA) <= MAE(BD);
    * volatile stream (i.i.d. counts): MAE(Sample) > MAE(Uniform) and MAE(BA) <= MAE(BD).

    One could also expect BA <= BD on the smooth stream. Measured, it does not hold (the docstring of
    wevent.core.central): BA settles where a candidate's noise matches its own last release's
    noise (k ~ 10 units at w = 40, a release every ~2k slots), while BD republishes at epsilon/4
    once per window; so it is asserted where the mechanism's design predicts it.
    """
    T, d, eps, runs = 400, 1000, 1.0, 20
    rng = np.random.default_rng(w)
    base = rng.uniform(1e4, 2e4, d)
    t = np.arange(T)[:, None]
    smooth = base * (1 + 0.002 * np.sin(t / 200.0))
    moderate = base * (1 + 0.05 * np.sin(t / 60.0))
    volatile = rng.uniform(0, 2e4, (T, d))

    def average_mae(cls, counts):
        maes = []
        for seed in range(runs):
            releases = np.stack([r.release for r in cls(eps, w, d, randomness=derived(seed), noise="laplace").run(counts)])
            maes.append(np.abs(releases - counts).mean())
        return float(np.mean(maes))

    uniform = average_mae(Uniform, smooth)
    # 20 runs x T x d cells of |Lap(w/eps)|: standard error (w/eps)/sqrt(runs T d)
    assert abs(uniform - w / eps) <= 5 * (w / eps) / np.sqrt(runs * T * d)
    assert average_mae(BudgetDistribution, smooth) <= uniform
    assert average_mae(Sample, smooth) < uniform
    assert average_mae(BudgetAbsorption, moderate) <= average_mae(BudgetDistribution, moderate)
    assert average_mae(Sample, volatile) > average_mae(Uniform, volatile)
    assert average_mae(BudgetAbsorption, volatile) <= average_mae(BudgetDistribution, volatile)
