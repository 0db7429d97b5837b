"""L1 sensitivity of the released node vector, computed exactly for the chosen Λ (Modes B and C).

Item ``j`` of a block enters the nodes of its ancestor chain ``a`` with coefficient
``λ_a · p^(a-j) <= 1``, so the L1 norm of column ``j`` of ``Λ𝐋`` is
``f(j) = λ_j + p^lowbit(j) · f(j + lowbit(j))`` (``f(L) = λ_L``), computed for all j in O(L).

* Event level (the paper): one item changes by 1, ``Δ = max_j f(j)``.
* w-event (Mode B): any items inside one window of ``w`` consecutive slots change, each by at
  most ``c`` in each of ``m`` bins (m = 1 add/remove, m = 2 replacement), so
  ``Δ_w = c · m · max_s Σ_{j=s..s+w-1} f(local(j))``. Windows may straddle blocks; the sequence of
  column norms repeats with period L, so starts ``s`` in one period suffice.

>>> from wevent.core.decayed.lambdas import lambda_table
>>> f = column_norms(lambda_table(8, 1.0, "none"), 1.0)
>>> f[1:].tolist()                       # λ ≡ 1, p = 1: the chain lengths
[4.0, 3.0, 3.0, 2.0, 3.0, 2.0, 2.0, 1.0]
>>> window_sensitivity(f, 1), window_sensitivity(f, 3), window_sensitivity(f, 3, neighbours=2)
(4.0, 10.0, 20.0)
>>> round(window_sensitivity(column_norms(lambda_table(4, 1.0, "paper"), 1.0), 1), 6)
0.828982
"""

from __future__ import annotations

import numpy as np

from .tree import height_of

__all__ = ["column_norms", "window_sensitivity", "rounding_weights"]


def column_norms(lambdas: np.ndarray, p: float) -> np.ndarray:
    """``f(0..L)`` (``f(0)`` unused, 0): the L1 norm of each column of ``Λ𝐋``, one numpy pass per level."""
    block_size = lambdas.size - 1
    f = np.zeros(block_size + 1)
    for lev in range(height_of(block_size) - 1, -1, -1):  # parents (higher levels) first
        step = 1 << lev
        nodes = np.arange(step, block_size + 1, 2 * step)  # the nodes of this level
        parents = nodes + step
        inside = parents <= block_size
        f[nodes] = lambdas[nodes]
        f[nodes[inside]] += p**step * f[parents[inside]]
    return f


def window_sensitivity(norms: np.ndarray, window: int, neighbours: int = 1, bound: float = 1.0) -> float:
    """``Δ_w = bound · neighbours · max_s Σ_{j=s..s+w-1} f(local(j))`` in O(L) whatever ``w`` (w = 1: event-level Δ).

    A window of ``q·L + rest`` slots holds ``q`` full periods of the column norms plus ``rest``
    consecutive ones, so only the best ``rest``-window over one (wrapped) period is searched.
    """
    period = norms[1:]
    full, rest = divmod(int(window), period.size)
    wrapped = np.concatenate([[0.0], np.cumsum(np.concatenate([period, period[: max(rest - 1, 0)]]))])
    best_rest = float(np.max(wrapped[rest : rest + period.size] - wrapped[: period.size])) if rest else 0.0
    return float(bound) * int(neighbours) * (full * float(period.sum()) + best_rest)


def rounding_weights(lambdas: np.ndarray) -> np.ndarray:
    """``h(0..L)``: ``h(j) = Σ_{c ∈ anc(j)} A(c)`` with ``A(c) = Σ_{k ∈ anc(c)} λ_k`` (ancestor chains include the node).

    When every node is rounded to a grid ``g`` before its noise is added and parents sum their
    children's rounded values, a change of item j moves the λ-weighted node vector by at most
    ``g h(j)`` beyond its exact sensitivity per grid unit a changed node can be off by (each
    node it reaches is off by those units, and the error reaches every ancestor with a weight
    ``p^x <= 1``). :class:`.RTPDMM` counts two units (grid and float rounding) and adds
    ``2 g * window_sensitivity(h, w, m)`` to its sensitivity for discrete noise.

    >>> from wevent.core.decayed.lambdas import lambda_table
    >>> rounding_weights(lambda_table(4, 1.0, "none"))[1:].tolist()   # λ ≡ 1: A = chain lengths 3, 2, 2, 1
    [6.0, 3.0, 3.0, 1.0]
    """
    block_size = lambdas.size - 1
    chains, weights = np.zeros(block_size + 1), np.zeros(block_size + 1)
    for lev in range(height_of(block_size) - 1, -1, -1):  # parents first, as in column_norms
        step = 1 << lev
        nodes = np.arange(step, block_size + 1, 2 * step)
        parents = nodes + step
        inside = parents <= block_size
        chains[nodes] = lambdas[nodes]
        chains[nodes[inside]] += chains[parents[inside]]
        weights[nodes] = chains[nodes]
        weights[nodes[inside]] += weights[parents[inside]]
    return weights
