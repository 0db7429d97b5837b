"""Exact discrete Laplace noise, immune to the floating-point attack on the Laplace mechanism.

Inverse-CDF Laplace noise in floating point leaks through its low-order bits: the set of doubles
``x + Lap(b)`` can take depends on ``x`` (Mironov, "On significance of the least significant bits
for differential privacy", CCS 2012, Section 3). Integer-valued noise has no such bits. This
module samples the two-sided geometric (discrete Laplace) distribution

    P(X = x) = (1 - a) / (1 + a) * a^|x|,   a = exp(-epsilon),   x in Z,

**exactly**: given uniform 64-bit words, the output has precisely this law, for the exact
rational value of the float ``epsilon``. Added to an integer query of sensitivity ``Delta`` it is
``Delta * epsilon``-DP with no rounding excess (:func:`two_sided_geometric` is called with the
per-unit ``epsilon = eps / Delta``). Its variance is ``2a / (1 - a)^2``
(:func:`discrete_laplace_variance`), slightly below the continuous ``2 / epsilon^2``.

How. ``X = G1 - G2`` for independent geometric variables with ``P(G >= k) = a^k``; the
difference of two such variables is exactly two-sided geometric. The binary digits of ``G`` are
independent: digit ``j`` is 1 with probability ``p_j = a^(2^j) / (1 + a^(2^j))``, and
``floor(G / 2^J)`` is itself geometric with ``P(>= h) = q^h``, ``q = a^(2^J)``. The sampler draws
digits ``0..J-1`` and the tail with ``J`` the first digit where ``q <= 2^-32``:

* a Bernoulli(p) coin is "a uniform real in [0, 1) is below p": its first 64 bits (one word)
  are compared with the first 64 bits of p's binary expansion; the rare tie (probability 2^-64)
  compares the next word with the next 64 bits, and so on. The expansions of the transcendental
  ``p_j`` and ``q`` are computed with interval arithmetic at whatever precision a word needs
  (:class:`Expansion`), so every coin is exact, whatever its probability;
* the tail is a run of Bernoulli(q) coins (one per lane, and more only after a success).

The common path is one vectorised comparison of ``2 (J + 1)`` words per value against a cached
table of first words; ties and tail successes are resolved per lane, in a fixed order, from the
same generator, so the same generator state always gives the same noise.

>>> import numpy as np
>>> bits = np.random.PCG64(1)
>>> x = two_sided_geometric(bits, 0.5, 100_000)
>>> x.dtype, bool(np.all(x == np.rint(x)))
(dtype('int64'), True)
>>> round(float(x.var()) / discrete_laplace_variance(0.5), 2)
1.0
"""

from __future__ import annotations

import decimal
import functools
import math
from fractions import Fraction
from itertools import compress

import numpy as np

from .validation import ParameterError

__all__ = ["NOISE_KINDS", "check_noise", "Expansion", "GeometricTable", "geometric_table", "two_sided_geometric",
           "discrete_laplace_variance", "laplace_variance", "noise_variance"]

NOISE_KINDS = ("discrete", "laplace")
_WORD = 64
_MASK = (1 << _WORD) - 1
_TAIL_LOG = 32 * math.log(2.0)  # the tail coin has probability q = a^(2^J) <= 2^-32


def check_noise(noise) -> str:
    """``"discrete"`` (exact two-sided geometric on integer queries) or ``"laplace"`` (continuous, paper parity)."""
    if noise not in NOISE_KINDS:
        raise ParameterError(f"noise must be one of {', '.join(NOISE_KINDS)}, got {noise!r}")
    return noise


def laplace_variance(epsilon: float) -> float:
    """Variance of continuous Laplace noise of scale ``1/epsilon``: ``2 / epsilon^2``."""
    return 2.0 / (epsilon * epsilon)


def discrete_laplace_variance(epsilon: float) -> float:
    """Variance of two-sided geometric noise with ``a = exp(-epsilon)``: ``2a / (1 - a)^2``.

    Written as ``1 / (2 sinh^2(epsilon / 2))`` so that it is accurate for tiny epsilon too; it
    never exceeds the continuous ``2 / epsilon^2``.

    >>> round(discrete_laplace_variance(1.0), 6), round(laplace_variance(1.0), 6)
    (1.841347, 2.0)
    """
    return 0.5 / math.sinh(0.5 * epsilon) ** 2


def noise_variance(epsilon: float, noise: str) -> float:
    """Per-unit noise variance of a release at budget ``epsilon`` (sensitivity 1) for either noise kind."""
    return discrete_laplace_variance(epsilon) if check_noise(noise) == "discrete" else laplace_variance(epsilon)


