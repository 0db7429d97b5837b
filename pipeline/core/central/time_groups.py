"""Grouping consecutive slots of every bin by their deviation, and smoothing within a group (PeGaSus, AdaPub).

Every bin has an open group of consecutive slots. A slot's count joins it while the group's
deviation stays below a threshold, tested privately with the sparse vector technique: every
group draws one noisy offset ``rho`` for its threshold when it opens, and every test adds fresh
noise ``nu`` to the deviation, ``D(G + c_t) + nu < theta_t + rho``. A test that fails closes the
group, and its count forms a group of its own, already closed: the next slot opens a new one.
A group also closes when it holds ``limit`` slots (a public rule, so the state stays bounded).

The deviation of a group is the L1 distance of its counts to their median,
``D = min_m sum |c - m|``: a minimum of functions that change by at most 1 when one count does,
so its sensitivity is 1, and an integer for integer counts (an exact integer query for discrete
noise). A count takes part in the tests of one group only, so by the sparse vector technique
with ``rho`` and ``nu`` both of scale ``3 / eps_g`` (``eps_g / 3`` on the threshold and
``2 eps_g / 3`` on the tests) the grouping is ``eps_g``-DP for every single count: event-level.
The groups of different bins are disjoint queries (a user is in one bin per slot), so one draw
of ``d`` values per slot serves them all, each bin using its value as ``rho`` (opening) or ``nu``
(testing).

The smoother replaces a bin's noisy count by the median (or the mean, or the James-Stein-like
shrinkage towards the mean) of the noisy counts of its current group: post-processing.

>>> from wevent.core.randomness import SecretKey, ZeroNoise
>>> g = DeviationGrouper(domain_size=2, limit=4, epsilon=0.3, noise="laplace")
>>> zero = ZeroNoise(SecretKey.from_seed(0))
>>> for slot, c in enumerate([[10, 10], [11, 30], [10, 31]], start=1):
...     g.step(slot, np.array(c, float), np.array(c, float), np.array([5.0, 5.0]), zero)
>>> g.sizes.tolist(), g.open.tolist(), g.smoothed("median").tolist()
([3, 1], [True, True], [10.0, 31.0])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..options import Option
from ..randomness import DerivedRandomness, Phase
from ..validation import ParameterError, check_epsilon, check_positive_int

__all__ = ["SMOOTHERS", "DeviationGrouper", "check_smoother", "GROUP_OPTIONS"]

SMOOTHERS = ("median", "mean", "shrinkage")


class DeviationGrouper:
    """The open group of every bin: its counts, its noisy counts and its noisy threshold offset.

    Parameters
    ----------
    domain_size : int
        ``d``, the bins.
    limit : int
        The most slots a group holds, >= 1.
    epsilon : float
        ``eps_g``, the event-level budget of the grouping.
    noise : {"discrete", "laplace"}
        Two-sided geometric noise at ``eps_g / 3`` or Laplace noise of scale ``3 / eps_g``.
    """

    def __init__(self, domain_size: int, limit: int, epsilon: float, noise: str) -> None:
        self.limit = check_positive_int(limit, "group limit")
        self.epsilon = check_epsilon(epsilon, "grouping budget")
        self.noise = noise
        self.counts = np.zeros((domain_size, self.limit))  # the group's counts (raw data: central trust)
        self.noisy = np.zeros((domain_size, self.limit))  # the group's noisy counts
        self.sizes = np.zeros(domain_size, dtype=np.int64)
        self.open = np.zeros(domain_size, dtype=bool)  # False: the next slot opens a new group
        self.offset = np.zeros(domain_size)  # rho of the open group

    def step(self, slot: int, counts: np.ndarray, noisy: np.ndarray, thresholds: np.ndarray,
             randomness: DerivedRandomness) -> None:
        """Place slot ``slot``'s counts (and their noisy counts) in every bin's group."""
        if self.noise == "discrete":
            draw = randomness.discrete_laplace(slot, Phase.DISSIMILARITY, self.epsilon / 3, counts.size).astype(float)
        else:
            draw = randomness.laplace(slot, Phase.DISSIMILARITY, 3.0 / self.epsilon, counts.size)
        testing = self.open & (self.sizes < self.limit)
        joins = np.zeros(counts.size, dtype=bool)
        tested = np.flatnonzero(testing)
        if tested.size:
            members = np.arange(self.limit + 1) < self.sizes[tested, None] + 1
            values = np.where(members, np.column_stack([self.counts[tested], np.zeros(tested.size)]), np.nan)
            values[np.arange(tested.size), self.sizes[tested]] = counts[tested]
            deviation = np.nansum(np.abs(values - np.nanmedian(values, axis=1, keepdims=True)), axis=1)
            joins[tested] = deviation + draw[tested] < thresholds[tested] + self.offset[tested]
        position = np.where(joins, self.sizes, 0)  # a failed test leaves the count alone in a closed group
        bins = np.arange(counts.size)
        self.counts[bins, position], self.noisy[bins, position] = counts, noisy
        self.sizes = position + 1
        self.offset = np.where(testing, self.offset, draw)  # a new open group draws its rho
        self.open = joins | ~testing

    def prefetch(self, slots: np.ndarray, randomness: DerivedRandomness) -> None:
        """Draw the noise of :meth:`step` at every one of ``slots`` ahead, in one batch."""
        if self.noise == "discrete":
            randomness.prefetch(slots, Phase.DISSIMILARITY, self.counts.shape[0], epsilon=self.epsilon / 3)
        else:
            randomness.prefetch(slots, Phase.DISSIMILARITY, self.counts.shape[0], scale=3.0 / self.epsilon)

    def smoothed(self, how: str) -> np.ndarray:
        """Every bin's smoothed value from its group's noisy counts, the newest one included."""
        members = np.arange(self.limit) < self.sizes[:, None]
        values = np.where(members, self.noisy, np.nan)
        if how == "median":
            return np.nanmedian(values, axis=1)
        mean = np.nanmean(values, axis=1)
        if how == "mean":
            return mean
        newest = self.noisy[np.arange(self.sizes.size), self.sizes - 1]
        return mean + (newest - mean) / self.sizes

    def state(self) -> dict[str, Any]:
        return {"counts": self.counts.copy(), "noisy": self.noisy.copy(), "sizes": self.sizes.copy(),
                "open": self.open.copy(), "offset": self.offset.copy()}

    def load(self, state: dict[str, Any]) -> None:
        shape = self.counts.shape
        self.counts = np.array(state["counts"], dtype=float).reshape(shape)
        self.noisy = np.array(state["noisy"], dtype=float).reshape(shape)
        self.sizes = np.array(state["sizes"], dtype=np.int64)
        self.open = np.array(state["open"], dtype=bool)
        self.offset = np.array(state["offset"], dtype=float)


def check_smoother(smoother: str) -> str:
    if smoother not in SMOOTHERS:
        raise ParameterError(f"smoother must be one of {', '.join(SMOOTHERS)}, got {smoother!r}")
    return smoother


GROUP_OPTIONS = {"max_group": Option.integer("the most slots a group holds", 1, 2**16, example=8)}
