"""The Hybrid Mechanism's clipping threshold, chosen from calibration reports (LDP-IDS Section 6.1.2)."""

import math

import numpy as np
import pytest

from wevent.core.local import ClippingThreshold, HybridMechanism
from wevent.core.validation import ParameterError

SE = 4


def skewed_values(users, seed=0):
    """A large, sparse range: most values small, a long tail up to B = 1000."""
    return np.random.default_rng(seed).exponential(20.0, users)


def true_errors(c, values):
    """err(theta) from the values themselves: HM's noise on [0, theta] plus the exact clipping bias."""
    bias = np.array([np.mean(np.maximum(values - t, 0.0)) for t in c.candidates])
    return (c.candidates / 2) ** 2 * HybridMechanism(c.epsilon).worst_case_variance / c.reporters + bias**2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_calibrated_threshold_is_near_the_best_one(seed):
    """The threshold from noisy frequencies loses at most what the frequencies' noise can explain:
    err(theta) moves with the bias b estimated from f, so by about 2 |b| sd(b), with
    sd(b)^2 = V(eps, N) sum_k a_k^2 (a_k the bucket's lever above theta)."""
    users, eps = 200_000, 1.0
    values = skewed_values(users, seed)
    c = ClippingThreshold(eps, 1000.0, reporters=10_000, buckets=50)
    chosen = c.calibrate(values, np.random.default_rng(100 + seed))
    truth = true_errors(c, values)
    best = int(np.argmin(truth))
    picked = int(np.flatnonzero(c.candidates == chosen)[0])
    levers = np.maximum(c.midpoints[None, :] - c.candidates[:, None], 0.0)
    f = np.bincount(c.bucket(values), minlength=c.buckets) / users
    bias = levers @ f
    spread = 2 * np.abs(bias) * np.sqrt(c.oracle.variance(users) * (levers**2).sum(axis=1))
    assert truth[picked] - truth[best] <= SE * (spread[picked] + spread[best]) + 1e-12
    assert truth[picked] < truth[-1]  # better than not clipping (theta = B)


def test_clipped_hm_means_have_the_predicted_error():
    """R independent HM means of n reports clipped at theta have MSE V_HM(theta) + bias^2 against the
    unclipped mean; each squared error has variance 2 s^4 + 4 bias^2 s^2 (s^2 = V_HM, normal noise)."""
    values = skewed_values(2_000, seed=5)
    theta, eps, reps = 40.0, 1.0, 400
    hm = HybridMechanism(eps, bound=theta)
    bias = float(np.mean(np.minimum(values, theta)) - values.mean())
    rng = np.random.default_rng(7)
    errors = np.array([hm.estimate(hm.sample_support(values, rng), values.size)[0] - values.mean()
                       for _ in range(reps)])
    s2 = hm.variance(values.size)
    expected = s2 + bias**2
    assert abs(np.mean(errors**2) - expected) < SE * math.sqrt((2 * s2**2 + 4 * bias**2 * s2) / reps)
    assert bias**2 > SE * math.sqrt((2 * s2**2 + 4 * bias**2 * s2) / reps)  # the clipping bias shows


def test_bad_parameters_are_refused():
    with pytest.raises(ParameterError, match="buckets"):
        ClippingThreshold(1.0, 10.0, 100, buckets=1)
    with pytest.raises(ParameterError, match="frequency oracle"):
        ClippingThreshold(1.0, 10.0, 100, oracle="hm")
    with pytest.raises(ParameterError, match="bound"):
        ClippingThreshold(1.0, math.inf, 100)
    with pytest.raises(ParameterError, match="finite bucket frequencies"):
        ClippingThreshold(1.0, 10.0, 100, buckets=4).select(np.ones(3))
