"""The decayed Fenwick store: Algorithm 1/3 insert and Algorithm 4 range assembly (Sun et al. 2019).

The stream is cut into blocks of ``L`` consecutive slots, one Fenwick tree each.
Per slot ``i`` (local index ``k``) the insert completes node ``k``, adds its noise, pushes the
node's noise-free value to its parent and extends the block's decayed prefix array
``P[k] = p^lowbit(k) · P[k - lowbit(k)] + S̃[k]``: O(d) work, one parent update. A range
``[l, r]`` decayed to time ``t`` is assembled from two or three prefix values per block touched
(Algorithm 4): ``ans_t(l, r) = Σ_{i=l..r} p^(t-i) D_i``.

Memory: the node array of a block is dropped when the block is sealed (only its prefixes are
read by queries), and whole blocks that end before the window ``[t-W+1, t]`` are freed. In the
oldest live block, once sealed, only rows ``>= local(t-W+1) - 1`` are needed (the paper's "delete slid-out
sums" must keep the prefix just before the oldest position in the window);
they are what the state keeps.

Vectorised over ``d`` bins: every row is a vector of d values; with d = 1 a row is a scalar
(arrays of shape (L+1,)), because numpy arithmetic on one-element arrays costs microseconds.

>>> fenwick = DecayedFenwick(decay=0.5, window=7, block_size=4)
>>> for x in (1, 3, 5, 2, 4, 7, 6):                       # the paper's example
...     _ = fenwick.insert(float(x))
>>> float(fenwick.decayed_sum(2, 5))                       # Σ_{i=2..5} 0.5^(7-i) D_i
1.65625
>>> fenwick.noise_terms(2, 5)[0].tolist()                  # the nodes whose noise it carries: S_1, S_4, S_5
[1, 4, 5]
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..validation import ParameterError
from .tree import ancestors, children, decomposition, height_of, lowbit, powers

__all__ = ["DecayedFenwick"]

NoiseOf = Callable[[int], "np.ndarray | float | None"]


class DecayedFenwick:
    """Blocks of decayed Fenwick trees over ``d`` bins with O(1) insert and O(1) range assembly.

    Parameters
    ----------
    decay : p in (0, 1].
    window : W; slots older than ``t - W + 1`` may be freed.
    block_size : L, a power of two.
    bins : d, the width of every row (d = 1: rows are scalars, values are passed as floats).
    node_variance : optional, the variance of the noise of node k (index 0 unused); when given,
        :meth:`noise_variance` gives the exact variance of any answer in O(1).
    grid : optional, a power of two: each completed node is rounded to a multiple of it (at most
        ``grid_units`` of them either way) before its noise is added, and parents receive the
        rounded value, which a restored store recomputes exactly as ``S̃ - noise``.

    Times are 1-based and internal (slot 1 is the first insert). Query methods assume
    ``max(1, t-W+1) <= l <= r <= t``: the indexes built on this store validate their input.
    """

    def __init__(self, decay: float, window: int, block_size: int, bins: int = 1,
                 node_variance: np.ndarray | None = None, grid: float | None = None, grid_units: int = 2**51) -> None:
        self.decay = float(decay)
        self.window = int(window)
        self.block_size = int(block_size)
        self.height = height_of(self.block_size)
        self.bins = int(bins)
        self._shape = (self.block_size + 1,) if self.bins == 1 else (self.block_size + 1, self.bins)
        self.powers = powers(self.decay, max(self.window, self.block_size))
        self.time = 0
        self._first_block = 0  # index of the oldest live block
        self._prefixes: list[np.ndarray] = []  # P (L+1, d) of every live block, oldest first
        self._nodes: np.ndarray | None = None  # S (L+1, d) of the open block; None once sealed
        self._prefix_variance = None if node_variance is None else self._variance_table(np.asarray(node_variance))
        self.grid, self.grid_units = grid, float(grid_units)

    # --- Algorithm 1 / 3 -----------------------------------------------------------------------
    def insert(self, values: np.ndarray | float, noise: np.ndarray | float | None = None) -> np.ndarray | float:
        """Insert slot ``time + 1``: complete its node, add ``noise`` (one draw), release it.

        Returns the released node value ``S̃[k]`` (a copy). The parent receives the node's value
        without noise, computed as ``S̃[k] - noise`` so that a restored store, which sees only
        ``S̃`` and re-derives the noise, rebuilds the parent bit for bit.
        """
        i = self.time + 1
        k = (i - 1) % self.block_size + 1
        if k == 1:
            self._nodes = np.zeros(self._shape)
            self._prefixes.append(np.zeros(self._shape))
        nodes, prefix = self._nodes, self._prefixes[-1]
        assert nodes is not None  # a block's nodes live from its first insert until it is sealed
        nodes[k] += values  # node k is now complete: its children were folded in earlier
        if self.grid is not None:
            nodes[k] = np.clip(np.rint(nodes[k] / self.grid), -self.grid_units, self.grid_units) * self.grid
        if noise is not None:
            nodes[k] += noise
        self._push(nodes, k, noise)
        step = lowbit(k)
        prefix[k] = prefix[k - step] * self.powers[step] + nodes[k]
        self.time = i
        released = nodes[k].copy()
        if k == self.block_size:
            self._nodes = None  # sealed: node values are no longer needed, prefixes are
        self._free_expired()
        return released

    def _push(self, nodes: np.ndarray, k: int, noise) -> None:
        parent = k + lowbit(k)
        if parent <= self.block_size:
            exact = nodes[k] if noise is None else nodes[k] - noise
            nodes[parent] += exact * self.powers[lowbit(k)]

    def _free_expired(self) -> None:
        oldest = self.time - self.window + 1
        while (self._first_block + 1) * self.block_size < oldest:
            self._prefixes.pop(0)
            self._first_block += 1

    # --- Algorithm 4 query assembly ----------------------------------------------------------
    def _split(self, i: int) -> tuple[int, int]:
        block, local = divmod(i - 1, self.block_size)
        return block, local + 1

    def _prefix(self, block: int) -> np.ndarray:
        return self._prefixes[block - self._first_block]

    def decayed_sum(self, l: int, r: int, t: int | None = None) -> np.ndarray | float:
        """``Σ_{i=l..r} p^(t-i) D_i`` (plus the released noise), one value per bin; ``t`` defaults to now."""
        t = self.time if t is None else t
        pw, size = self.powers, self.block_size
        bl, lo = self._split(l)
        br, hi = self._split(r)
        first = self._prefix(bl)
        if bl == br:
            decayed = first[hi] - pw[hi - lo + 1] * first[lo - 1]
        else:
            carried = first[size] - pw[size - lo + 1] * first[lo - 1]  # [l, end of block bl]
            for block in range(bl + 1, br):
                carried = pw[size] * carried + self._prefix(block)[size]
            decayed = self._prefix(br)[hi] + pw[hi] * carried
        return pw[t - r] * decayed

    def noise_variance(self, l: int, r: int, t: int | None = None) -> float:
        """Exact variance of the noise in :meth:`decayed_sum` (Algorithm 4's assembly), in O(1) like the answer itself.

        ``V[k]``, the variance of the local prefix ``P[k]``, follows the prefix recurrence with
        ``p²``. Within one block the nodes of ``Dec(l'-1) ∩ Dec(r')`` cancel exactly; that
        intersection is ``Dec(g)``, g = the common high bits of ``r'`` and ``l'-1``.
        Across blocks the answer's three parts have disjoint nodes and their variances add.
        """
        if self._prefix_variance is None:
            raise ParameterError("this store has no noise model (node_variance was not given)")
        t = self.time if t is None else t
        var, sq, size = self._prefix_variance, self._squares, self.block_size
        bl, lo = self._split(l)
        br, hi = self._split(r)
        if bl == br:
            common = hi >> (hi ^ (lo - 1)).bit_length() << (hi ^ (lo - 1)).bit_length()
            total = (var[hi] - sq[hi - common] * var[common]) + sq[hi - lo + 1] * (
                var[lo - 1] - sq[lo - 1 - common] * var[common])
        else:
            carried = var[size] + sq[size - lo + 1] * var[lo - 1]
            for _ in range(bl + 1, br):
                carried = sq[size] * carried + var[size]
            total = var[hi] + sq[hi] * carried
        return float(sq[t - r] * max(total, 0.0))  # max: rounding must not make it negative

    def noise_terms(self, l: int, r: int, t: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The nodes whose noise enters :meth:`decayed_sum` and their coefficients ``±p^(t-pos)``.

        Returns ``(positions, coefficients)`` sorted by position (a node's position is the slot
        that completes it). Nodes shared by both prefixes of a same-block range cancel and are
        left out, so ``len(positions) <= 2H +`` the number of blocks strictly between l and r.
        """
        t = self.time if t is None else t
        bl, lo = self._split(l)
        br, hi = self._split(r)
        terms: dict[int, float] = {}

        def add(block: int, nodes: list[int], sign: float) -> None:
            for node in nodes:
                position = block * self.block_size + node
                terms[position] = terms.get(position, 0.0) + sign * self.decay ** (t - position)  # may be older than W

        add(br, decomposition(hi), 1.0)
        add(bl, decomposition(lo - 1), -1.0)
        for block in range(bl, br):
            add(block, [self.block_size], 1.0)  # the roots of every block before r's
        positions = np.array(sorted(p for p, c in terms.items() if c != 0.0), dtype=int)
        return positions, np.array([terms[p] for p in positions])

    def node(self, i: int) -> np.ndarray | float:
        """The released value ``S̃`` of the node completed at time ``i`` (open block only)."""
        block, k = self._split(i)
        if not 1 <= i <= self.time:
            raise ParameterError(f"node of slot {i} is not released (released slots: 1..{self.time})")
        if self._nodes is None or block != self._first_block + len(self._prefixes) - 1:
            raise ParameterError(f"node of slot {i} is in a sealed block: its value was freed, its prefix kept")
        return self._nodes[k].copy()

    # --- noise model -------------------------------------------------------------------------
    def _variance_table(self, node_variance: np.ndarray) -> np.ndarray:
        """``V[k] = Σ_{n ∈ Dec(k)} p^(2(k-n)) var_n`` for k = 0..L, one numpy pass per bit."""
        self._squares = self.powers**2
        k = np.arange(self.block_size + 1)
        table = np.zeros(self.block_size + 1)
        for b in range(self.height):
            node = k & ~((1 << b) - 1)  # the element of Dec(k) that ends at bit b
            has = (k >> b) & 1 == 1
            table[has] += self._squares[(k - node)[has]] * node_variance[node[has]]
        return table

    # --- state -------------------------------------------------------------------------------
    def _open_local(self) -> int:
        """Local index of the last insert if its block is open, else 0."""
        return 0 if self._nodes is None else (self.time - 1) % self.block_size + 1

    def _rows(self) -> list[tuple[int, int]]:
        """Rows of each live prefix array that queries may still read: ``[from, to]``."""
        oldest = max(1, self.time - self.window + 1)
        rows = [(0, self.block_size) for _ in self._prefixes]
        if self._nodes is not None:  # the open block keeps row 0 on: inserts read P[k - lowbit(k)]
            rows[-1] = (0, self._open_local())
        if len(rows) > 1 or (rows and self._nodes is None):
            rows[0] = (oldest - 1 - self._first_block * self.block_size, self.block_size)
        return rows

    def state_dict(self) -> dict[str, Any]:
        """Released values only: the needed prefix rows and the open block's released nodes."""
        k = self._open_local()
        return {
            "time": self.time,
            "first_block": self._first_block,
            "prefixes": [prefix[lo : hi + 1].copy() for prefix, (lo, hi) in zip(self._prefixes, self._rows())],
            "nodes": None if self._nodes is None else self._nodes[1 : k + 1].copy(),
        }

    def load_state(self, state: dict[str, Any], noise_of: NoiseOf | None = None) -> None:
        """Inverse of :meth:`state_dict`; ``noise_of(i)`` re-derives the noise of slot i's node.

        The parents of the open block's pending nodes hold noise-free partial sums, which are not
        part of the (public) state: they are rebuilt as ``Σ (S̃_c - noise_c) · p^lowbit(c)`` over
        their released children, in the order the live store pushed them.
        """
        self.time = int(state["time"])
        self._first_block = int(state["first_block"])
        self._nodes = None if state["nodes"] is None else np.zeros(self._shape)
        self._prefixes = [np.zeros(self._shape) for _ in state["prefixes"]]
        for prefix, rows, (lo, _) in zip(self._prefixes, state["prefixes"], self._rows()):
            prefix[:lo] = np.nan  # freed rows: any read of them would show
            prefix[lo : lo + len(rows)] = rows
        nodes = self._nodes
        if nodes is None:
            return
        k = self._open_local()
        nodes[1 : k + 1] = state["nodes"]
        start = (self.time - k)  # global time of local position 0 of the open block
        for pending in ancestors(k, self.block_size)[1:]:
            for child in children(pending):
                if child <= k:
                    self._push(nodes, child, None if noise_of is None else noise_of(start + child))
