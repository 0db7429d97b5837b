"""GetLambda (Algorithm 2 of Sun et al. 2019): the diagonal ``Λ`` that rescales each tree node.

Algorithm 3 releases ``λ_k · S_k + Lap`` and divides by ``λ_k``: nodes near the root, which enter
many prefixes, get relatively less noise. Three variants (Algorithm 2's left branch is
read as multiplying ``δ_m``, printed ``δ_t``; "cai" is the alternative for its suspected
off-by-one):

* ``"none"``: ``λ ≡ 1`` (Algorithm 1, no matrix optimisation).
* ``"paper"`` (default): ``δ_m = cbrt(err_m) / (cbrt(err_m) + cbrt(2^m p²))`` with
  ``cbrt(err_m) = Σ_{b<m} 2^(b/3)`` and ``λ_k = (1 - δ_{lev(k)+1}) / p · Π_{b ∈ Z(k)} δ_{b+1}``,
  ``Z(k)`` the levels of k's proper ancestors (bits above lev(k) that are 0 in k).
* ``"cai"``: Cai, Wu & Wang 2016 (same group), factor ``μ_i`` with ``μ_1 = 0``, no ``/p``; every odd
  item's chain sums to exactly 1.

>>> lambda_table(4, 1.0, "paper")[1:].round(6).tolist()          # L = 4, p = 1
[0.21547, 0.271475, 0.366819, 0.342037]
>>> lambda_table(4, 1.0, "cai")[1:].round(6).tolist()
[0.262884, 0.331213, 0.594097, 0.405903]
>>> round(get_lambda(4, 3, 1.0), 6)                                   # the loop form of Algorithm 2
0.366819
"""

from __future__ import annotations

import numpy as np

from ..validation import ParameterError
from .tree import height_of, level

__all__ = ["LAMBDA_VARIANTS", "paper_deltas", "cai_factors", "get_lambda", "lambda_table"]

LAMBDA_VARIANTS = ("none", "paper", "cai")


def paper_deltas(height: int, p: float) -> np.ndarray:
    """``δ_1 .. δ_H`` (entry ``m-1`` is ``δ_m``) of Algorithm 2."""
    m = np.arange(1, height + 1, dtype=float)
    cbrt_err = np.cumsum(np.cbrt(2.0 ** (m - 1)))  # cbrt(err_m) = Σ_{b<m} 2^(b/3)
    return cbrt_err / (cbrt_err + np.cbrt(2.0**m * p * p))


def cai_factors(height: int, p: float) -> np.ndarray:
    """``μ_1 .. μ_H`` of Cai et al.: ``μ_1 = 0``, ``μ_i = cbrt(c_{i-1}) / (cbrt(c_{i-1}) + cbrt(2^(i-1) p²))``."""
    mu = np.zeros(height)
    c = 1.0  # c_1
    for i in range(2, height + 1):
        mu[i - 1] = np.cbrt(c) / (np.cbrt(c) + np.cbrt(2.0 ** (i - 1) * p * p))
        c = (np.cbrt(c) + np.cbrt(2.0 ** (i - 1))) ** 3 + c
    return mu


def get_lambda(block_size: int, k: int, p: float, deltas: np.ndarray | None = None) -> float:
    """Algorithm 2 as printed (the left branch multiplies ``δ_m``, not ``δ_t``): ``λ_k`` for a block of ``T = L``."""
    if deltas is None:
        deltas = paper_deltas(height_of(block_size), p)
    lam, kt, m, div = 1.0, k, height_of(block_size), block_size
    while div != kt:
        if kt < div:
            lam *= deltas[m - 1]
        else:  # right part: nothing is multiplied at this level
            kt -= div
        div //= 2
        m -= 1
    return float(lam * (1.0 - deltas[m - 1]) / p)


def lambda_table(block_size: int, p: float, variant: str = "paper") -> np.ndarray:
    """``λ_0 .. λ_L`` (``λ_0`` unused, 0) in closed form, vectorised over k: O(L log L) once at start-up."""
    if variant not in LAMBDA_VARIANTS:
        raise ParameterError(f"lambda_variant must be one of {', '.join(LAMBDA_VARIANTS)}, got {variant!r}")
    table = np.zeros(block_size + 1)
    if variant == "none":
        table[1:] = 1.0
        return table
    height = height_of(block_size)
    factors = paper_deltas(height, p) if variant == "paper" else cai_factors(height, p)
    k = np.arange(1, block_size + 1)
    lev = level(k)
    lam = 1.0 - factors[lev]
    if variant == "paper":
        lam /= p  # the paper's trailing /p is never explained; kept in this variant, which is the paper's
    for b in range(1, height):  # the levels of the proper ancestors: bits above lev(k) that are 0
        above = (b > lev) & ((k >> b) & 1 == 0)
        lam[above] *= factors[b]
    table[1:] = lam
    return table
