"""Hybrid Mechanism (HM) for means over [0, B]: LDP-IDS Section 6.1.1 of the SIGMOD version (Wang et al., ICDE 2019).

A device clips its value into ``[0, B]``, maps it to ``x = 2v/B - 1`` in ``[-1, 1]`` and reports
one unbiased noisy number (SR and PM rebuilt from Wang et al.; ``[0, B]`` maps to ``[-1, 1]`` by
``x = 2v/B - 1`` and back by ``B (m + 1) / 2``):

* **SR** (Duchi's stochastic rounding): ``+C_d`` with probability ``1/2 + x (e^eps-1)/(2e^eps+2)``,
  else ``-C_d``, where ``C_d = (e^eps+1)/(e^eps-1)``. Variance ``C_d^2 - x^2``.
* **PM** (piecewise): with ``a = e^(eps/2)`` and ``C = (a+1)/(a-1)``, uniform on
  ``[l(x), l(x) + C - 1]`` (``l(x) = (C+1)x/2 - (C-1)/2``) with probability ``a/(a+1)``, else uniform
  on the rest of ``[-C, C]``. Variance ``x^2/(a-1) + (a+3)/(3(a-1)^2)``.
* **HM**: for ``eps > eps* = 0.61`` PM with probability ``alpha = 1 - e^(-eps/2)``, else SR; for
  ``eps <= eps*`` always SR. Worst-case variance ``Var*``: ``C_d^2`` below ``eps*``, and
  ``e^(-eps/2) [C_d^2 + (a+3)/(3(a-1))]`` above, exact for every x (the x^2 terms cancel).
  ``paper_literal`` uses Eq (10)'s squared ``(a-1)^2`` instead (a typo, kept as an option).

The server averages the ``n`` outputs into ``m`` and releases ``B (m + 1) / 2``, with
``V_HM(eps, n) = (B/2)^2 Var*(eps) / n``. Reports are float64: 64 bits each (the paper leaves it open).

Examples
--------
>>> hm = HybridMechanism(epsilon=1.0, bound=1.0)
>>> f"{hm.worst_case_variance:.3f}", f"{stochastic_rounding_constant(1.0) ** 2:.3f}"
('4.289', '4.683')
>>> from wevent.core.randomness import KeyStream
>>> reports = hm.perturb(np.full(100_000, 0.3), KeyStream.from_seed(0))
>>> a = math.exp(0.5); bool(np.abs(reports).max() <= (a + 1) / (a - 1))  # PM's range [-C, C] is the wider
True
>>> round(float(hm.estimate(hm.support(reports), reports.size)[0]), 2)
0.3
"""

from __future__ import annotations

import math

import numpy as np

from ..randomness import KeyStream
from ..validation import ParameterError
from .oracle import LocalOracle

__all__ = ["HybridMechanism", "EPS_STAR", "stochastic_rounding_constant", "component_variance"]

EPS_STAR = 0.61  # as printed; the exact crossing point is 0.6094


def stochastic_rounding_constant(epsilon: float) -> float:
    """``C_d = (e^eps + 1) / (e^eps - 1)``: SR's two outputs are ``+-C_d``."""
    e = math.exp(epsilon)
    return (e + 1) / (e - 1)


def component_variance(component: str, epsilon: float, x) -> np.ndarray:
    """Exact output variance of ``sr``, ``pm`` or ``hm`` at inputs ``x`` in [-1, 1]."""
    x = np.asarray(x, dtype=float)
    a = math.exp(epsilon / 2)
    sr = stochastic_rounding_constant(epsilon) ** 2 - x**2
    pm = x**2 / (a - 1) + (a + 3) / (3 * (a - 1) ** 2)
    if component == "sr":
        return sr
    if component == "pm":
        return pm
    alpha = 1 - 1 / a if epsilon > EPS_STAR else 0.0
    return alpha * pm + (1 - alpha) * sr  # both unbiased, so the mixture adds no spread of means


