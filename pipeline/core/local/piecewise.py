"""The Piecewise Mechanism on a fixed grid: the Hybrid Mechanism's part for larger budgets.

Wang et al.'s Piecewise Mechanism (PM) reports a real number: uniform on a window around the
input with probability ``a/(a+1)`` (``a = e^(eps/2)``), else uniform on the rest of ``[-C, C]``.
Drawn in floating point, the doubles it can produce depend on the input (the window's left end
plus a uniform times its length, rounded), and an output the other input cannot produce has an
unbounded privacy loss. :class:`DiscretePiecewise` keeps PM's shape on a fixed grid of outputs,
with rational probabilities drawn exactly from uniform words.

Examples
--------
>>> grid = DiscretePiecewise(1.0)
>>> grid.steps, grid.window, grid.outputs
(1048576, 635993, 1684569)
>>> a = math.exp(0.5); round(grid.largest, 6), round((a + 1) / (a - 1), 6)  # the continuous PM's C
(4.082986, 4.082988)
>>> f"{float(grid.slope):.7f}", f"{1 / (a - 1):.7f}"  # A, the x^2 coefficient of the variance
('1.5414948', '1.5414941')
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from ..validation import ParameterError, check_epsilon
from .exact_draws import DRAW_RANGE, exp_lower, exp_ratio

__all__ = ["DiscretePiecewise", "piecewise_grid", "RESOLUTION"]

RESOLUTION = 2**20
"""``k``, the input grid's steps over ``[-1, 1]``: a power of two, so that ``k u`` is exact."""


