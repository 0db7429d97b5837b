"""Optimal Budget Selection (OBS): Du et al., PVLDB 18(6) 2025, Algorithm 1.

Among the distinct positive budgets ``v_1 < ... < v_m`` (held by ``n_1 .. n_m`` users), pick the
SM threshold ``theta = v_c`` that minimises the reporting error (Section 4.1)

    err(theta) = sum_{v_k < theta} n_k p_k (1 - p_k) + (sum_{v_k < theta} n_k (1 - p_k))^2 + 2 Delta^2 / theta^2,

with ``p_k = expm1(v_k) / expm1(theta)``: the sampled count's variance and squared bias plus the
Laplace variance. Ties keep the smaller theta (strict ``<``); zero budgets are never candidates
(its error ``2/0^2`` is infinite), and with no positive budget there is no selection (the slot is null).

Every candidate is scored in O(m) after sorting: with ``a_k = expm1(v_k)``,
``sum n_k p_k = sum n_k a_k / a_c`` and ``sum n_k p_k^2 = sum n_k a_k^2 / a_c^2`` are prefix sums,
accumulated in the log domain (``logaddexp.accumulate``) so that no budget size overflows.

Spend: nothing; OBS reads only the budgets and the public type sizes.

Example 2 of the paper (err(0.8) = 27.733, not the printed 89.74, where ``e^{x-1}`` stands for
``e^x - 1``):

>>> selection = obs(np.array([0.1, 0.4, 0.8]), np.array([2, 5, 3]))
>>> round(selection.theta, 6), round(selection.error, 6)
(0.4, 15.308424)
>>> candidate_errors(np.array([0.1, 0.4, 0.8]), np.array([2, 5, 3])).errors.round(4).tolist()
[200.0, 15.3084, 27.733]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .sampling import log_expm1

__all__ = ["BudgetSelection", "Candidates", "candidate_errors", "obs"]

# Below this a budget's 2/theta^2 may overflow to infinity (such a candidate is never chosen).
_TINY = 1e-150


@dataclass(frozen=True)
class BudgetSelection:
    """OBS's answer: the SM threshold and its estimated error ``err(theta)``."""

    theta: float
    error: float


@dataclass(frozen=True, eq=False)
class Candidates:
    """Every candidate threshold (distinct positive budgets, ascending) and its error terms."""

    values: np.ndarray
    counts: np.ndarray
    sampling_errors: np.ndarray
    noise_errors: np.ndarray

    @property
    def errors(self) -> np.ndarray:
        return self.sampling_errors + self.noise_errors


def candidate_errors(budgets: np.ndarray, sizes: np.ndarray | None = None, sensitivity: float = 1.0) -> Candidates:
    """``err_s`` and ``err_dp`` of every distinct positive budget, ``sizes[k]`` users holding ``budgets[k]``.

    ``budgets`` may repeat a value (two types with one budget): their users are pooled.
    """
    budgets = np.asarray(budgets, dtype=float)
    sizes = np.ones(budgets.size) if sizes is None else np.asarray(sizes, dtype=float)
    positive = (budgets > 0) & (sizes > 0)
    if not positive.all():
        budgets, sizes = budgets[positive], sizes[positive]
    order = np.argsort(budgets)
    values, counts = budgets[order], sizes[order]
    if values.size > 1:
        repeated = values[1:] == values[:-1]
        if repeated.any():  # rare: the types' budgets are mostly distinct
            distinct = np.flatnonzero(np.concatenate(([True], ~repeated)))
            values, counts = values[distinct], np.add.reduceat(counts, distinct)
    sampling = np.zeros(values.size)
    if values.size > 1:
        log_a = log_expm1(values)
        log_n = np.log(counts)
        # Prefix c-1 holds the budgets below candidate c.
        s1 = np.exp(np.logaddexp.accumulate(log_n + log_a)[:-1] - log_a[1:])  # sum n_k p_k
        twice = 2 * log_a
        s2 = np.exp(np.logaddexp.accumulate(log_n + twice)[:-1] - twice[1:])  # sum n_k p_k^2
        below = np.cumsum(counts)[:-1]
        sampling[1:] = (s1 - s2) + (below - s1) ** 2
    if values.size and values[0] < _TINY:
        with np.errstate(over="ignore", divide="ignore"):
            noise = 2.0 * sensitivity**2 / values**2
    else:
        noise = 2.0 * sensitivity**2 / values**2
    return Candidates(values, counts, sampling, noise)


def obs(budgets: np.ndarray, sizes: np.ndarray | None = None, sensitivity: float = 1.0) -> BudgetSelection | None:
    """Algorithm 1: the candidate of least error (the smallest one on a tie), or None if none is finite."""
    candidates = candidate_errors(budgets, sizes, sensitivity)
    errors = candidates.errors
    if not errors.size:
        return None
    best = int(np.argmin(errors))  # the first minimum: strict < over ascending candidates (a NaN first)
    error = float(errors[best])
    return BudgetSelection(float(candidates.values[best]), error) if math.isfinite(error) else None
