"""Hybrid Mechanism (HM) for means over [0, B]: LDP-IDS Section 6.1.1 of the SIGMOD version (Wang et al., ICDE 2019).

A device clips its value into ``[0, B]``, takes ``u = v/B`` in ``[0, 1]`` (``x = 2u - 1`` in
``[-1, 1]``) and reports one unbiased noisy number, drawn exactly (:mod:`.exact_draws`) from a
set of doubles that does not depend on ``u``:

* **SR** (Duchi's stochastic rounding): the device rounds ``x`` to ``+1`` with probability ``u``
  (else ``-1``), keeps the sign with probability ``p = K/2^64`` (:func:`~.exact_draws.exp_share`:
  odds ``p/(1-p) <= e^eps``, as close as 64 bits allow) and sends ``+-C_d``, ``C_d = 1/(2p - 1)``,
  which is ``(e^eps + 1)/(e^eps - 1)`` at these odds. ``P(+C_d) = 1/2 + x (2p - 1)/2``,
  unbiased, variance ``C_d^2 - x^2``.
* **PM** (piecewise): :class:`~.piecewise.DiscretePiecewise`, PM on a fixed grid of ``N``
  outputs, variance ``A x^2 + B`` plus a rounding term of at most ``1/(lambda k^2)``.
* **HM**: for ``eps > eps* = 0.61`` PM with probability ``alpha = lambda`` (the grid's share;
  ``1 - e^(-eps/2)`` in the continuous limit), else SR; for ``eps <= eps*`` always SR. With
  ``alpha A = 1 - alpha`` the ``x^2`` terms cancel, so the variance is ``lambda B + (1 - lambda)
  C_d^2 + 4 f(1 - f)/k^2`` at every x (``f`` the fraction the grid rounds), and the worst case
  ``Var* = lambda B + (1 - lambda) C_d^2 + 1/k^2``; below ``eps*``, ``Var* = C_d^2``. Near
  ``eps*`` this is the continuous HM's ``e^(-eps/2) [C_d^2 + (a+3)/(3(a-1))]`` within ``10^-7``
  (relative), and it stays below ``C_d^2`` by ``10^-4`` at ``eps*``: mixing pays from the same
  ``eps*`` on. ``paper_literal`` uses Eq (10)'s continuous form with the squared ``(a-1)^2``
  instead (a typo, kept as an option).

The server averages the ``n`` outputs into ``m`` and releases ``B (m + 1) / 2``, with
``V_HM(eps, n) = (B/2)^2 Var*(eps) / n``. Reports travel as float64 (64 bits each) rather than as
output indices: each is a function of its index alone (``+-C_d``, or ``float(2j - (N - 1)) * h``),
so the doubles a device can send are one fixed set and say exactly what the index would; the
collector and every stored support keep summing floats, and :meth:`HybridMechanism.possible`
recognises the set bit for bit.

Examples
--------
>>> hm = HybridMechanism(epsilon=1.0, bound=1.0)
>>> f"{hm.worst_case_variance:.3f}", f"{stochastic_rounding_constant(1.0) ** 2:.3f}"
('4.289', '4.683')
>>> from wevent.core.randomness import KeyStream
>>> reports = hm.perturb(np.full(100_000, 0.3), KeyStream.from_seed(0))
>>> a = math.exp(0.5); bool(np.abs(reports).max() <= (a + 1) / (a - 1))  # PM's range [-C, C] is the wider
True
>>> bool(hm.possible(reports, reports.size).all()), bool(hm.possible(reports + 2.0**-40, reports.size).any())
(True, False)
>>> round(float(hm.estimate(hm.support(reports), reports.size)[0]), 2)
0.3
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..randomness import KeyStream
from ..validation import ParameterError
from .exact_draws import WordSource, coins_below, exp_share, uniform_below
from .oracle import LocalOracle
from .piecewise import piecewise_grid

__all__ = ["HybridMechanism", "EPS_STAR", "stochastic_rounding_constant", "component_variance"]

EPS_STAR = 0.61  # as printed; the exact crossing point is 0.6094


def _sign_share(epsilon: float) -> int:
    """SR's ``K``: the rounded sign is kept when a word is below ``K``, flipped otherwise."""
    keep = exp_share(epsilon)
    if 2 * keep <= 2**64:
        raise ParameterError(f"epsilon = {epsilon!r} is too small for stochastic rounding's exact draws")
    return keep


