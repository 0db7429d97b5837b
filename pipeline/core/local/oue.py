"""Optimized unary encoding (OUE): LDP-IDS Section 2.4 of the SIGMOD version (Wang et al., USENIX Sec 2017).

A device one-hot encodes its value into ``d`` bits and flips each bit independently: a 1 stays 1
with probability ``p = 1/2`` and a 0 becomes 1 with probability ``q = 1 / (e^eps + 1)``; every
bit's likelihood ratio is at most ``e^eps``. With ``c'[k]`` reports whose bit k is set,
``c_hat[k] = (c'[k]/n - q) / (1/2 - q)`` is unbiased (the frequency form; the paper prints the count form).

Variance: ``Var_k = 4 e^eps / (n (e^eps-1)^2) + f_k / n``, averaged over the bins
``V = 4 e^eps / (n (e^eps-1)^2) + 1/(d n)`` (``paper_literal``: ``+ 1/n``).

Bits per report: ``d`` (reports travel packed, ``np.packbits`` along the bin axis).

How the bits are drawn (exact, and fast enough for ~10^10 bits a day): each report owns a row of
``8 ceil(d/8)`` lanes (lane k is bin k, the rest pad the row to whole 64-bit words), and each lane
is one byte of the batch's :class:`~wevent.core.randomness.KeyStream`, rows in report order. A
0-bit is set when its byte is below ``T = floor(256 q)``, which has probability ``T/256 <= q``; an
independent sparse Bernoulli process (geometric gaps, from the words that follow the lanes in the
same keystream) sets the missing ``(q - T/256) / (1 - T/256)``, so every 0-bit is 1 with
probability exactly ``q``. A 1-bit is its byte's top bit (probability 1/2 exactly). The lanes are
compared in place, so a batch costs one keystream fill, one comparison and a few scatters.

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

import numpy as np

from ..randomness import KeyStream
from ..scratch import scratch
from .oracle import FrequencyOracle

__all__ = ["OUE", "column_counts"]

_LANES = 256  # one random byte per bit
_HALF = _LANES // 2
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
        ``1/2`` and ``1 / (e^eps + 1)``.

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
        self.q = 1.0 / (self.exp_eps + 1.0)
        self._threshold = math.floor(self.q * _LANES)
        coarse = self._threshold / _LANES
        self._extra_rate = (self.q - coarse) / (1.0 - coarse)
        self._row = -(-self.domain_size // _WORD) * _WORD

    # --- device side -------------------------------------------------------------------------
    def _perturbed_bits(self, values, streams, sizes=None) -> np.ndarray:
        """Perturbed bits of consecutive batches of reports, each batch from its own keystream.

        ``streams`` is one keystream (one batch of all ``values``) or a list, with ``sizes`` the
        number of values of each batch. Batch b reads its reports' lanes, then the spare words of
        its sparse correction, exactly as if it were perturbed alone. Returns the bool matrix
        ``(n, row)``, report i in row i, bin k in column k (columns from ``d`` on are padding). The
        matrix is a scratch buffer of this thread, valid until the next call.
        """
        values = self._categories(values).ravel().astype(np.intp)
        if isinstance(streams, KeyStream):
            streams, sizes = [streams], [values.size]
        n, row = values.size, self._row
        lane_counts = np.asarray(sizes, dtype=np.int64) * row
        lane_bounds = np.concatenate([[0], np.cumsum(lane_counts)])
        spare_bounds = np.concatenate([[0], np.cumsum(_spare_words(lane_counts, self._extra_rate))])
        lanes = scratch("lanes", n * row, np.uint8)
        words = scratch("words", int(spare_bounds[-1]), np.uint64)
        for stream, lane_start, lane_stop, word_start, word_stop in zip(
                streams, lane_bounds[:-1].tolist(), lane_bounds[1:].tolist(), spare_bounds[:-1].tolist(),
                spare_bounds[1:].tolist()):
            stream.fill(lanes[lane_start:lane_stop])
            stream.fill(words[word_start:word_stop])
        own = np.arange(0, n * row, row) + values
        own_bits = lanes[own] < _HALF
        bits = np.less(lanes, self._threshold, out=lanes.view(bool))  # in place: the bytes are spent
        if self._extra_rate > 0:
            bits[_sparse_successes(words, spare_bounds, lane_bounds, self._extra_rate, streams)] = True
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
        return (reports[:, -1] & padding) == 0 if n else np.zeros(0, dtype=bool)
    def bin_variance(self, frequencies, n: int) -> np.ndarray:
        """Exact variance of each bin's estimate, given the reporters' true frequencies."""
        e = self.exp_eps
        return 4 * e / (n * (e - 1) ** 2) + np.asarray(frequencies, dtype=float) / n

    def variance(self, n: int) -> float:
        n = self._reporters(n)
        if n == 0:
            return math.inf
        e = self.exp_eps
        base = 4 * e / (n * (e - 1) ** 2)
        if self.var_mode == "approx":
            return base
        return base + (1.0 / n if self.var_mode == "paper_literal" else 1.0 / (self.domain_size * n))

    @property
    def bits_per_report(self) -> int:
        return self.domain_size


def _spare_words(lanes: np.ndarray, rate: float) -> np.ndarray:
    """Uniforms reserved per batch for its sparse correction: the expected number of successes
    among ``lanes`` Bernoulli(``rate``) trials plus 8 standard deviations (a shortfall, rarer than
    1e-15, is topped up from the batch's keystream)."""
    if rate <= 0:
        return np.zeros(lanes.size, dtype=np.int64)
    expected = lanes * rate
    return np.ceil(expected + 8 * np.sqrt(expected) + 16).astype(np.int64)


def _sparse_successes(words: np.ndarray, word_bounds: np.ndarray, lane_bounds: np.ndarray, rate: float,
                      streams) -> np.ndarray:
    """The lanes (global indices) where independent Bernoulli(``rate``) trials succeed; batch b's
    trials cover lanes ``lane_bounds[b]:lane_bounds[b+1]``, its gaps come from its words
    ``word_bounds[b]:word_bounds[b+1]``.

    The gaps between successes of a Bernoulli process are i.i.d. Geometric(``rate``), drawn by
    inversion, ``ceil(log(U) / log(1 - rate))`` with ``U`` the top 53 bits of a word; cumulative
    sums within each batch give the successes, at a cost proportional to their number.
    """
    counts = np.diff(word_bounds)
    running = np.cumsum(_geometric(words, rate))
    before = np.concatenate([[0.0], running[word_bounds[1:-1] - 1]])  # the running sum where each batch starts
    positions = running + np.repeat(lane_bounds[:-1] - before - 1, counts)
    ends = np.repeat(lane_bounds[1:], counts)
    parts = [positions[positions < ends].astype(np.int64)]
    for short in np.flatnonzero(positions[word_bounds[1:] - 1] < lane_bounds[1:]):  # spare words ran out
        last = positions[word_bounds[short + 1] - 1]
        while last < lane_bounds[short + 1]:
            more = last + np.cumsum(_geometric(streams[short].words(64), rate))
            parts.append(more[more < lane_bounds[short + 1]].astype(np.int64))
            last = more[-1]
    return np.concatenate(parts)


def _geometric(words: np.ndarray, rate: float) -> np.ndarray:
    """Geometric(``rate``) draws (trials up to the first success, >= 1) by inversion of 64-bit words."""
    uniforms = ((words >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53  # in (0, 1)
    return np.ceil(np.log(uniforms) / math.log1p(-rate))


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