class HybridMechanism(LocalOracle):
    """The Hybrid Mechanism for means over ``[0, bound]``: above ``eps* = 0.61`` a device answers with
    the Piecewise Mechanism with probability ``1 - e^(-eps/2)`` and otherwise with stochastic
    rounding; at or below ``eps*`` always with stochastic rounding.

    Parameters
    ----------
    epsilon : float
        The budget of one report, > 0.
    bound : float, default 1.0
        ``B``: values are clipped into ``[0, B]``, and the release is a mean in it.
    var_mode : {"exact_avg", "paper_literal", "approx"}, default "exact_avg"
        The form of :attr:`worst_case_variance`: ``paper_literal`` squares ``(a - 1)`` as the
        printed formula does.

    Attributes
    ----------
    pm_share : float
        The probability of answering with the Piecewise Mechanism.

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
        self.pm_share = 1 - math.exp(-self.epsilon / 2) if self.epsilon > EPS_STAR else 0.0

    def unit_inputs(self, values) -> np.ndarray:
        """``x = 2 clip(v, 0, B) / B - 1`` (values outside ``[0, B]`` are clipped into it)."""
        values = np.asarray(values, dtype=float)
        if values.size and not np.isfinite(values).all():
            raise ParameterError("mean-estimation values must be finite numbers")
        return 2.0 * np.clip(values, 0.0, self.bound) / self.bound - 1.0

    def perturb(self, values, stream: KeyStream, component: str = "hm") -> np.ndarray:
        """HM outputs in ``[-C_d, C_d]``; ``component='sr'`` or ``'pm'`` forces one of the two parts."""
        return self._outputs(values, stream.generator(), component)

    def _outputs(self, values, rng: np.random.Generator, component: str = "hm") -> np.ndarray:
        x = self.unit_inputs(values)
        pick, coin, position = rng.random((3,) + x.shape)
        share = {"hm": self.pm_share, "sr": 0.0, "pm": 1.0}[component]
        return np.where(pick < share, self._piecewise(x, coin, position), self._rounded(x, coin))

    def _rounded(self, x: np.ndarray, coin: np.ndarray) -> np.ndarray:
        """SR's outputs at inputs ``x`` from uniforms ``coin``."""
        e = self.exp_eps
        c_d = stochastic_rounding_constant(self.epsilon)
        return np.where(coin < 0.5 + x * (e - 1) / (2 * e + 2), c_d, -c_d)

    def _piecewise(self, x: np.ndarray, coin: np.ndarray, position: np.ndarray) -> np.ndarray:
        """PM's outputs at inputs ``x`` from uniforms ``coin`` (which piece) and ``position`` (where in it)."""
        a = math.sqrt(self.exp_eps)
        c = (a + 1) / (a - 1)
        left = (c + 1) / 2 * x - (c - 1) / 2
        outer = -c + position * (c + 1)  # uniform over [-C, l) and (r, C], the gap [l, r] squeezed out
        outer = np.where(outer >= left, outer + (c - 1), outer)
        return np.where(coin < a / (a + 1), left + position * (c - 1), outer)

    def sample_support(self, values, rng: np.random.Generator) -> np.ndarray:
        """The sum of ``perturb``'s outputs, exact in distribution with only the draws the sum needs:
        who takes PM (none below ``eps*``), one uniform per SR output, two per PM output."""
        x = self.unit_inputs(values).ravel()
        if not self.pm_share:
            return np.array([self._rounded(x, rng.random(x.size)).sum()])
        piecewise = rng.random(x.size) < self.pm_share
        x_pm, x_sr = x[piecewise], x[~piecewise]
        pm = self._piecewise(x_pm, rng.random(x_pm.size), rng.random(x_pm.size))
        return np.array([self._rounded(x_sr, rng.random(x_sr.size)).sum() + pm.sum()])

    def support(self, reports) -> np.ndarray:
        return np.array([np.asarray(reports, dtype=float).sum()])

    def estimate(self, support, n: int) -> np.ndarray:
        n = self._reporters(n)
        if n == 0:
            return np.full(1, np.nan)
        mean = float(np.asarray(support, dtype=float).reshape(-1)[0]) / n
        return np.array([self.bound * (mean + 1) / 2])

    @property
    def worst_case_variance(self) -> float:
        """``Var*(eps)`` of one output on the [-1, 1] scale."""
        c_d2 = stochastic_rounding_constant(self.epsilon) ** 2
        if self.epsilon <= EPS_STAR:
            return c_d2
        a = math.exp(self.epsilon / 2)
        pm_term = (a + 3) / (3 * (a - 1) ** 2) if self.var_mode == "paper_literal" else (a + 3) / (3 * (a - 1))
        return (c_d2 + pm_term) / a

    def variance(self, n: int) -> float:
        n = self._reporters(n)
        return math.inf if n == 0 else (self.bound / 2) ** 2 * self.worst_case_variance / n

    @property
    def bits_per_report(self) -> int:
        return 64

    def __repr__(self) -> str:
        return f"HybridMechanism(epsilon={self.epsilon!r}, bound={self.bound!r})"
