"""The Sampling Mechanism SM of Jorgensen, Yu, Cormode (ICDE 2015, Alg. 1), used by every PWSM step.

Given per-user budgets ``e_i`` and a threshold ``theta > 0``:

* SM_s keeps user i with probability ``p_i = 1`` if ``e_i >= theta``, else
  ``p_i = (exp(e_i) - 1) / (exp(theta) - 1)`` (users with ``e_i = 0`` are never kept);
* SM_d releases the kept users' histogram, not rescaled (so that it stays
  consistent with the sampling error, bias included, that OBS minimises), plus ``Lap(Delta/theta)``
  per bin. In the mechanisms this is ``CentralMechanism._fresh`` applied to the kept histogram.

User i then gets ``min(e_i, theta)``-DP: for ``e_i < theta`` the worst likelihood ratio is
``1 + p_i (e^theta - 1) = e^{e_i}`` exactly.

Users of one requirement type share one budget, so SM_s on a ``(types, d)`` count matrix is an
exact binomial thinning of each cell with its type's ``p``: the same distribution as one
Bernoulli coin per user, in O(types x d) and with no per-user loop. The coins of a slot come from
one derived generator at ``(slot, phase)``, drawn only when some type has ``p < 1``.

Spend: nothing by itself; the caller charges each user the allocated ``e_i``, not the
``min(e_i, theta)`` the sample gives them (conservative).

>>> keep_probabilities(np.array([0.1, 0.4, 0.8]), 0.4).round(4).tolist()
[0.2138, 1.0, 1.0]
>>> from wevent.core.randomness import DerivedRandomness, Phase, SecretKey
>>> rng = DerivedRandomness(SecretKey.from_seed(0))
>>> counts = np.array([[3, 5], [7, 1]])
>>> sample_counts(counts, np.array([1.0, 1.0]), rng, 1, Phase.SAMPLE_PUBLICATION) is counts  # no coins
True
>>> kept = sample_counts(counts, np.array([0.5, 1.0]), rng, 1, Phase.SAMPLE_PUBLICATION)
>>> bool((kept <= counts).all()) and kept[1].tolist() == [7, 1]
True
"""

from __future__ import annotations

import numpy as np

from ..randomness import DerivedRandomness

__all__ = ["log_expm1", "keep_probabilities", "sample_counts"]

# Above this, expm1 is within a relative 1e-13 of exp and log(expm1(x)) = x + log1p(-exp(-x)) is exact.
_LARGE = 30.0


def log_expm1(x: np.ndarray) -> np.ndarray:
    """``log(exp(x) - 1)`` for ``x > 0``, finite for every finite ``x`` (no overflow beyond 709)."""
    x = np.asarray(x, dtype=float)
    if x.size and x.max() <= _LARGE:  # the common case: one expression
        return np.log(np.expm1(x))
    out = np.empty_like(x)
    large = x > _LARGE
    out[large] = x[large] + np.log1p(-np.exp(-x[large]))
    out[~large] = np.log(np.expm1(x[~large]))
    return out


def keep_probabilities(budgets: np.ndarray, theta: float) -> np.ndarray:
    """SM_s inclusion probability of each budget at threshold ``theta`` (stable for huge budgets).

    The ratio ``expm1(e) / expm1(theta)`` is taken in the log domain, so budgets of any size
    (e.g. 1e6) give a finite probability in ``[0, 1]``.
    """
    budgets = np.asarray(budgets, dtype=float)
    below = budgets < theta
    if not below.any():
        return np.ones_like(budgets)
    p = np.where(below, 0.0, 1.0)
    positive = below & (budgets > 0)
    p[positive] = np.exp(log_expm1(budgets[positive]) - log_expm1(np.array([theta]))[0])
    # A budget a few ulps below theta gives a ratio that rounds to 1: such a user must still be
    # sampled, not kept for certain (that would spend theta, above their budget).
    p[below] = np.minimum(p[below], np.nextafter(1.0, 0.0))
    return p


def sample_counts(counts: np.ndarray, probabilities: np.ndarray, randomness: DerivedRandomness, slot: int,
                  phase: int) -> np.ndarray:
    """SM_s on a ``(types, d)`` count matrix: keep each user of type k with ``probabilities[k]``.

    Returns ``counts`` itself when every probability is 1 (no generator is built, no coin drawn),
    else a new matrix whose rows with ``p < 1`` are ``Binomial(counts[k, j], p_k)`` draws from
    the generator at ``(slot, phase)``.
    """
    partial = probabilities < 1.0
    if not partial.any():
        return counts
    kept = counts.copy()
    kept[partial] = randomness.transient_generator(slot, phase).binomial(counts[partial], probabilities[partial, None])
    return kept
