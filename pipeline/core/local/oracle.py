"""The small base every local randomiser derives from: device-side ``perturb`` plus its server side.

A frequency oracle (or a mean mechanism) is an ``epsilon``-LDP randomiser that runs on each
device, with an unbiased estimator on the server (LDP-IDS, Section 2.4 of the SIGMOD version). Its one online method is
:meth:`LocalOracle.perturb`, vectorised over many users' values (one device is an array of one).
Devices draw from a :class:`~wevent.core.randomness.KeyStream` (one per block of users at a
slot and phase, so a retried report is the same report), and every report comes from a finite
set of outputs that is the same whatever the device's value (:meth:`LocalOracle.possible` tells
them from anything else). The server side is additive: the collector sums reports into
:meth:`LocalOracle.support` (GRR: counts of reported values; OUE: column sums of the bit
vectors; HM: the sum of outputs) and :meth:`LocalOracle.estimate` turns
``(support, n)`` into the release. ``variance(n)`` is ``V(epsilon, n)``, the error an estimate
from ``n`` reports is expected to have, in one of three forms (``var_mode``; the printed GRR average lacks ``1/d`` in its second term, so the exact average
is the default):

* ``exact_avg`` (default): the exact per-bin variance averaged over the ``d`` bins;
* ``paper_literal``: the form printed in the papers (not the default; kept to reproduce them);
* ``approx``: without the term that depends on the data.
"""

from __future__ import annotations

import abc
from typing import ClassVar

import numpy as np

from ..randomness import KeyStream
from ..validation import ParameterError, check_domain, check_positive

__all__ = ["LocalOracle", "FrequencyOracle", "VAR_MODES", "MIN_REPORT_EPSILON"]

VAR_MODES = ("exact_avg", "paper_literal", "approx")

MIN_REPORT_EPSILON = 2.0**-40
"""The smallest budget of one report (about 9.1e-13). A device draws with rational odds ``R/S``
just below ``e^epsilon`` (:func:`~.exact_draws.exp_ratio`), resolved to about ``2^-44`` for the
largest domains; below this budget the odds are not resolved well and, further down, round to
1, where a report carries no information and no estimator exists. Every oracle refuses a smaller
budget, and a mechanism whose rule would spend one on a publication approximates instead."""


class LocalOracle(abc.ABC):
    """An ``epsilon``-LDP randomiser over a domain of ``domain_size`` values and its estimator."""

    name: ClassVar[str]

    def __init__(self, epsilon: float, domain_size: int, var_mode: str = "exact_avg") -> None:
        self.epsilon = check_positive(epsilon, "epsilon")
        if self.epsilon < MIN_REPORT_EPSILON:
            raise ParameterError(f"a report budget of {self.epsilon:.6g} is below the smallest a device can draw "
                                 f"(2^-40, about {MIN_REPORT_EPSILON:.2g}): raise epsilon or shorten the window")
        self.domain_size = check_domain(domain_size)
        if var_mode not in VAR_MODES:
            raise ParameterError(f"var_mode must be one of {', '.join(VAR_MODES)}, got {var_mode!r}")
        self.var_mode = var_mode

    # --- device side -------------------------------------------------------------------------
    @abc.abstractmethod
    def perturb(self, values, stream: KeyStream) -> np.ndarray:
        """The reports of users holding ``values`` (one report per value, in order)."""

    def perturbed_support(self, values, stream: KeyStream) -> np.ndarray:
        """``support(perturb(values, stream))``: the same draws, without building the wire format."""
        return self.support(self.perturb(values, stream))

    def batches_support(self, values, streams, sizes) -> np.ndarray:
        """The support of consecutive batches of ``values`` (``sizes``), batch b perturbed with ``streams[b]``.

        The same draws as ``perturbed_support`` per batch, summed; oracles may do it in one pass.
        """
        bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        total = self.support(np.asarray(values)[:0])  # the support of no report, in the right dtype
        for stream, start, stop in zip(streams, bounds[:-1], bounds[1:]):
            total = total + self.perturbed_support(values[start:stop], stream)
        return total

    @abc.abstractmethod
    def sample_support(self, values, rng: np.random.Generator) -> np.ndarray:
        """A draw of the support of ``len(values)`` reports, exact in distribution: the
        server-side shortcut of a simulation, from the server's own generator."""

    # --- server side -------------------------------------------------------------------------
    @abc.abstractmethod
    def support(self, reports) -> np.ndarray:
        """The additive sufficient statistic of a batch of reports (sum batches to merge them)."""

    @abc.abstractmethod
    def possible(self, reports, n: int) -> np.ndarray:
        """Which of ``n`` reports this oracle could have produced: a bool mask, all False unless the
        batch has the wire format's shape and dtype, then True where a report is in the oracle's
        output support (which is the same for every input)."""

    @abc.abstractmethod
    def estimate(self, support, n: int) -> np.ndarray:
        """The unbiased estimate from the support of ``n`` reports."""

    @abc.abstractmethod
    def variance(self, n: int) -> float:
        """``V(epsilon, n)``: expected squared error of one bin, averaged over bins (inf if n = 0)."""

    @property
    @abc.abstractmethod
    def bits_per_report(self) -> int:
        """Size of one report on the wire."""

    # --- helpers -----------------------------------------------------------------------------
    def _categories(self, values) -> np.ndarray:
        """Values of a categorical domain: integers in ``0..d-1``, checked once per batch."""
        array = np.asarray(values)
        if array.size and not np.issubdtype(array.dtype, np.integer):
            raise ParameterError(f"{self.name.upper()} values must be integers in 0..{self.domain_size - 1}")
        if array.size and (array.min() < 0 or array.max() >= self.domain_size):
            bad = array[(array < 0) | (array >= self.domain_size)][0]
            raise ParameterError(f"value {bad} is outside the domain 0..{self.domain_size - 1}")
        return array

    @staticmethod
    def _reporters(n) -> int:
        if n < 0:
            raise ParameterError(f"the number of reports must be >= 0, got {n}")
        return int(n)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epsilon={self.epsilon!r}, domain_size={self.domain_size})"


class FrequencyOracle(LocalOracle):
    """A frequency oracle whose report supports value k with probability ``p`` if the user holds
    k and ``q`` otherwise (per report for GRR, per bit for OUE): ``c_hat[k] = (c'[k]/n - q)/(p - q)``."""

    p: float
    q: float

    def sample_support(self, values, rng: np.random.Generator) -> np.ndarray:
        return self.sample_support_of_counts(np.bincount(self._categories(values).ravel(), minlength=self.domain_size),
                                             rng)

    @abc.abstractmethod
    def sample_support_of_counts(self, counts, rng: np.random.Generator) -> np.ndarray:
        """:meth:`sample_support` of reporters holding each value ``counts[k]`` times: the support
        depends on the values only through their counts."""

    def estimate(self, support, n: int) -> np.ndarray:
        n = self._reporters(n)
        if n == 0:
            return np.full(self.domain_size, np.nan)
        return (np.asarray(support, dtype=float) / n - self.q) / (self.p - self.q)
