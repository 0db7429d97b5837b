"""Optimized unary encoding (OUE): spec ldp-ids §2.2, [S] §3.2 "OUE" (Wang et al., USENIX Sec 2017).

A device one-hot encodes its value into ``d`` bits and flips each bit independently: a 1 stays 1
with probability ``p = 1/2`` and a 0 becomes 1 with probability ``q = 1 / (e^eps + 1)``; every
bit's likelihood ratio is at most ``e^eps``. With ``c'[k]`` reports whose bit k is set,
``c_hat[k] = (c'[k]/n - q) / (1/2 - q)`` is unbiased (the frequency form, RES-9).

Variance: ``Var_k = 4 e^eps / (n (e^eps-1)^2) + f_k / n``, averaged over the bins
``V = 4 e^eps / (n (e^eps-1)^2) + 1/(d n)`` (``paper_literal``: ``+ 1/n``).

Bits per report: ``d`` (reports travel packed, ``np.packbits`` along the bin axis).

How the bits are drawn (exact, and fast enough for ~10^10 bits a day): the bits of ``n`` reports
are laid out bin-major (lane ``k * width + i`` is bin k of the i-th report, ``width`` = n rounded
up to a multiple of 8) and each lane is one random byte of ``random_raw``. A 0-bit is set when its
byte is below ``T = floor(256 q)``, which has probability ``T/256 <= q``; an independent sparse
Bernoulli process (geometric gaps, from spare words of the same ``random_raw`` call) sets the
missing ``(q - T/256) / (1 - T/256)``, so every 0-bit is 1 with probability exactly ``q``. A 1-bit
is its byte's top bit (probability 1/2 exactly).

Examples
--------
>>> oue = OUE(epsilon=1.0, domain_size=10)
>>> rng = np.random.default_rng(0)
>>> reports = oue.perturb(np.array([0, 9, 9]), rng)
>>> reports.shape, reports.dtype.name
((3, 2), 'uint8')
>>> oue.support(reports).shape
(10,)
>>> f"{oue.variance(1000):.4e}", oue.bits_per_report  # 4e/(1000 (e-1)^2) + 1/(10 * 1000)
('3.7827e-03', 10)
"""

from __future__ import annotations

import math
import threading

import numpy as np

from .oracle import FrequencyOracle

__all__ = ["OUE", "column_counts"]

_LANES = 256  # one random byte per bit
_SCRATCH = threading.local()
_HALF = _LANES // 2


