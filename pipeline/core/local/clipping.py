"""The Hybrid Mechanism's clipping threshold for large domains (LDP-IDS, Section 6.1.2 of the SIGMOD version)."""

from __future__ import annotations

import math

import numpy as np

from ..validation import ParameterError, check_epsilon, check_positive_int
from .hybrid import HybridMechanism
from .oracles import ORACLE_NAMES, make_oracle

__all__ = ["ClippingThreshold", "norm_sub"]


def norm_sub(frequencies: np.ndarray) -> np.ndarray:
    """``max(f - delta, 0)`` with the one ``delta`` that makes it sum to 1 (Wang et al., NDSS 2020's Norm-Sub).

    >>> norm_sub(np.array([0.7, 0.5, -0.1, -0.1])).tolist()
    [0.6, 0.4, 0.0, 0.0]
    """
    ranked = np.sort(frequencies)[::-1]
    # delta when the k largest stay positive; the right k is the last whose smallest stays above delta
    deltas = (np.cumsum(ranked) - 1.0) / np.arange(1, ranked.size + 1)
    k = int(np.flatnonzero(ranked - deltas > 0)[-1]) if (ranked - deltas > 0).any() else 0
    return np.maximum(frequencies - deltas[k], 0.0)


class ClippingThreshold:
    """Chooses the bound ``theta`` HM clips values into, from a period of cached frequency reports.

    Values in a large range ``[0, B]`` are bucketed into ``buckets`` equal intervals; the devices of
    a calibration period report their bucket with a frequency oracle at ``epsilon``, and the
    server estimates the buckets' frequencies ``f_k``. Each candidate ``theta`` (a bucket's upper
    edge) has the expected squared error of an HM mean over ``[0, theta]`` from ``reporters``
    reports,

        ``err(theta) = V_HM(eps, n; theta) + (sum_{m_k > theta} f_k (m_k - theta))^2``,

    the noise of HM on the clipped range (``(theta/2)^2 Var*(eps) / n``) plus the squared bias of
    clipping (``m_k`` the buckets' midpoints); the threshold is the candidate of least error.

    Parameters
    ----------
    epsilon : float
        The budget of every report: the calibration's and HM's, > 0.
    bound : float
        ``B``, the top of the values' range, > 0.
    reporters : int
        ``n``, the reports one HM estimate will average (a publication's users).
    buckets : int, default 100
        The buckets of ``[0, B]``, >= 2: the candidates' resolution.
    oracle : {"ada", "grr", "oue"}, default "ada"
        The calibration's frequency oracle.

    Spend
    -----
    ``epsilon`` per calibration report. The calibration period is the stream's past: a device's
    calibration report and its stream reports must not share a window (the caller's schedule).

    Notes
    -----
    The estimated frequencies are made consistent first (Norm-Sub: subtract one constant and
    set what falls below 0 to 0, so that they are non-negative and sum to 1): the many empty
    buckets of a sparse tail would otherwise add their positive noise, times a long lever, to
    the bias of every threshold below them. The paper's ``sum_{theta<k<B}`` over the values k
    becomes a sum over the buckets above ``theta``.

    Examples
    --------
    >>> c = ClippingThreshold(1.0, bound=100.0, reporters=10_000, buckets=10)
    >>> f = np.array([0.5, 0.3, 0.1, 0.05, 0.05, 0, 0, 0, 0, 0])
    >>> c.select(f), bool(c.candidates[c.errors(f).argmin()] == c.select(f))
    (40.0, True)
    >>> c.select(np.r_[1.0, np.zeros(9)])  # everything in the first bucket: clip there
    10.0

    References
    ----------
    X. Ren, L. Shi, W. Yu, S. Yang, C. Zhao, Z. Xu. LDP-IDS: Local Differential Privacy for
    Infinite Data Streams. SIGMOD 2022: Section 6.1.2 (the expected squared error above), after
    ToPL (Wang et al., 2021), which finds the threshold from a period of cached reports.
    """

    def __init__(self, epsilon: float, bound: float, reporters: int, *, buckets: int = 100,
                 oracle: str = "ada") -> None:
        self.epsilon = check_epsilon(epsilon)
        if not (isinstance(bound, (int, float)) and math.isfinite(bound) and bound > 0):
            raise ParameterError(f"the bound B must be a finite number > 0, got {bound!r}")
        self.bound = float(bound)
        self.reporters = check_positive_int(reporters, "reporters n")
        self.buckets = check_positive_int(buckets, "buckets")
        if self.buckets < 2:
            raise ParameterError(f"a threshold needs at least 2 buckets to choose from, got {buckets}")
        if oracle not in ORACLE_NAMES or oracle == "hm":
            raise ParameterError(f"the calibration needs a frequency oracle (ada, grr or oue), got {oracle!r}")
        self.oracle = make_oracle(oracle, self.epsilon, self.buckets)
        width = self.bound / self.buckets
        self.candidates = width * np.arange(1, self.buckets + 1)  # the buckets' upper edges
        self.midpoints = self.candidates - width / 2
        self._hm_unit_variance = HybridMechanism(self.epsilon).worst_case_variance / self.reporters

    def bucket(self, values) -> np.ndarray:
        """The bucket of each value (clipped into ``[0, B]`` first): what a calibration device reports."""
        values = np.clip(np.asarray(values, dtype=float), 0.0, self.bound)
        return np.minimum((values / self.bound * self.buckets).astype(np.int64), self.buckets - 1)

    def errors(self, frequencies) -> np.ndarray:
        """``err(theta)`` of every candidate, from the buckets' (estimated) frequencies."""
        f = np.asarray(frequencies, dtype=float)
        if f.shape != (self.buckets,) or not np.isfinite(f).all():
            raise ParameterError(f"expected {self.buckets} finite bucket frequencies, got shape {f.shape}")
        f = norm_sub(f)
        bias = np.maximum(self.midpoints[None, :] - self.candidates[:, None], 0.0) @ f
        return (self.candidates / 2) ** 2 * self._hm_unit_variance + bias**2

    def select(self, frequencies) -> float:
        """The candidate of least ``err(theta)``."""
        return float(self.candidates[int(np.argmin(self.errors(frequencies)))])

    def calibrate(self, values, rng: np.random.Generator) -> float:
        """The threshold from the calibration reports of devices holding ``values`` (sampled from the
        reports' exact distribution, as simulated devices do)."""
        buckets = self.bucket(values)
        frequencies = self.oracle.estimate(self.oracle.sample_support(buckets, rng), buckets.size)
        return self.select(frequencies)
