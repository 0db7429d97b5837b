"""LB-DSAT_w and LB-RescueDP: the budget-division variants of LDP-IDS's extensions.

Tolerances are SE standard errors derived from the oracles' variances V(eps, N) (normal
approximation of the estimates; the squared error of one estimate has variance 2 V^2)."""

import math

import numpy as np
import pytest

from tests.core.local.conftest import audit, make, run
from wevent.core.base import Strategy
from wevent.core.local import GRR

SE = 4


def constant_stream(population, share, slots):
    values = np.zeros(population, dtype=np.int64)
    values[: int(share * population)] = 1
    return np.broadcast_to(values, (slots, population)), np.array([1 - share, share])


def test_lb_dsat_publishes_at_most_c_per_window_each_at_eps2():
    """Always asked to publish, LB-DSAT_w publishes C times per w slots at eps_2 = (1-beta) eps / C,
    nullifies the rest without asking anyone, and every fresh release has the error V(eps_2, N)."""
    population, eps, w, cutoff, slots = 20_000, 1.0, 8, 2, 400
    stream, truth = constant_stream(population, 0.3, slots)
    m = make("lb-dsat", eps, w, population=population, cutoff=cutoff, decision_override=lambda t: True)
    results = run(m, slots, stream)
    for i, r in enumerate(results):
        assert sum(x.published for x in results[max(0, i - w + 1) : i + 1]) <= cutoff
        if r.published:
            assert r.eps2 == pytest.approx(eps / 2 / cutoff) and r.n2 == population
        else:
            assert r.strategy is Strategy.NULLIFIED and r.n1 == 0
    published = [r for r in results if r.published]
    assert len(published) == cutoff * slots // w
    errors = np.array([(r.release - truth) ** 2 for r in published]).mean(axis=1)  # d = 2: both bins alike
    v = GRR(eps / 2 / cutoff, 2).variance(population)
    assert abs(errors.mean() - v) < SE * v * math.sqrt(2 / len(published))
    assert audit(results, population, w).max_window_spend <= eps * (1 + 1e-12)


def test_lb_dsat_threshold_follows_the_rate():
    """Never publishing drives T down by u = theta |(|rate - C/w| - sigma)| / sigma, as in LP-DSAT_w."""
    m = make("lb-dsat", 1.0, 8, population=800, cutoff=2, decision_override=lambda t: False)
    thresholds = []
    for row in np.zeros((4, 800), dtype=np.int64):
        m.step(row)
        thresholds.append(m.threshold / m.initial_threshold)
    assert thresholds == pytest.approx([0.6, 0.2, 0.0, 0.0])
    assert m.initial_threshold == pytest.approx(GRR(0.25, 2).variance(800))


def test_lb_rescuedp_first_sample_is_a_kalman_correction_of_zero():
    """Slot 1 asks all N users at eps_1 = phi ln 2 eps; the release is K z with
    K = (P0 + Q) / (P0 + Q + R), R = V(eps_1, N): mean K f, variance K^2 R, over independent devices."""
    population, share, reps = 4000, 0.3, 400
    stream, truth = constant_stream(population, share, 1)
    eps1 = 0.2 * math.log(2)
    r = GRR(eps1, 2).variance(population)
    k = (1 + 1e-5) / (1 + 1e-5 + r)
    releases = np.array([make("lb-rescuedp", 1.0, 4, population=population, seed=seed).step(stream[0]).release[1]
                         for seed in range(reps)])
    assert abs(releases.mean() - k * share) < SE * k * math.sqrt(r / reps)
    assert abs(releases.var(ddof=1) / (k * k * r) - 1) < SE * math.sqrt(2 / reps)


def test_lb_rescuedp_takes_a_share_of_the_remaining_budget():
    """Each sample's eps_t is min(phi ln(I + 1), p_max) times what the last w - 1 slots left, so no
    window spends more than eps, and a window with samples in it leaves less to the next one."""
    population, eps, w, slots = 2000, 1.0, 5, 120
    rng = np.random.default_rng(3)
    values = (rng.random((slots, population)) < np.linspace(0.1, 0.6, slots)[:, None]).astype(np.int64)
    m = make("lb-rescuedp", eps, w, population=population)
    results, shares = [], []
    for row in values:
        shares.append(min(0.2 * math.log(m.interval + 1), 0.6))
        results.append(m.step(row))
    spent = [r.eps2 for r in results]
    remainders = []
    for i, r in enumerate(results):
        if r.published:
            remainders.append(eps - sum(spent[max(0, i - w + 1) : i]))
            assert r.eps2 == pytest.approx(shares[i] * remainders[-1]) and r.n2 == population and r.n1 == 0
    assert min(remainders) < eps  # some samples shared a window, so the rule was exercised
    assert audit(results, population, w).max_window_spend <= eps * (1 + 1e-12)
