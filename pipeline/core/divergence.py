"""AJSD: the average Jensen-Shannon divergence of releases from the truth (Du et al., PVLDB 2025, Eq. 16).

Each slot's release and true histogram are compared as distributions over the d bins. A private
release can have negative bins, which no distribution has, so each release is clipped at 0 before
both are normalised to sum 1 (a slot with nothing left is taken as uniform). With ``v = (r + c)/2``,
``JSD(r || c) = KL(r || v)/2 + KL(c || v)/2`` in nats (``0 log 0 = 0``), between 0 and ln 2; AJSD
is its mean over the slots.

>>> round(ajsd([[1.0, 0.0]], [[0.0, 1.0]]), 6) == round(float(np.log(2)), 6)   # disjoint: ln 2
True
>>> ajsd([[2.0, 2.0], [-1.0, 3.0]], [[1.0, 1.0], [0.0, 5.0]])                   # same shapes after clipping
0.0
"""

from __future__ import annotations

import numpy as np

from .validation import ParameterError

__all__ = ["ajsd", "jensen_shannon"]


def _distributions(histograms: np.ndarray) -> np.ndarray:
    clipped = np.clip(histograms, 0.0, None)
    totals = clipped.sum(axis=1, keepdims=True)
    uniform = np.full_like(clipped, 1.0 / clipped.shape[1])
    return np.where(totals > 0, clipped / np.where(totals > 0, totals, 1.0), uniform)


def jensen_shannon(releases, truth) -> np.ndarray:
    """The Jensen-Shannon divergence (nats) of every slot's release from its truth, shape (T,).

    Parameters
    ----------
    releases, truth : (T, d) histograms; releases may be negative (they are clipped at 0).
    """
    r = np.asarray(releases, dtype=float)
    c = np.asarray(truth, dtype=float)
    if r.shape != c.shape or r.ndim != 2:
        raise ParameterError(f"releases {r.shape} and truth {c.shape} must be the same (T, d) shape")
    r, c = _distributions(r), _distributions(c)
    v = (r + c) / 2.0

    def kl(a: np.ndarray) -> np.ndarray:
        ratio = np.divide(a, v, out=np.ones_like(a), where=a > 0)  # a > 0 implies v > 0
        return (a * np.log(ratio)).sum(axis=1)

    return (kl(r) + kl(c)) / 2.0


def ajsd(releases, truth) -> float:
    """AJSD: the mean over slots of :func:`jensen_shannon`."""
    return float(jensen_shannon(releases, truth).mean())