class Expansion:
    """The binary expansion of ``1 / (1 + e^y)`` (``kind="digit"``) or ``e^-y`` (``kind="tail"``), y > 0 rational.

    ``word(k)`` is bits ``64k+1 .. 64(k+1)`` after the binary point: ``floor(v * 2^(64(k+1))) mod 2^64``.
    It evaluates ``e^y`` with :mod:`decimal` (correctly rounded) and bounds the two roundings, and
    doubles the precision until both ends of the interval agree on the word. For rational y > 0
    the value is transcendental (Lindemann), so no word sits on a boundary and this terminates.

    >>> hex(Expansion("tail", Fraction(1)).word(0))     # e^-1 = 0.36787944117144233... = 0x0.5e2d58d8b3bcdf1a...
    '0x5e2d58d8b3bcdf1a'
    """

    def __init__(self, kind: str, y: Fraction) -> None:
        if kind not in ("digit", "tail") or y <= 0:
            raise ValueError(f"an expansion needs kind digit|tail and y > 0, got {kind!r}, {y}")
        self.kind, self.y = kind, Fraction(y)
        self._words: dict[int, int] = {}

    def _bounds(self, digits: int) -> tuple[Fraction, Fraction]:
        with decimal.localcontext() as context:
            context.prec = digits
            context.Emax, context.Emin = decimal.MAX_EMAX, decimal.MIN_EMIN
            e = (decimal.Decimal(self.y.numerator) / decimal.Decimal(self.y.denominator)).exp()
        # y was rounded (relative 10^(1-digits)), then exp rounded again: e^y = e * (1 + theta),
        # |theta| <= 4 * 10^(1-digits) * (1 + y) once that is below 1/2.
        slack = Fraction(4 * (1 + self.y)) / 10 ** (digits - 1)
        low, high = Fraction(e) * (1 - slack), Fraction(e) * (1 + slack)
        if self.kind == "digit":
            return 1 / (1 + high), 1 / (1 + low)
        return 1 / high, 1 / low

    def word(self, k: int) -> int:
        if k not in self._words:
            shift = _WORD * (k + 1)
            # decimal is relative precision: 64(k+1) bits are ~20(k+1) digits, plus what y's rounding costs
            digits = 40 + 20 * (k + 1) + len(str(math.ceil(self.y))) + len(str(self.y.denominator))
            while True:
                low, high = self._bounds(digits)
                first, last = math.floor(low * 2**shift), math.floor(high * 2**shift)
                if first == last:
                    self._words[k] = first & _MASK
                    break
                digits *= 2
        return self._words[k]

    def coin_from(self, words, start: int = 0) -> bool:
        """Bernoulli(v) from uniform words: is the uniform real they spell below v?

        ``start`` > 0 resumes a comparison whose first ``start`` words tied with v's.
        """
        k = start
        for u in words:
            w = self.word(k)
            if u != w:
                return u < w
            k += 1
        raise ValueError("the word source ran out")


class GeometricTable:
    """The first words of the thresholds of ``G`` at one ``epsilon``: digits ``0..J-1``, then the tail.

    ``words`` holds them as a uint64 vector of J + 1 (the last is the tail's ``q``), ``first`` as
    Python ints; ``expansion(k)`` is threshold k's full expansion, built only when a tie needs it.
    """

    def __init__(self, epsilon: float) -> None:
        self.epsilon = epsilon
        self.exact = Fraction(epsilon)
        self.digits = math.ceil(math.log2(_TAIL_LOG / epsilon)) if epsilon < _TAIL_LOG else 0
        self._expansions: dict[int, Expansion] = {}
        first = _first_words(self.exact, self.digits)
        self.first = first or tuple(self.expansion(k).word(0) for k in range(self.digits + 1))
        self.words = np.array(self.first, dtype=np.uint64)
        # value weights of the J digits; the tail's column weighs 0 (it is added per lane)
        self.weights = np.array([1 << j for j in range(self.digits)] + [0], dtype=np.int64 if self.digits < 62 else object)
        self.weight_list = [1 << j for j in range(self.digits)]

    def expansion(self, k: int) -> Expansion:
        if k not in self._expansions:
            kind = "digit" if k < self.digits else "tail"
            self._expansions[k] = Expansion(kind, self.exact * 2**k)
        return self._expansions[k]


@functools.lru_cache(maxsize=4096)
def geometric_table(epsilon: float) -> GeometricTable:
    """The (cached) threshold table of the geometric digits at per-unit ``epsilon`` > 0."""
    if not (isinstance(epsilon, float) and math.isfinite(epsilon) and epsilon > 0):
        raise ParameterError(f"discrete noise needs a finite epsilon > 0, got {epsilon!r}")
    return GeometricTable(epsilon)


_FIXED = 256  # bits of the fixed-point interval arithmetic of _first_words


