"""EX: decayed range queries from a dyadic interval tree, the tree baseline of Sun et al. (2019), Section 4.

The interval-tree approach (Chan, Shi and Song's binary tree, as Zhang and Meng use it for decayed
sums): every completed dyadic block of ``2^j`` slots, ``j = 0..h-1`` with ``2^(h-1) >= W``, is
released once as its sum decayed to its own end plus ``Lap(h/ε)``. A slot lies in one block per
level and weighs at most 1 in each, so the releases are ε-differentially private at the event
level; any number of queries then costs nothing. A range ``[l, r]`` splits into at most
``2 log2 W`` maximal aligned blocks, and its answer at slot t is ``Σ_b p^(t - end_b) · block_b``:
O(log W) per query, against RTP_DMM's O(1).

>>> import numpy as np
>>> ex = IntervalTree(epsilon=1.0, window=4, decay=0.5, rng=np.random.default_rng(0))
>>> for value in (10.0, 10.0, 12.0):
...     ex.insert(value)
>>> ex.levels, ex.blocks(1, 3)                       # slots 1-2 form one block, slot 3 another
(3, [(1, 2), (3, 3)])
>>> answer, standard_error = ex.query(1, 3)
>>> round(standard_error ** 2, 6)                    # 2 (h/eps)^2 (0.5^2 + 1)
22.5
"""

from __future__ import annotations

import math

import numpy as np

from ..validation import ParameterError, check_epsilon, check_positive_int
from .exact_sums import ExactDecayedSums

__all__ = ["IntervalTree"]


class IntervalTree:
    """Noisy dyadic blocks of a scalar stream, combined into decayed range answers.

    Parameters
    ----------
    epsilon : the event-level budget of all the releases.
    window : W, the query window: ranges must lie in ``[t-W+1, t]``.
    decay : p in (0, 1].
    rng : the noise's generator.
    """

    def __init__(self, epsilon: float, window: int, decay: float, *, rng: np.random.Generator) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.window = check_positive_int(window, "window W")
        self.levels = max(1, math.ceil(math.log2(window))) + 1  # blocks up to 2^(h-1) >= W slots
        self.scale = self.levels / self.epsilon
        self._sums = ExactDecayedSums(decay)
        self._rng = rng
        self._released: list[dict[int, float]] = [{} for _ in range(self.levels)]  # level -> block end -> value

    def insert(self, value: float) -> None:
        self._sums.insert(value)
        t = self._sums.slot
        for level in range(self.levels):
            size = 1 << level
            if t % size:
                break
            released = self._released[level]
            released[t] = self._sums.block(t - size + 1, t) + float(self._rng.laplace(0.0, self.scale))
            released.pop(t - size * (self.window // size + 2), None)  # blocks that left the window for good

    def blocks(self, l: int, r: int) -> list[tuple[int, int]]:
        """The maximal aligned dyadic blocks that tile ``[l, r]``, left to right."""
        blocks = []
        while l <= r:
            aligned = min(self.levels - 1, ((l - 1) & -(l - 1)).bit_length() - 1 if l > 1 else self.levels - 1)
            size = 1 << min(aligned, (r - l + 1).bit_length() - 1)  # the largest aligned block within [l, r]
            blocks.append((l, l + size - 1))
            l += size
        return blocks

    def query(self, l: int, r: int) -> tuple[float, float]:
        """``(answer, standard_error)`` of ``Σ_{i=l..r} p^(t-i) D_i`` at the latest slot t."""
        t = self._sums.slot
        if not max(1, t - self.window + 1) <= l <= r <= t:
            raise ParameterError(f"range {l}..{r} is outside the window {max(1, t - self.window + 1)}..{t}")
        p = self._sums.decay
        blocks = self.blocks(l, r)
        weights = np.array([p ** (t - end) for _, end in blocks])
        values = np.array([self._released[(end - start + 1).bit_length() - 1][end] for start, end in blocks])
        return float(weights @ values), math.sqrt(2.0 * float(weights @ weights)) * self.scale
