"""Optimized unary encoding (OUE): LDP-IDS Section 2.4 of the SIGMOD version (Wang et al., USENIX Sec 2017).

A device one-hot encodes its value into ``d`` bits and flips each bit independently: a 1 stays 1
with probability ``p = 1/2`` and a 0 becomes 1 with probability ``q = 1 / (e^eps + 1)``; every
bit's likelihood ratio is at most ``e^eps``. With ``c'[k]`` reports whose bit k is set,
``c_hat[k] = (c'[k]/n - q) / (1/2 - q)`` is unbiased (the frequency form; the paper prints the count form).

Variance: ``Var_k = 4 e^eps / (n (e^eps-1)^2) + f_k / n``, averaged over the bins
``V = 4 e^eps / (n (e^eps-1)^2) + 1/(d n)`` (``paper_literal``: ``+ 1/n``).

Bits per report: ``d`` (reports travel packed, ``np.packbits`` along the bin axis).

How the bits are drawn (exact, and fast enough for ~10^10 bits a day): ``q`` is the dyadic
``Q / 2^72`` just above ``1 / (e^eps + 1)``, so that the odds ``(1 - q)/q`` are at most ``e^eps``
and as close to it as 72 bits allow (:func:`~.exact_draws.exp_share`). Each report owns a row of
``8 ceil(d/8)`` lanes (lane k is bin k, the rest pad the row to whole 64-bit words), and each lane
is one byte of the batch's :class:`~wevent.core.randomness.KeyStream`, rows in report order. A
1-bit is its byte's top bit (probability 1/2 exactly). A 0-bit is "the uniform real spelled by its
byte, then by one more word, is below ``q``": set when the byte is below ``T``, ``Q``'s first 8
bits, and when the byte is ``T`` (probability 1/256) and the next word of the batch's keystream is
below ``Q``'s last 64 bits. Batch b reads its lanes, then one word per lane whose byte is ``T``,
in lane order. The lanes are compared in place, so a batch costs one keystream fill, one
comparison, a search for the ties and a few scatters.

Examples
--------
>>> from wevent.core.randomness import KeyStream
>>> oue = OUE(epsilon=1.0, domain_size=10)
>>> reports = oue.perturb(np.array([0, 9, 9]), KeyStream.from_seed(0))
>>> reports.shape, reports.dtype.name
((3, 2), 'uint8')
>>> oue.support(reports).shape
(10,)
>>> f"{oue.variance(1000):.4e}", oue.bits_per_report  # 4e/(1000 (e-1)^2) + 1/(10 * 1000)
('3.7827e-03', 10)
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..randomness import KeyStream
from ..scratch import scratch
from .exact_draws import exp_share
from .oracle import FrequencyOracle

__all__ = ["OUE", "column_counts"]

_HALF = 128  # one random byte per bit: below this with probability 1/2
_Q_BITS = 72  # q's bits: a byte, then a word
_WORD = 8  # lanes per 64-bit word


class OUE(FrequencyOracle):
    """Optimized unary encoding: a device sends ``d`` bits, its value's bit kept at 1 with
    probability ``1/2`` and every other bit set with probability ``q = 1 / (e^eps + 1)``.

    Parameters
    ----------
    epsilon : float
        The budget of one report, > 0.
    domain_size : int
        ``d``, the values a device may hold (``0..d-1``) and the bits of a report.
    var_mode : {"exact_avg", "paper_literal", "approx"}, default "exact_avg"
        The form of :meth:`variance` (:data:`~.oracle.VAR_MODES`).

    Attributes
    ----------
    p, q : float
        ``1/2`` and ``Q / 2^72``, ``1 / (e^eps + 1)`` rounded up to 72 bits.
    ratio : float
        ``(1 - q)/q``, what the variance's ``e^eps`` is.

    Examples
    --------
    >>> oue = OUE(epsilon=1.0, domain_size=4)
    >>> oue.p, round(oue.q, 6), oue.bits_per_report
    (0.5, 0.268941, 4)

    References
    ----------
    T. Wang, J. Blocki, N. Li, S. Jha. Locally Differentially Private Protocols for Frequency
    Estimation. USENIX Security 2017: Section 4.3, Unary Encoding (OUE). X. Ren, L. Shi,
    W. Yu, S. Yang, C. Zhao, Z. Xu. LDP-IDS: Local Differential Privacy for Infinite Data Streams.
    SIGMOD 2022: Section 2.4 of the SIGMOD version, which uses it.
    """

    name = "oue"

    def __init__(self, epsilon: float, domain_size: int, var_mode: str = "exact_avg") -> None:
        super().__init__(epsilon, domain_size, var_mode)
        self.p = 0.5
        set_weight = 2**_Q_BITS - exp_share(self.epsilon, _Q_BITS)  # Q: (2^72 - Q)/Q <= e^eps
        self.q = float(Fraction(set_weight, 2**_Q_BITS))
        self.ratio = float(Fraction(2**_Q_BITS - set_weight, set_weight))
        self._threshold = set_weight >> 64  # T <= 128, as q <= 1/2
        self._tie_below = np.uint64(set_weight & (2**64 - 1))
        self._row = -(-self.domain_size // _WORD) * _WORD

    # --- device side -------------------------------------------------------------------------
    def _perturbed_bits(self, values, streams, sizes=None) -> np.ndarray:
        """Perturbed bits of consecutive batches of reports, each batch from its own keystream.

        ``streams`` is one keystream (one batch of all ``values``) or a list, with ``sizes`` the
        number of values of each batch. Batch b reads its reports' lanes, then one word per lane
        whose byte is ``T``, exactly as if it were perturbed alone. Returns the bool matrix
        ``(n, row)``, report i in row i, bin k in column k (columns from ``d`` on are padding). The
        matrix is a scratch buffer of this thread, valid until the next call.
        """
        values = self._categories(values).ravel().astype(np.intp)
        if isinstance(streams, KeyStream):
            streams, sizes = [streams], [values.size]
        n, row = values.size, self._row
        lane_bounds = np.concatenate([[0], np.cumsum(np.asarray(sizes, dtype=np.int64) * row)]).tolist()
        lanes = scratch("lanes", n * row, np.uint8)
        ties, tie_words = [], []
        for stream, lane_start, lane_stop in zip(streams, lane_bounds[:-1], lane_bounds[1:]):
            tied = np.flatnonzero(stream.fill(lanes[lane_start:lane_stop]) == self._threshold)
            ties.append(tied + lane_start)
            tie_words.append(stream.words(tied.size))
        own = np.arange(0, n * row, row) + values
        own_bits = lanes[own] < _HALF
        bits = np.less(lanes, self._threshold, out=lanes.view(bool))  # in place: the bytes are spent
        if ties:
            bits[np.concatenate(ties)] = np.concatenate(tie_words) < self._tie_below
        bits[own] = own_bits
        return bits.reshape(n, row)

    def perturb(self, values, stream: KeyStream) -> np.ndarray:
        """Packed reports: one row of ``ceil(d/8)`` bytes per value (``np.packbits`` order)."""
        return np.packbits(self._perturbed_bits(values, stream)[:, : self.domain_size], axis=1)

    def perturbed_support(self, values, stream: KeyStream) -> np.ndarray:
        return column_counts(self._perturbed_bits(values, stream))[: self.domain_size]

    def batches_support(self, values, streams, sizes) -> np.ndarray:
        return column_counts(self._perturbed_bits(values, streams, sizes))[: self.domain_size]

    def sample_support_of_counts(self, counts, rng: np.random.Generator) -> np.ndarray:
        """``c'[k] ~ Bin(n_k, 1/2) + Bin(n - n_k, q)`` independently per bin."""
        return rng.binomial(counts, self.p) + rng.binomial(counts.sum() - counts, self.q)

    # --- server side -------------------------------------------------------------------------
    def support(self, reports) -> np.ndarray:
        reports = np.asarray(reports, dtype=np.uint8)
        return np.unpackbits(reports.reshape(-1, -(-self.domain_size // 8)), axis=1, count=self.domain_size).sum(
            axis=0, dtype=np.int64
        )

    def possible(self, reports, n: int) -> np.ndarray:
        """uint8 rows of ``ceil(d/8)`` bytes; each possible when its padding bits (after bin d-1) are 0."""
        reports = np.asarray(reports)
        if reports.dtype != np.uint8 or reports.shape != (n, -(-self.domain_size // 8)):
            return np.zeros(n, dtype=bool)
        padding = np.uint8((1 << (-self.domain_size % 8)) - 1)  # np.packbits fills the last byte's low bits with 0
        return (reports[:, -1] & padding) == 0

    def bin_variance(self, frequencies, n: int) -> np.ndarray:
        """Exact variance of each bin's estimate, given the reporters' true frequencies."""
        e = self.ratio
        return 4 * e / (n * (e - 1) ** 2) + np.asarray(frequencies, dtype=float) / n

    def variance(self, n: int) -> float:
        n = self._reporters(n)
        if n == 0:
            return math.inf
        e = self.ratio
        base = 4 * e / (n * (e - 1) ** 2)
        if self.var_mode == "approx":
            return base
        return base + (1.0 / n if self.var_mode == "paper_literal" else 1.0 / (self.domain_size * n))

    @property
    def bits_per_report(self) -> int:
        return self.domain_size


def column_counts(bits: np.ndarray) -> np.ndarray:
    """Number of True entries in each column of a C-contiguous bool matrix whose width is a multiple of 8.

    Rows are added as 64-bit words in groups of at most 255 rows, so each byte lane holds a count
    <= 255 and never carries into its neighbour; the byte lanes are added up at the end.

    >>> column_counts(np.eye(16, 8, dtype=bool) | np.eye(16, 8, -8, dtype=bool)).tolist()
    [2, 2, 2, 2, 2, 2, 2, 2]
    """
    rows, width = bits.shape
    words = bits.view(np.uint64)
    whole = rows - rows % 255
    grouped = np.add.reduce(words[:whole].reshape(255, whole // 255, width // _WORD), axis=0)  # rows j, j+m, j+2m, ...
    rest = np.add.reduce(words[whole:], axis=0, keepdims=True)
    return np.concatenate([grouped, rest]).view(np.uint8).reshape(-1, width).sum(axis=0, dtype=np.int64)