class OUE(FrequencyOracle):
    name = "oue"

    def __init__(self, epsilon: float, domain_size: int, var_mode: str = "exact_avg") -> None:
        super().__init__(epsilon, domain_size, var_mode)
        self.p = 0.5
        self.q = 1.0 / (self.exp_eps + 1.0)
        self._threshold = math.floor(self.q * _LANES)
        coarse = self._threshold / _LANES
        self._extra_rate = (self.q - coarse) / (1.0 - coarse)

    # --- device side -------------------------------------------------------------------------
    def _perturbed_bits(self, values, rngs, sizes=None) -> tuple[np.ndarray, np.ndarray]:
        """Perturbed bits of consecutive batches of reports, each batch from its own generator.

        ``rngs`` is one generator (one batch of all ``values``) or a list, with ``sizes`` the
        number of values of each batch. Batch b draws one ``random_raw`` of its lanes (bin-major,
        width ``8 ceil(size_b / 8)``) followed by spare words for the sparse correction, exactly
        as if it were perturbed alone; batches are laid side by side. Returns the bool matrix
        ``(d, total width)``, padding columns False, and the column of every report. The matrix is
        a scratch buffer of this thread, valid until the next call.
        """
        values = self._categories(values).ravel().astype(np.intp)
        if isinstance(rngs, np.random.Generator):
            rngs, sizes = [rngs], [values.size]
        d = self.domain_size
        sizes = np.asarray(sizes, dtype=np.int64)
        widths = -(-sizes // 8) * 8
        offsets = np.concatenate([[0], np.cumsum(widths)])
        total = int(offsets[-1])
        bits = _scratch("bits", d * total, bool).reshape(d, total)
        spares = _spare_words(d * widths, self._extra_rate)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        words, own = [], []
        for rng, offset, width, spare, start, size in zip(rngs, offsets[:-1].tolist(), widths.tolist(), spares.tolist(),
                                                          starts.tolist(), sizes.tolist()):
            raw = rng.bit_generator.random_raw(d * width // 8 + spare)
            lanes = raw[: d * width // 8].view(np.uint8)
            np.less(lanes.reshape(d, width), self._threshold, out=bits[:, offset : offset + width])
            own.append(np.take(lanes, values[start : start + size] * width + np.arange(size)) < _HALF)
            # Keep a copy of the few spare words, not a view: the block's buffer is freed at once and
            # the allocator reuses it for the next block (live views made it map fresh pages each time).
            words.append(raw[d * width // 8 :].copy())
        if self._extra_rate > 0 and words:
            block, position = _sparse_successes(words, d * widths, self._extra_rate, rngs)
            bits.ravel()[position // widths[block] * total + offsets[block] + position % widths[block]] = True
        columns = np.arange(values.size) + np.repeat(offsets[:-1] - starts, sizes)
        bits.ravel()[values * total + columns] = np.concatenate(own) if own else False
        padding = widths - sizes
        bits[:, np.repeat(offsets[:-1] + sizes - np.cumsum(padding) + padding, padding) + np.arange(padding.sum())] = False
        return bits, columns

    def perturb(self, values, rng: np.random.Generator) -> np.ndarray:
        """Packed reports: one row of ``ceil(d/8)`` bytes per value (``np.packbits`` order)."""
        bits, columns = self._perturbed_bits(values, rng)
        return np.ascontiguousarray(np.packbits(bits[:, columns], axis=0).T)

    def perturbed_support(self, values, rng: np.random.Generator) -> np.ndarray:
        return column_counts(self._perturbed_bits(values, rng)[0])

    def batches_support(self, values, rngs, sizes) -> np.ndarray:
        return column_counts(self._perturbed_bits(values, rngs, sizes)[0])

    def sample_support(self, values, rng: np.random.Generator) -> np.ndarray:
        """``c'[k] ~ Bin(n_k, 1/2) + Bin(n - n_k, q)`` independently per bin."""
        values = self._categories(values).ravel()
        counts = np.bincount(values, minlength=self.domain_size)
        return rng.binomial(counts, self.p) + rng.binomial(values.size - counts, self.q)

    # --- server side -------------------------------------------------------------------------
    def support(self, reports) -> np.ndarray:
        reports = np.asarray(reports, dtype=np.uint8)
        return np.unpackbits(reports.reshape(-1, -(-self.domain_size // 8)), axis=1, count=self.domain_size).sum(
            axis=0, dtype=np.int64
        )

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


def _scratch(name: str, size: int, dtype) -> np.ndarray:
    """A reusable flat array of this thread: two fresh multi-megabyte arrays alive at once make the
    allocator map new pages on every call, and the page faults cost more than filling them."""
    buffer = getattr(_SCRATCH, name, None)
    if buffer is None or buffer.size < size:
        buffer = np.empty(size, dtype)
        setattr(_SCRATCH, name, buffer)
    return buffer[:size]


def _spare_words(lanes: np.ndarray, rate: float) -> np.ndarray:
    """Uniforms reserved per batch for its sparse correction: the expected number of successes
    among ``lanes`` Bernoulli(``rate``) trials plus 8 standard deviations (a shortfall, rarer than
    1e-15, is topped up from the batch's generator)."""
    if rate <= 0:
        return np.zeros(lanes.size, dtype=np.int64)
    expected = lanes * rate
    return np.ceil(expected + 8 * np.sqrt(expected) + 16).astype(np.int64)


def _sparse_successes(words: list[np.ndarray], lanes: np.ndarray, rate: float, rngs) -> tuple[np.ndarray, np.ndarray]:
    """``(batch, position)`` of the successes of independent Bernoulli(``rate``) trials over each
    batch's ``lanes`` lanes, from that batch's spare random words.

    The gaps between successes of a Bernoulli process are i.i.d. Geometric(``rate``), drawn by
    inversion, ``ceil(log(U) / log(1 - rate))`` with ``U`` the top 53 bits of a word; cumulative
    sums within each batch give the successes, at a cost proportional to their number.
    """
    counts = np.array([w.size for w in words])
    uniforms = ((np.concatenate(words) >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53
    gaps = np.ceil(np.log(uniforms) / math.log1p(-rate))
    ends = np.cumsum(counts)
    running = np.cumsum(gaps)
    before = np.concatenate([[0.0], running[ends[:-1] - 1]]) if counts.size else np.zeros(0)
    positions = (running - np.repeat(before, counts) - 1).astype(np.int64)
    batch = np.repeat(np.arange(counts.size), counts)
    parts = []
    for short in np.flatnonzero(positions[ends - 1] < lanes):  # the spare words did not reach the end
        last = int(positions[ends[short] - 1])
        more = last + np.cumsum(rngs[short].geometric(rate, int(lanes[short] - last) // max(1, int(1 / rate)) + 64))
        while more[-1] < lanes[short]:
            more = np.concatenate([more, more[-1] + np.cumsum(rngs[short].geometric(rate, 64))])
        parts.append((np.full(more.size, short), more))
    if parts:
        batch = np.concatenate([batch] + [p[0] for p in parts])
        positions = np.concatenate([positions] + [p[1] for p in parts])
    keep = positions < lanes[batch]
    return batch[keep], positions[keep]


def column_counts(bits: np.ndarray) -> np.ndarray:
    """Number of True entries in each row of a C-contiguous bool matrix whose width is a multiple of 8.

    Rows are summed as 64-bit words in runs of at most 255 words, so each byte lane holds a count
    <= 255 and never carries into its neighbour; the byte lanes are added up at the end.

    >>> column_counts(np.eye(3, 16, dtype=bool) | np.eye(3, 16, 5, dtype=bool)).tolist()
    [2, 2, 2]
    """
    rows = bits.shape[0]
    words = bits.view(np.uint64)
    whole = words.shape[1] - words.shape[1] % 255
    runs = words[:, :whole].reshape(rows, -1, 255).sum(axis=2, dtype=np.uint64)
    rest = words[:, whole:].sum(axis=1, dtype=np.uint64, keepdims=True)
    return np.concatenate([runs, rest], axis=1).view(np.uint8).reshape(rows, -1).sum(axis=1, dtype=np.int64)