def stochastic_rounding_constant(epsilon: float) -> float:
    """``C_d = 2^64 / (2K - 2^64)``, ``(e^eps + 1)/(e^eps - 1)`` at SR's odds ``K/(2^64 - K)``: its outputs are ``+-C_d``."""
    return float(Fraction(2**64, 2 * _sign_share(epsilon) - 2**64))


def component_variance(component: str, epsilon: float, x) -> np.ndarray:
    """Exact output variance of ``sr``, ``pm`` or ``hm`` at inputs ``x`` in [-1, 1]."""
    x = np.asarray(x, dtype=float)
    sr = stochastic_rounding_constant(epsilon) ** 2 - x**2
    if component == "sr" or (component == "hm" and epsilon <= EPS_STAR):
        return sr
    grid = piecewise_grid(epsilon)
    pm = grid.variance((x + 1) / 2)
    if component == "pm":
        return pm
    alpha = float(grid.share)
    return alpha * pm + (1 - alpha) * sr  # both unbiased, so the mixture adds no spread of means


class HybridMechanism(LocalOracle):
    """The Hybrid Mechanism for means over ``[0, bound]``: above ``eps* = 0.61`` a device answers with
    the Piecewise Mechanism (on a fixed grid) with probability ``lambda``, about ``1 - e^(-eps/2)``,
    and otherwise with stochastic rounding; at or below ``eps*`` always with stochastic rounding.

    Parameters
    ----------
    epsilon : float
        The budget of one report, > 0.
    bound : float, default 1.0
        ``B``: values are clipped into ``[0, B]``, and the release is a mean in it.
    var_mode : {"exact_avg", "paper_literal", "approx"}, default "exact_avg"
        The form of :attr:`worst_case_variance`: ``paper_literal`` is the printed continuous
        formula, which squares ``(a - 1)``.

    Attributes
    ----------
    pm_share : float
        The probability of answering with the Piecewise Mechanism.
    piecewise : DiscretePiecewise or None
        The Piecewise Mechanism's grid, when HM uses it (``eps > eps*``).
    sr_constant : float
        ``C_d``.

    Examples
    --------
    >>> hm = HybridMechanism(epsilon=2.0, bound=10.0)
    >>> round(hm.pm_share, 6), HybridMechanism(0.5).pm_share, hm.bits_per_report
    (0.632121, 0.0, 64)
    >>> f"{hm.variance(1000):.4f}"  # (B/2)^2 Var*(eps) / n
    '0.0261'

    References
    ----------
    N. Wang, X. Xiao, Y. Yang, J. Zhao, S. C. Hui, H. Shin, J. Shin, G. Yu. Collecting and
    Analyzing Multidimensional Data with Local Differential Privacy. ICDE 2019: Section III
    (Duchi et al.'s stochastic rounding, the Piecewise Mechanism and the Hybrid Mechanism for one
    numeric attribute). X. Ren, L. Shi, W. Yu, S. Yang, C. Zhao, Z. Xu. LDP-IDS: Local Differential
    Privacy for Infinite Data Streams. SIGMOD 2022: Section 6.1.1 of the SIGMOD version, which
    uses it for mean estimation.
    """

    name = "hm"

    def __init__(self, epsilon: float, bound: float = 1.0, var_mode: str = "exact_avg") -> None:
        super().__init__(epsilon, 1, var_mode)
        if not (isinstance(bound, (int, float)) and math.isfinite(bound) and bound > 0):
            raise ParameterError(f"the bound B of mean estimation must be a finite number > 0, got {bound!r}")
        self.bound = float(bound)
        self._keep = np.uint64(_sign_share(self.epsilon))
        self.sr_constant = stochastic_rounding_constant(self.epsilon)
        self._signs = np.array([-self.sr_constant, self.sr_constant])  # indexed by "the output is +C_d"
        self.piecewise = piecewise_grid(self.epsilon) if self.epsilon > EPS_STAR else None
        self.pm_share = float(self.piecewise.share) if self.piecewise is not None else 0.0

    def unit_inputs(self, values) -> np.ndarray:
        """``x = 2 clip(v, 0, B) / B - 1`` (values outside ``[0, B]`` are clipped into it)."""
        return 2.0 * self._fractions_of_bound(values) - 1.0

    def _fractions_of_bound(self, values) -> np.ndarray:
        """``u = clip(v, 0, B) / B`` in ``[0, 1]``."""
        values = np.asarray(values, dtype=float)
        if values.size and not np.isfinite(values).all():
            raise ParameterError("mean-estimation values must be finite numbers")
        return np.clip(values, 0.0, self.bound) / self.bound

    def perturb(self, values, stream: KeyStream, component: str = "hm") -> np.ndarray:
        """HM outputs in ``[-C, C]``; ``component='sr'`` or ``'pm'`` forces one of the two parts."""
        return self._outputs(values, stream.words, component)

    def _outputs(self, values, words: WordSource, component: str = "hm") -> np.ndarray:
        """Reports from the source's words: ``n`` for the picks of PM (only when HM mixes), ``n``
        coins (PM's rounding, SR's sign), ``n`` draws (PM's output index, SR's keeping of the sign:
        the word itself below ``K``), then the picks' replacements, the coins' tie-breaks and the
        draws' replacements (:mod:`.exact_draws`), each in report order."""
        u = self._fractions_of_bound(values)
        flat = u.ravel()
        n = flat.size
        mixing = component == "hm" and self.piecewise is not None
        grid = piecewise_grid(self.epsilon) if component == "pm" or mixing else None
        block = words((3 if mixing else 2) * n).reshape(3 if mixing else 2, n)
        keep = block[-1] < self._keep  # SR keeps the rounded sign
        if grid is None:
            return self._signs[(keep == coins_below(block[0], flat, words)).view(np.uint8)].reshape(u.shape)
        if mixing:
            pm = uniform_below(block[0], grid.total, words) < (grid.inside - grid.outside) * grid.window
        else:
            pm = np.ones(n, dtype=bool)
        whole, fraction = grid.split(flat)
        coins = coins_below(block[-2], np.where(pm, fraction, flat), words)
        draws = uniform_below(block[-1], grid.total, words)
        outputs = self._signs[(keep == coins).view(np.uint8)]
        np.copyto(outputs, grid.values(grid.indices(whole.astype(np.int64) + coins, draws)), where=pm)
        return outputs.reshape(u.shape)

    def sample_support(self, values, rng: np.random.Generator) -> np.ndarray:
        """The sum of the outputs of :meth:`perturb`'s draws, from the generator's words: exact in
        distribution (the same draws from another uniform source)."""
        return self.support(self._outputs(values, rng.bit_generator.random_raw))

    def support(self, reports) -> np.ndarray:
        return np.array([np.asarray(reports, dtype=float).sum()])

    def possible(self, reports, n: int) -> np.ndarray:
        """A float report is possible when it is ``+-C_d`` or, above ``eps*``, one of the grid's outputs."""
        reports = np.asarray(reports)
        if reports.shape != (n,) or reports.dtype.kind != "f":
            return np.zeros(n, dtype=bool)
        values = reports.astype(np.float64)
        ok = np.abs(values) == self.sr_constant
        return ok | self.piecewise.contains(values) if self.piecewise is not None else ok

    def estimate(self, support, n: int) -> np.ndarray:
        n = self._reporters(n)
        if n == 0:
            return np.full(1, np.nan)
        mean = float(np.asarray(support, dtype=float).reshape(-1)[0]) / n
        return np.array([self.bound * (mean + 1) / 2])

    @property
    def worst_case_variance(self) -> float:
        """``Var*(eps)`` of one output on the [-1, 1] scale."""
        c_d2 = self.sr_constant**2
        if self.piecewise is None:
            return c_d2
        if self.var_mode == "paper_literal":
            a = math.exp(self.epsilon / 2)
            return (c_d2 + (a + 3) / (3 * (a - 1) ** 2)) / a
        share = float(self.piecewise.share)
        return share * float(self.piecewise.spread) + (1 - share) * c_d2 + 1 / self.piecewise.steps**2

    def variance(self, n: int) -> float:
        n = self._reporters(n)
        return math.inf if n == 0 else (self.bound / 2) ** 2 * self.worst_case_variance / n

    @property
    def bits_per_report(self) -> int:
        return 64

    def __repr__(self) -> str:
        return f"HybridMechanism(epsilon={self.epsilon!r}, bound={self.bound!r})"
