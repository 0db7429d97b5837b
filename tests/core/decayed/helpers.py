"""Independent reference constructions for the decayed-range-query oracles (Sun et al. 2019, formulas 5-17).

Everything here follows the paper's definitions directly (dense matrices, exact rationals, loops),
never the code under test.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from wevent.core.randomness import SecretKey, ZeroNoise


def zero_noise(stream: str = "test") -> ZeroNoise:
    return ZeroNoise(SecretKey.from_seed(0), stream)


def node_range(k: int) -> range:
    """Local positions covered by node k: ``[k - lowbit(k) + 1, k]``."""
    return range(k - (k & -k) + 1, k + 1)


def strategy_matrix(n: int, block_size: int, p: float, lambdas=None) -> np.ndarray:
    """``Λ𝐋`` (n×n): row k holds node k's coefficients ``λ p^(k-j)`` on the items of its range, same block."""
    matrix = np.zeros((n, n))
    for row in range(1, n + 1):
        block, k = divmod(row - 1, block_size)
        k += 1
        scale = 1.0 if lambdas is None else lambdas[k]
        for j in node_range(k):
            matrix[row - 1, block * block_size + j - 1] = scale * p ** (k - j)
    return matrix


def reconstruction_matrix(n: int, block_size: int, p: float) -> np.ndarray:
    """``𝐁`` (n×n): global prefix r = local Dec(r') of its block plus the root of every earlier block."""
    matrix = np.zeros((n, n))
    for r in range(1, n + 1):
        block, local = divmod(r - 1, block_size)
        local += 1
        nodes = [block * block_size + m for m in _dec(local)] + [b * block_size + block_size for b in range(block)]
        for node in nodes:
            matrix[r - 1, node - 1] = p ** (r - node)
    return matrix


def workload(n: int, p: float) -> np.ndarray:
    """``𝐖[r][j] = p^(r-j)`` for j <= r."""
    r, j = np.indices((n, n))
    return np.where(j <= r, float(p) ** np.maximum(r - j, 0), 0.0)


def _dec(r: int) -> list[int]:
    # Dec(r) = { r - (r mod 2^b) : bit b of r is 1 }   (formula 12, second form)
    return [r - (r % (1 << b)) for b in range(r.bit_length()) if r >> b & 1]


def exact_prefixes(data, p: Fraction, t: int) -> list[Fraction]:
    """``C[x] = Σ_{i<=x} p^(t-i) D_i`` in exact rationals (C[0] = 0), so a range is ``C[r] - C[l-1]``."""
    out = [Fraction(0)]
    for i, value in enumerate(data[:t], start=1):
        out.append(out[-1] + p ** (t - i) * Fraction(value))
    return out


def naive_decayed(data: np.ndarray, p: float, l: int, r: int, t: int) -> np.ndarray:
    """``Σ_{i=l..r} p^(t-i) D_i`` by a plain loop (rows of ``data`` are slots 1..n)."""
    total = np.zeros(np.shape(data)[1:])
    for i in range(l, r + 1):
        total = total + p ** (t - i) * np.asarray(data[i - 1], dtype=float)
    return total