def _first_words(epsilon: Fraction, digits: int) -> tuple | None:
    """The first words of ``p_0 .. p_{J-1}`` and ``q`` in one pass, or None when they are not certain.

    ``a = e^-epsilon`` is enclosed in an interval of 256-bit fixed-point integers (one decimal
    exp at 90 digits, its error bounded as in :class:`Expansion`); squaring the interval's ends,
    rounded outwards, encloses ``a^(2^j)`` for every j, and ``p = q / (1 + q)`` is increasing in
    q, so a word is certain when both ends give it. Two orders of magnitude faster than one
    :meth:`Expansion.word` per threshold; anything uncertain (a word within ~2^-150 of a boundary,
    or epsilon so small that ``a`` is 1 to 256 bits) falls back to the expansions.
    """
    one = 1 << _FIXED
    with decimal.localcontext() as context:
        context.prec = 110
        context.Emax, context.Emin = decimal.MAX_EMAX, decimal.MIN_EMIN
        a = (-(decimal.Decimal(epsilon.numerator) / decimal.Decimal(epsilon.denominator))).exp()
        scaled = a * one  # relative error of a: <= 4 (1 + epsilon) 10^-109, covered by the 10^-100 margin
        low, high = int(scaled * (1 - decimal.Decimal("1e-100"))) - 1, int(scaled * (1 + decimal.Decimal("1e-100"))) + 2
    if epsilon > 10**8 or low <= 0 or high >= one:
        return None
    words = []
    for j in range(digits + 1):
        if j < digits:
            first, last = (low << _WORD) // (one + low), (high << _WORD) // (one + high)
        else:
            first, last = low >> (_FIXED - _WORD), high >> (_FIXED - _WORD)
        if first != last:
            return None
        words.append(first)
        low, high = (low * low) >> _FIXED, -((-high * high) >> _FIXED)
    return tuple(words)


def two_sided_geometric(bits: np.random.BitGenerator, epsilon: float, size: int | None = None):
    """Exact draws of ``G1 - G2`` with ``P(G >= k) = exp(-epsilon k)``, from ``bits``' 64-bit words.

    ``size=None`` gives one Python int; otherwise an int64 array (of Python ints, dtype object,
    in the astronomically rare case of a value beyond 2^61). Deterministic given the state of
    ``bits``: the words of value i are words ``2(J+1)i .. 2(J+1)(i+1) - 1`` (G1's J digits and
    tail coin, then G2's), and ties and tails read further words in a fixed order.
    """
    table = geometric_table(float(epsilon))
    if size is None:
        return _scalar(bits, table)
    j = table.digits
    words = bits.random_raw(2 * (j + 1) * size).reshape(2, size, j + 1)
    ones = words < table.words  # digits 0..J-1, then the first tail coin
    ties = words == table.words
    if ties.any():
        extra = _words(bits)
        for g, lane, k in sorted(map(tuple, np.argwhere(ties)), key=lambda t: t[2] == j):  # digit ties first
            ones[g, lane, k] = table.expansion(k).coin_from(extra, start=1)
    values = ones.astype(table.weights.dtype) @ table.weights
    success = ones[..., j]
    if success.any():
        highs = {(g, lane): _tail(bits, table) for g, lane in np.argwhere(success)}
        if max(highs.values()) >= 1 << 61:
            values = values.astype(object)  # exact Python ints: a value this large never occurs in practice
        for (g, lane), high in highs.items():
            values[g, lane] += high
    return values[0] - values[1]


def _scalar(bits, table: GeometricTable) -> int:
    """One draw with the words and the order of :func:`two_sided_geometric` at ``size=1``, in Python ints."""
    j = table.digits
    words = bits.random_raw(2 * (j + 1)).tolist()
    thresholds = table.first + table.first
    ones = list(map(int.__lt__, words, thresholds))
    if any(map(int.__eq__, words, thresholds)):
        extra = _words(bits)
        tied = [i for i, (u, t) in enumerate(zip(words, thresholds)) if u == t]
        for i in sorted(tied, key=lambda i: i % (j + 1) == j):  # digit ties first, then tail ties
            ones[i] = table.expansion(i % (j + 1)).coin_from(extra, start=1)
    g1 = sum(compress(table.weight_list, ones[:j])) + (_tail(bits, table) if ones[j] else 0)
    g2 = sum(compress(table.weight_list, ones[j + 1: 2 * j + 1])) + (_tail(bits, table) if ones[2 * j + 1] else 0)
    return g1 - g2


def _tail(bits, table: GeometricTable) -> int:
    """``2^J * H`` after a successful first tail coin: H counts successes up to the first failure."""
    tail, h = table.expansion(table.digits), 1
    while tail.coin_from(_words(bits)):
        h += 1
    return h << table.digits


def _words(bits):
    """The generator's next words, one at a time (only ever read after a tie or a tail success)."""
    while True:
        yield int(bits.random_raw())
