"""Sun et al. (2019), Section 4.3: decayed range-query accuracy of RTP_DMM against EX and LP.

The paper's Search Logs, NetTrace and WorldCup98 series are not available to us; the streams here
are the counts of value 1 in the LNS and Sin synthetic streams (N = 200,000). All three methods'
errors are their noise alone, which does not depend on the data, so the ordering carries over.
As in the paper: the window is the whole stream (2^15 slots), one range query of random size in
the window at every slot (left end uniform in the window, right end uniform after it), event-level
privacy, and the mean squared error over all the queries (Equation 20).
"""

from __future__ import annotations

import functools

import numpy as np

from ..core.decayed import RTPDMM
from ..core.decayed.exact_sums import ExactDecayedSums
from ..core.decayed.interval_tree import IntervalTree
from ..core.decayed.lp_answer import LPAnswer
from ..core.randomness import DerivedRandomness, SecretKey
from ..core.synthetic import synthetic
from .cells import Paper
from .figures import Figure

DATASETS = ("lns", "sin")
METHODS = ("rtp_dmm", "ex", "lp")
USERS, SLOTS = 200_000, 32_768
DECAY, EPSILON = 0.9995, 1.0

FIGURES = (
    Figure("fig7-9", "Comparison of query accuracy (decay 0.9995)", "epsilon", (0.01, 0.1, 1.0), METHODS,
           ("query_mse",), DATASETS, log_x=True, log_y=True,
           note="The paper's Figs. 7-9 (one per dataset) as one figure with a panel per stream."),
    Figure("fig10-12", "Accuracy with different decay factors (epsilon = 1)", "decay",
           tuple(round(0.9991 + 0.0001 * k, 4) for k in range(9)), METHODS, ("query_mse",), DATASETS, log_y=True,
           note="The paper does not state epsilon for Figs. 10-12; we use 1."),
)


def _index(method: str, epsilon: float, window: int, decay: float, run: int):
    if method == "rtp_dmm":
        randomness = DerivedRandomness(SecretKey.from_seed(run), "reproduce-sun")
        return RTPDMM(epsilon, window, decay, noise="laplace", randomness=randomness)
    cls = IntervalTree if method == "ex" else LPAnswer
    return cls(epsilon, window, decay, rng=np.random.default_rng([run, 1]))


@functools.lru_cache(maxsize=8)
def _queries(dataset: str, users: int, slots: int, decay: float, run: int) -> tuple[np.ndarray, ...]:
    """A run's stream, its one query per slot ``(l, r)`` and their exact answers: the same for every
    method and epsilon, so a process computes them once (it runs a dataset's cells in a row)."""
    values = synthetic(dataset, users, slots, seed=run).ones.astype(float)
    window = slots  # the whole stream, as the paper sets it for its smaller datasets
    picks = np.random.default_rng([run, 2]).random((slots, 2))  # the same queries for every method
    t = np.arange(1, slots + 1)
    oldest = np.maximum(1, t - window + 1)
    left = oldest + (picks[:, 0] * (t - oldest + 1)).astype(np.int64)
    right = left + (picks[:, 1] * (t - left + 1)).astype(np.int64)
    truth, answers = ExactDecayedSums(decay), np.empty(slots)
    for i, value in enumerate(values):
        truth.insert(value)
        answers[i] = truth.query(int(left[i]), int(right[i]))
    return values, left, right, answers


def compute(figure: Figure, dataset: str, x, method: str, run: int, scale, inputs: dict) -> dict:
    epsilon, decay = (x, DECAY) if figure.x == "epsilon" else (EPSILON, x)
    users, slots = scale.size(USERS, SLOTS)
    values, left, right, answers = _queries(dataset, users, slots, decay, run)
    index = _index(method, epsilon, slots, decay, run)
    errors = np.empty(slots)
    for i, value in enumerate(values):
        index.insert(value)
        errors[i] = float(np.asarray(index.query(int(left[i]), int(right[i]))[0]).ravel()[0]) - answers[i]
    return {"query_mse": float(np.mean(errors**2))}


def describe(figure: Figure, dataset: str, x, method: str, scale, inputs: dict) -> str:
    users, slots = scale.size(USERS, SLOTS)
    epsilon, decay = (x, DECAY) if figure.x == "epsilon" else (EPSILON, x)
    return (f"{method} on the count of 1s of synthetic {dataset} (N = {users}, T = W = {slots}), epsilon = {epsilon:g}, "
            f"decay = {decay:g}, one random range query per slot")


PAPER = Paper("sun", "Sun et al., Differential privacy real-time streaming data publication under exponential decay "
              "(Fenwick tree), 2019", FIGURES, compute=compute, describe_cell=describe)
