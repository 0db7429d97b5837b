"""Exact decayed range sums of a scalar stream, from one running decayed sum per slot.

With ``S_k = p S_{k-1} + D_k`` (``S_0 = 0``), the decayed sum of slots ``l..r`` at the latest slot
``t`` is ``Σ_{i=l..r} p^(t-i) D_i = p^(t-r) S_r - p^(t-l+1) S_{l-1}``: two reads per answer. ``S``
stays below ``max |D| / (1 - p)``, so the difference keeps float precision (for ``p < 1``).

>>> sums = ExactDecayedSums(0.5)
>>> for value in (10.0, 10.0, 12.0):
...     sums.insert(value)
>>> sums.query(1, 3), sums.block(2, 3)             # 0.25*10 + 0.5*10 + 12; 0.5*10 + 12, at slot 3
(19.5, 17.0)
"""

from __future__ import annotations

import numpy as np

from ..validation import ParameterError
from ._base import check_decay

__all__ = ["ExactDecayedSums"]


class ExactDecayedSums:
    """Noise-free decayed range sums over every slot inserted so far (the truth of the baselines).

    Parameters
    ----------
    decay : p in (0, 1]; a slot of age x weighs ``p^x``.
    """

    def __init__(self, decay: float) -> None:
        self.decay = check_decay(decay)
        self._running = [0.0]  # S_0 .. S_t

    @property
    def slot(self) -> int:
        return len(self._running) - 1

    def insert(self, value: float) -> None:
        value = float(value)
        if not np.isfinite(value):
            raise ParameterError(f"a slot value must be finite, got {value!r}")
        self._running.append(self.decay * self._running[-1] + value)

    def block(self, l: int, r: int) -> float:
        """``Σ_{i=l..r} p^(r-i) D_i``: the range decayed to its own end."""
        self._check(l, r)
        return self._running[r] - self.decay ** (r - l + 1) * self._running[l - 1]

    def query(self, l: int, r: int) -> float:
        """``Σ_{i=l..r} p^(t-i) D_i`` at the latest slot t."""
        return self.decay ** (self.slot - r) * self.block(l, r)

    def _check(self, l: int, r: int) -> None:
        if not 1 <= l <= r <= self.slot:
            raise ParameterError(f"range {l}..{r} is not within the slots 1..{self.slot} inserted")
