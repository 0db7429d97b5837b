"""Fenwick-tree arithmetic of a decayed block (Sun et al. 2019, Section 4, formulas 8-12).

A block holds ``L = 2^(H-1)`` consecutive slots with local indices 1..L. Node ``k`` covers local
positions ``[k - lowbit(k) + 1, k]``; its parent is ``k + lowbit(k)`` (while ``<= L``); node ``L``
is the root. ``Dec(r) = {r, r - lowbit(r), ...}`` is the set of nodes whose decayed values add up
to the decayed local prefix of ``r`` (formula 12, corrected: the paper writes ``r mod i`` for
``r mod 2^i``).

Everything here works on Python ints and, where noted, on numpy integer arrays.

>>> lowbit(12), level(12), decomposition(13), ancestors(5, 8)
(4, 2, [13, 12, 8], [5, 6, 8])
>>> [len(ancestors(j, 8)) for j in range(1, 9)]   # nodes per item for L = 8
[4, 3, 3, 2, 3, 2, 2, 1]
>>> default_block_size(65536), default_block_size(7)
(65536, 4)
"""

from __future__ import annotations

import numpy as np

from ..validation import ParameterError, check_positive_int

__all__ = ["lowbit", "level", "decomposition", "ancestors", "children", "default_block_size", "check_block_size",
           "height_of", "powers"]


def lowbit(k):
    """The lowest set bit of ``k`` (``x & -x``); elementwise on integer arrays."""
    return k & -k


def level(k):
    """``log2(lowbit(k))``: 0 for leaves (odd k), H-1 for the root; elementwise on integer arrays."""
    if isinstance(k, np.ndarray):
        return np.frexp(lowbit(k).astype(float))[1] - 1  # exact for powers of two
    return lowbit(k).bit_length() - 1


def decomposition(r: int) -> list[int]:
    """``Dec(r)``: the nodes whose decayed sums make up the local prefix ``[1, r]`` (popcount(r) of them)."""
    nodes = []
    while r > 0:
        nodes.append(r)
        r -= lowbit(r)
    return nodes


def ancestors(j: int, block_size: int) -> list[int]:
    """Item ``j``'s chain of nodes: ``j, j + lowbit(j), ...`` up to the root (at most H of them)."""
    chain = []
    while j <= block_size:
        chain.append(j)
        j += lowbit(j)
    return chain


def children(k: int) -> list[int]:
    """The nodes that push into node ``k``, in the order they complete (``k - 2^b`` for ``b < level(k)``)."""
    return [k - (1 << b) for b in range(level(k) - 1, -1, -1)]


def check_block_size(block_size) -> int:
    size = check_positive_int(block_size, "block size L")
    if size & (size - 1):
        raise ParameterError(f"block size L must be a power of two, got {block_size!r}")
    return size


def default_block_size(window: int) -> int:
    """The largest power of two ``<= W``, i.e. ``H = floor(log2 W) + 1`` (as in the paper's W = 5, H = 3)."""
    return 1 << (check_positive_int(window, "window W").bit_length() - 1)


def height_of(block_size: int) -> int:
    """Tree height ``H`` of a block of ``L = 2^(H-1)`` slots."""
    return block_size.bit_length()


def powers(base: float, largest: int) -> np.ndarray:
    """``base^k`` for ``k = 0..largest``, each computed directly (no accumulated rounding)."""
    return np.power(float(base), np.arange(largest + 1, dtype=float))
