"""Generalized randomized response (GRR, a.k.a. k-RR): LDP-IDS Section 2.4 of the SIGMOD version.

A device keeps its value with probability ``p = e^eps / (e^eps + d - 1)`` and otherwise reports
one of the other ``d - 1`` values uniformly, so every other value has probability
``q = 1 / (e^eps + d - 1)`` and ``p / q = e^eps``: the report is ``eps``-LDP. From ``n`` reports
with ``c'[k]`` reports of value k, ``c_hat[k] = (c'[k]/n - q) / (p - q)`` is unbiased and sums to 1.

The draw is exact: ``e^eps`` is a rational ``R/S <= e^eps`` (:func:`~.exact_draws.exp_ratio`,
within a relative ``2 (e^eps + d) / (e^eps 2^56)`` of it), and one uniform integer ``U`` below
``R + (d - 1) S`` per report keeps the value on its first ``R`` values and moves it by
``1 + (U - R) // S`` otherwise (:func:`respond`): every value is reported with probability ``R``
or ``S`` over ``R + (d - 1) S``, whatever the input, so ``p / q = R/S`` exactly.

Variance (the exact average over the bins; the printed one lacks ``1/d`` in its second term), with ``f_k`` the true fraction of reporters holding k:
``Var_k = (d-2+e^eps) / (n (e^eps-1)^2) + f_k (d-2) / (n (e^eps-1))``; averaged over the bins
(``sum f_k = 1``) this is ``V = (d-2+e^eps)/(n(e^eps-1)^2) + (d-2)/(d n (e^eps-1))``.

Bits per report: ``ceil(log2 d)``.

Examples
--------
>>> grr = GRR(epsilon=1.0, domain_size=5)
>>> round(grr.p / grr.q, 12) == round(float(np.exp(1.0)), 12)
True
>>> from wevent.core.randomness import KeyStream
>>> reports = grr.perturb(np.array([0, 0, 3, 4]), KeyStream.from_seed(0))
>>> reports.shape, grr.possible(reports, 4).tolist()
((4,), [True, True, True, True])
>>> round(float(grr.estimate(grr.support(reports), 4).sum()), 12)
1.0

A check (d = 5, eps = 1, n = 2000): the corrected average and the printed form.

>>> f"{grr.variance(2000):.3e}", f"{GRR(1.0, 5, 'paper_literal').variance(2000):.2e}"
('1.143e-03', '1.84e-03')
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..randomness import KeyStream
from ..validation import ParameterError
from .exact_draws import exp_ratio, uniform_below
from .oracle import FrequencyOracle

__all__ = ["GRR", "respond"]


class GRR(FrequencyOracle):
    """Generalized randomized response: a device reports its own value with probability ``p`` and
    each other value with probability ``q``, ``p / q = e^eps``.

    Parameters
    ----------
    epsilon : float
        The budget of one report, > 0.
    domain_size : int
        ``d``, the values a device may hold (``0..d-1``), >= 2.
    var_mode : {"exact_avg", "paper_literal", "approx"}, default "exact_avg"
        The form of :meth:`variance` (:data:`~.oracle.VAR_MODES`).

    Attributes
    ----------
    p, q : float
        ``R / (R + (d - 1) S)`` and ``S / (R + (d - 1) S)``: ``e^eps / (e^eps + d - 1)`` and
        ``1 / (e^eps + d - 1)`` with ``e^eps`` as its rational ``R/S``.
    kept_weight, moved_weight, draw_range : int
        ``R``, ``S`` and ``R + (d - 1) S``.
    ratio : float
        ``R / S``, what the variance's ``e^eps`` is.

    Examples
    --------
    >>> grr = GRR(epsilon=1.0, domain_size=4)
    >>> round(grr.p, 6), round(grr.q, 6), grr.bits_per_report
    (0.475367, 0.174878, 2)
    >>> f"{grr.variance(1000):.4e}"  # (d-2+e)/(n (e-1)^2) + (d-2)/(d n (e-1))
    '1.8891e-03'

    References
    ----------
    T. Wang, J. Blocki, N. Li, S. Jha. Locally Differentially Private Protocols for Frequency
    Estimation. USENIX Security 2017: Section 4.1, Direct Encoding (GRR under another
    name). X. Ren, L. Shi, W. Yu, S. Yang, C. Zhao, Z. Xu. LDP-IDS: Local Differential Privacy for
    Infinite Data Streams. SIGMOD 2022: Section 2.4 of the SIGMOD version, which uses it.
    """

    name = "grr"

    def __init__(self, epsilon: float, domain_size: int, var_mode: str = "exact_avg") -> None:
        super().__init__(epsilon, domain_size, var_mode)
        if self.domain_size < 2:
            raise ParameterError(f"GRR needs a domain of d >= 2 values, got d = {self.domain_size}")
        self.kept_weight, self.moved_weight = exp_ratio(self.epsilon, 1, self.domain_size - 1)
        self.draw_range = self.kept_weight + (self.domain_size - 1) * self.moved_weight
        self.p = float(Fraction(self.kept_weight, self.draw_range))
        self.q = float(Fraction(self.moved_weight, self.draw_range))
        self.ratio = float(Fraction(self.kept_weight, self.moved_weight))
        # a report that moves lands on each other value alike: row v of the moved counts goes to v+1 .. v+d-1
        self._moved_shares = np.full(self.domain_size - 1, 1.0 / (self.domain_size - 1))
        self._moved_to = ((np.arange(self.domain_size)[:, None] + np.arange(1, self.domain_size)[None, :])
                          % self.domain_size).ravel()

    def perturb(self, values, stream: KeyStream) -> np.ndarray:
        """Vectorised GRR on 0-based values: one uniform integer below ``R + (d - 1) S`` per value,
        from the keystream's words in order (:func:`respond`)."""
        values = self._categories(values)
        draws = uniform_below(stream.words(values.size), self.draw_range, stream.words).reshape(values.shape)
        return respond(values, draws, self.kept_weight, self.moved_weight, self.domain_size)

    def sample_support_of_counts(self, counts, rng: np.random.Generator) -> np.ndarray:
        """Kept ~ Bin(n_v, p) per true value v, the rest Multinomial-uniform over the other d-1."""
        kept = rng.binomial(counts, self.p)
        moved = rng.multinomial(counts - kept, self._moved_shares)
        return kept + np.bincount(self._moved_to, weights=moved.ravel(), minlength=self.domain_size).astype(np.int64)

    def support(self, reports) -> np.ndarray:
        return np.bincount(self._categories(reports).ravel(), minlength=self.domain_size)

    def possible(self, reports, n: int) -> np.ndarray:
        """Integer reports of shape ``(n,)``; each possible when it is a value in ``0..d-1``."""
        reports = np.asarray(reports)
        if reports.shape != (n,) or reports.dtype.kind not in "iu":
            return np.zeros(n, dtype=bool)
        return (reports >= 0) & (reports < self.domain_size)

    def bin_variance(self, frequencies, n: int) -> np.ndarray:
        """Exact variance of each bin's estimate, given the reporters' true frequencies."""
        e, d = self.ratio, self.domain_size
        f = np.asarray(frequencies, dtype=float)
        return (d - 2 + e) / (n * (e - 1) ** 2) + f * (d - 2) / (n * (e - 1))

    def variance(self, n: int) -> float:
        n = self._reporters(n)
        if n == 0:
            return math.inf
        e, d = self.ratio, self.domain_size
        base = (d - 2 + e) / (n * (e - 1) ** 2)
        if self.var_mode == "approx":
            return base
        per_unit_frequency = (d - 2) / (n * (e - 1))  # the f_k term at f_k = 1
        return base + (per_unit_frequency if self.var_mode == "paper_literal" else per_unit_frequency / d)

    @property
    def bits_per_report(self) -> int:
        return max(1, math.ceil(math.log2(self.domain_size)))


def respond(values: np.ndarray, draws: np.ndarray, kept: int, moved: int, domain_size: int) -> np.ndarray:
    """GRR's reports of ``values`` from uniform integers ``draws`` below ``kept + (d - 1) moved``:
    the first ``kept`` keep the value, each next ``moved`` moves it one value further (mod ``d``).

    >>> respond(np.zeros(7, dtype=np.int64), np.arange(7), kept=3, moved=2, domain_size=3).tolist()
    [0, 0, 0, 1, 1, 2, 2]
    """
    other = (values + 1 + (draws - kept) // moved) % domain_size
    return np.where(draws < kept, values, other).astype(np.int64)