class DiscretePiecewise:
    """The Piecewise Mechanism over a fixed grid of ``N = k + L`` outputs, with exact probabilities.

    A device with ``x`` in ``[-1, 1]`` (``u = (x + 1)/2``) reports in two draws:

    1. **rounding**: ``t = floor(k u) + Bernoulli(f)``, ``f = k u - floor(k u)``, an input index in
       ``0..k`` with ``E[t] = k u``;
    2. **window**: an output index ``j`` in ``0..N-1`` with weight ``R`` on the ``L`` indices of the
       window ``t..t+L-1`` and ``S`` on the ``k`` others, out of ``T = R L + S k``; it sends
       ``y_j = h (2j - (N - 1))``, ``h = T / (k (R - S) L)``.

    ``R/S <= e^eps`` (:func:`~.exact_draws.exp_ratio`); ``L = round(k e^(-eps/2))``, so the window
    holds PM's share ``1/a`` of the input range, and ``k``, ``L``, ``R``, ``S`` depend on ``eps``
    and :data:`RESOLUTION` only: the ``N`` outputs are the same for every input.

    **Privacy.** At every input index each output index has probability ``R/T`` or ``S/T``;
    rounding mixes two such distributions, so every output has probability in ``[S/T, R/T]`` at
    every input: ratio ``<= R/S <= e^eps``. Both draws are uniform integers and a coin compared
    exactly with the double ``f`` (:mod:`.exact_draws`): no rounding reaches a probability.

    **Mean.** One step of ``t`` moves weight ``(R - S)/T`` from index ``t`` to ``t + L``, so
    ``E[j | t]`` grows by ``lambda = (R - S) L / T`` per step, and is ``(N - 1)/2`` at
    ``t = k/2`` by symmetry. Hence ``E[y | t] = 2 h lambda (t - k/2) = 2t/k - 1`` (``2 h lambda =
    2/k``), and with ``E[t] = k u``, ``E[y] = x``: the estimator is unbiased.

    **Variance.** Write ``m = (N - 1)/2`` and ``d = t - k/2`` (the window's centre is ``m + d``).
    Summing squares over all indices with weight ``S`` and over the window with the extra
    ``R - S``: ``E[(j - m)^2 | t] = (S N(N^2 - 1)/12 + (R - S)(L(L^2 - 1)/12 + L d^2)) / T``, and
    ``E[j - m | t] = lambda d``, so ``Var(j | t) = K + lambda (1 - lambda) d^2`` with
    ``K = (S N(N^2 - 1) + (R - S) L(L^2 - 1)) / (12 T)``. With ``x_t = 2t/k - 1 = 2d/k``,
    ``Var(y | t) = (2h)^2 K + A x_t^2``, ``A = (1 - lambda)/lambda``. Rounding adds
    ``Var(x_t) = (2/k)^2 f(1 - f)`` and ``E[x_t^2] = x^2 + Var(x_t)``; by total variance

        ``Var(y | x) = A x^2 + B + 4 f(1 - f) / (lambda k^2)``,   ``B = (2h)^2 K``.

    As ``k`` grows (``L/k -> 1/a``, ``R/S -> a^2``): ``lambda -> 1 - 1/a``, ``A -> 1/(a - 1)``,
    ``B -> (a + 3)/(3(a - 1)^2)`` and the outputs' range ``h (N - 1) -> C = (a + 1)/(a - 1)``,
    the continuous PM's.

    **Resolution.** A finer grid brings ``A`` and ``B`` closer to the continuous PM's: the window's
    length is a whole number of steps (its share of the range is off by up to ``1/(2L)``), and the
    discrete spread and the rounding term are of order ``1/k^2``. The price is the draws' range:
    ``T = R L + S k`` stays below ``2^56``, so a larger ``k`` leaves fewer bits to ``S`` (``R/S`` is
    ``e^eps`` within a relative ``k / 2^54``) and caps the ratio sooner (``R/S <= 2^56 - k``: an
    ``eps`` above about 38.8 gets a ratio of about e^38.8). ``k = 2^20`` keeps both small: ``R/S`` within
    ``6 10^-11`` of ``e^eps``, and the HM variance built on this grid within ``2 10^-5`` of the
    continuous one (relative, on either side as ``L`` rounds) for ``eps <= 8``, ``7 10^-4`` at
    ``eps = 16``; above that the window is a few steps long and the variance falls below the
    continuous PM's (at ``eps = 30`` the report is almost surely the rounded input's own index).

    Parameters
    ----------
    epsilon : float
        The budget of one report, > 0.
    resolution : int, default :data:`RESOLUTION`
        ``k``, a power of two >= 2.
    limit : int, default :data:`~.exact_draws.DRAW_RANGE`
        The bound of every uniform draw (small ones make the draws enumerable in tests).

    Attributes
    ----------
    steps, window, outputs : int
        ``k``, ``L`` and ``N = k + L``.
    inside, outside, total : int
        ``R``, ``S`` and ``T = R L + S k``.
    share : fractions.Fraction
        ``lambda = (R - S) L / T``: the slope of the mean, and HM's share of PM answers.
    slope, spread : fractions.Fraction
        ``A`` and ``B`` of the variance.
    unit : float
        ``h``: the outputs are ``float(2j - (N - 1)) * unit``, one multiplication of doubles.
    largest : float
        The largest output, ``h (N - 1)``.

    Examples
    --------
    >>> grid = DiscretePiecewise(2.0, resolution=4, limit=2**12)
    >>> grid.window, grid.inside, grid.outside, grid.total  # 5 outputs, weight 1891 in the window, 256 out of it
    (1, 1891, 256, 2915)
    >>> grid.indices(np.array([2, 2, 2]), np.array([0, 1891, 2914])).tolist()  # the window, the first and last others
    [2, 0, 4]

    References
    ----------
    N. Wang, X. Xiao, Y. Yang, J. Zhao, S. C. Hui, H. Shin, J. Shin, G. Yu. Collecting and
    Analyzing Multidimensional Data with Local Differential Privacy. ICDE 2019: Section III
    (the Piecewise Mechanism). X. Ren, L. Shi, W. Yu, S. Yang, C. Zhao, Z. Xu. LDP-IDS: Local
    Differential Privacy for Infinite Data Streams. SIGMOD 2022: Section 6.1.1 of the SIGMOD
    version, which uses it within the Hybrid Mechanism.
    """

    def __init__(self, epsilon: float, resolution: int = RESOLUTION, limit: int = DRAW_RANGE) -> None:
        self.epsilon = check_epsilon(epsilon)
        if resolution < 2 or resolution & (resolution - 1):
            raise ParameterError(f"the grid's resolution must be a power of two >= 2, got {resolution}")
        k = self.steps = int(resolution)
        half_exponent = Fraction(-min(self.epsilon, 2 * 64)) / 2  # e^(-eps/2); beyond eps = 128 it rounds to 0 anyway
        window = self.window = max(1, math.floor(k * exp_lower(half_exponent) + Fraction(1, 2)))
        r, s = self.inside, self.outside = exp_ratio(self.epsilon, window, k, limit)
        if r <= s:
            raise ParameterError(f"epsilon = {epsilon!r} is too small for the Piecewise Mechanism's grid")
        self._outside_bits = s.bit_length() - 1
        n = self.outputs = k + window
        t = self.total = r * window + s * k
        self.share = Fraction((r - s) * window, t)
        step = Fraction(t, k * (r - s) * window)
        self.slope = 1 / self.share - 1
        self.spread = (2 * step) ** 2 * Fraction(s * n * (n * n - 1) + (r - s) * window * (window**2 - 1), 12 * t)
        self.unit = float(step)
        self.largest = (n - 1) * self.unit

    def split(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(floor(k u), f)``, ``f = k u - floor(k u)``: exact in floating point (``k`` is a power of
        two). The input index is ``floor(k u)`` plus a Bernoulli(``f``) coin."""
        scaled = u * self.steps
        whole = np.floor(scaled)
        return whole, scaled - whole

    def indices(self, t: np.ndarray, draws: np.ndarray) -> np.ndarray:
        """Output indices at input indices ``t`` from uniform integers ``draws`` in ``[0, T)``: the
        first ``R L`` values spell the window (``R`` each), the other ``S k`` the ``k`` indices
        outside it (``S`` each), in increasing order."""
        beyond = draws - self.inside * self.window
        other = beyond >> self._outside_bits  # // S: S is a power of two
        return np.where(beyond < 0, t + draws // self.inside, other + self.window * (other >= t))

    def values(self, indices: np.ndarray) -> np.ndarray:
        """The reports ``y_j`` of output indices ``j``."""
        return (2 * indices - (self.outputs - 1)).astype(np.float64) * self.unit

    def contains(self, reports: np.ndarray) -> np.ndarray:
        """Whether each float report is one of the ``N`` outputs, bit for bit."""
        reports = np.asarray(reports, dtype=np.float64)
        within = np.isfinite(reports) & (np.abs(reports) <= self.largest)
        offset = np.rint(np.where(within, reports, 0.0) / self.unit)  # 2j - (N - 1), if it is an output
        return within & (np.fmod(offset + (self.outputs - 1), 2) == 0) & (offset * self.unit == reports)

    def variance(self, u) -> np.ndarray:
        """``Var(y | x) = A x^2 + B + 4 f(1 - f) / (lambda k^2)`` at ``u = (x + 1)/2``."""
        u = np.asarray(u, dtype=np.float64)
        f = self.split(u)[1]
        return (float(self.slope) * (2 * u - 1) ** 2 + float(self.spread)
                + 4 * f * (1 - f) / (float(self.share) * self.steps**2))

    def __repr__(self) -> str:
        return f"DiscretePiecewise(epsilon={self.epsilon!r}, resolution={self.steps})"


@functools.lru_cache(maxsize=1024)
def piecewise_grid(epsilon: float) -> DiscretePiecewise:
    """The (cached) grid at this budget and the default resolution: a collector builds an oracle
    per message, and the grid's constants need exact arithmetic."""
    return DiscretePiecewise(epsilon)
