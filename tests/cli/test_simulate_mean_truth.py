"""The mean task is scored against the unclipped true mean, so the clipping bias shows in its error."""

import argparse

import numpy as np

from wevent.cli.simulate_local import FAMILY
from wevent.core.synthetic import synthetic


def test_mean_task_truth_is_the_mean_before_clipping():
    args = argparse.Namespace(input=None, task="mean", dataset="lns", users=5000, slots=30, seed=4, sigma=0.1,
                              bound=1.0, lns_std=None, sin_b=None, select_bound=False)
    data = FAMILY.data(args)
    stream = synthetic("lns", 5000, 30, 4)
    draws = np.array([np.random.default_rng([4, 2, t]).normal(stream.p[t - 1], 0.1, 5000).mean()
                      for t in range(1, 31)])
    assert np.allclose(data.truth[:, 0], draws, rtol=0, atol=1e-12)
    # what the devices report stays clipped into [0, B]: the gap is the clipping bias (p_t ~ 0.05 here)
    reported = np.array([data.values_at(t).mean() for t in range(1, 31)])
    assert data.values_at(1).min() >= 0.0 and (reported - draws).mean() > 0.01
