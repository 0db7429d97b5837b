"""LP: Laplace noise on each decayed range answer, the direct baseline of Sun et al. (2019), Section 4.

Every slot one range query is answered as its exact decayed sum plus ``Lap(S/ε)``. One slot's
value ``D_i`` enters the answer of slot t with weight ``p^(t-i)`` and only while it is in the
window, so the whole sequence of answers moves by at most ``S = Σ_{k=0}^{W-1} p^k`` in L1 when
``D_i`` changes by 1: the sequence is ε-differentially private at the event level. A second
query in one slot would break that bound and is refused.

>>> import numpy as np
>>> lp = LPAnswer(epsilon=1.0, window=4, decay=0.5, rng=np.random.default_rng(0))
>>> for value in (10.0, 10.0, 12.0):
...     lp.insert(value)
>>> answer, standard_error = lp.query(1, 3)
>>> lp.sensitivity, round(standard_error, 6)         # 1 + 1/2 + 1/4 + 1/8; sqrt(2) * S / eps
(1.875, 2.65165)
"""

from __future__ import annotations

import math

import numpy as np

from ..validation import ParameterError, check_epsilon, check_positive_int
from .exact_sums import ExactDecayedSums

__all__ = ["LPAnswer"]


class LPAnswer:
    """Decayed range answers perturbed one by one with Laplace noise, one query per slot.

    Parameters
    ----------
    epsilon : the event-level budget of the whole sequence of answers.
    window : W, the query window: ranges must lie in ``[t-W+1, t]``.
    decay : p in (0, 1].
    rng : the noise's generator.
    """

    def __init__(self, epsilon: float, window: int, decay: float, *, rng: np.random.Generator) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.window = check_positive_int(window, "window W")
        self._sums = ExactDecayedSums(decay)
        p = self._sums.decay
        self.sensitivity = float(window) if p == 1.0 else (1.0 - p**window) / (1.0 - p)
        self._rng = rng
        self._answered = 0  # the last slot a query was answered at

    def insert(self, value: float) -> None:
        self._sums.insert(value)

    def query(self, l: int, r: int) -> tuple[float, float]:
        """``(answer, standard_error)`` of ``Σ_{i=l..r} p^(t-i) D_i`` at the latest slot t."""
        t = self._sums.slot
        if self._answered == t:
            raise ParameterError(f"slot {t} has had its query: LP answers one query per slot")
        if l < t - self.window + 1:
            raise ParameterError(f"range {l}..{r} starts before the window {max(1, t - self.window + 1)}..{t}")
        scale = self.sensitivity / self.epsilon
        answer = self._sums.query(l, r) + float(self._rng.laplace(0.0, scale))
        self._answered = t
        return answer, math.sqrt(2.0) * scale
