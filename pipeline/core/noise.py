"""Exact discrete Laplace noise, immune to the floating-point attack on the Laplace mechanism.

Inverse-CDF Laplace noise in floating point leaks through its low-order bits: the set of doubles
``x + Lap(b)`` can take depends on ``x`` (Mironov, "On significance of the least significant bits
for differential privacy", CCS 2012, Section 3). Integer-valued noise has no such bits. This
module samples the two-sided geometric (discrete Laplace) distribution

    P(X = x) = (1 - a) / (1 + a) * a^|x|,   a = exp(-epsilon),   x in Z,

**exactly**: given uniform random words, the output has precisely this law, for the exact
rational value of the float ``epsilon``. Added to an integer query of sensitivity ``Delta`` it is
``Delta * epsilon``-DP with no rounding excess (:func:`two_sided_geometric` is called with the
per-unit ``epsilon = eps / Delta``). Its variance is ``2a / (1 - a)^2``
(:func:`discrete_laplace_variance`), slightly below the continuous ``2 / epsilon^2``.

The sampler, and why its law is exact
-------------------------------------
``|X|`` and the sign of ``X`` are independent, the sign is a fair coin, and
``P(|X| >= k) = t_k = 2 a^k / (1 + a)`` for ``k >= 1``. Every value owns a sign bit ``S`` and
uniform reals ``U_0, U_1, ...`` in [0, 1), each a string of random bits read from a
:class:`WordSource` (the first 63 from one word, the next ones, 64 at a time, only when needed).

1. **Level 0** is the inverse CDF of ``|X|``: ``M = #{1 <= k <= n : U_0 < t_k}``. The ``t_k``
   decrease, so ``M = k`` exactly when ``t_{k+1} <= U_0 < t_k``, which has probability
   ``t_k - t_{k+1} = P(|X| = k)`` (``t_0 = 1``). If ``M < n``, ``|X| = M``.
2. **The tail.** ``M = n`` (``U_0 < t_n``) has probability ``P(|X| >= n)``, and given it,
   ``|X| - n`` is geometric, ``P(G >= g) = a^g``: the law is memoryless.
   ``n = ceil(33 ln 2 / epsilon)``, so ``t_n <= 2^-32``, when that is at most 4,096 (``epsilon``
   above about 0.0056); for smaller ``epsilon``, ``n = 1`` and almost every value takes the tail.
3. **G, digit by digit.** For a radix ``r``, ``G mod r`` and ``floor(G / r)`` are independent,
   the first truncated geometric on ``0..r-1`` (``P(>= j) = (a^j - a^r) / (1 - a^r)``), the second
   geometric with ratio ``a^r``. So ``G`` is drawn in radix 256 while the ratio ``b`` is so close
   to 1 that ``b^256 > 2^-33``, each digit the inverse CDF of its own uniform; the last digit is
   the inverse CDF over ``b, b^2, ..., b^m`` (``b^m <= 2^-33``), and its overflow
   (``U < b^m``, again memoryless) adds ``m`` and draws that digit again from a fresh uniform.

Every digit is an exact inverse CDF of a uniform that no other digit reads, so the digits are
independent with exactly their laws, and so is ``X``. The decomposition is fixed by ``epsilon``
alone (through IEEE-754 divisions, the same on every machine), so the same words always give
the same noise.

**Comparing a uniform with a threshold exactly.** ``u``, the first 63 bits of ``U``, is compared
with integer bounds ``low_k <= t_k 2^63 <= high_k`` (:class:`Thresholds`): ``u < low_k`` proves
``U < t_k`` (``U < (u + 1) 2^-63 <= low_k 2^-63``), ``u >= high_k`` proves ``U >= t_k``. The
bounds come from floating point with a proven relative error (see :class:`Thresholds`), so they
are cheap to build. When ``u`` falls between them (probability below ``2^-30`` per value for
epsilon >= 0.0056, ``2^-32`` at 0.0125), the comparison goes on with the exact binary digits of
``t_k`` (:class:`ExactThreshold`: decimal arithmetic with bounded error, the precision doubled
until both ends of the interval agree) and the next words of ``U``. It ends: every threshold is
irrational. ``e^-y`` is transcendental for rational ``y > 0`` (Lindemann), and each ``t`` is a
non-constant rational function, with rational coefficients, of such a power; were ``t``
rational, that power would be a root of a non-zero rational polynomial, so algebraic.

**Speed.** The vector path proposes ``k`` from a floating-point logarithm of ``u`` and accepts it
only if ``u`` lies in ``k``'s proven cell ``[high_{k+1}, low_k)``: two table reads and one integer
comparison per value, no loop. Anything else (a rounding that missed the cell, an uncertain
window, the tail) goes to the exact count (binary search, then the digits above). The float
arithmetic decides how fast a value is found, never which value it is.

>>> import numpy as np
>>> from wevent.core.randomness import DerivedRandomness, Phase, SecretKey
>>> x = DerivedRandomness(SecretKey.from_seed(1)).discrete_laplace(1, Phase.PUBLICATION, 0.5, 100_000)
>>> x.dtype, bool(np.all(x == np.rint(x)))
(dtype('int64'), True)
>>> round(float(x.var()) / discrete_laplace_variance(0.5), 2)
1.0

Why exact noise
---------------

**Noise is exact discrete Laplace by default; continuous Laplace is an option.** Floating-point
Laplace noise leaks through its low-order bits (Mironov 2012): `tests/core/test_noise.py` shows
that about half the outputs of `1 + noise` are doubles that `0 + noise` can never produce.
Releases and the dissimilarity are integer queries (counts and whole-number releases, so the L1
distance is an integer of sensitivity 1), so the central and personalized mechanisms add
two-sided geometric noise, P(x) ∝ exp(−ε|x|), sampled exactly (`pipeline/core/noise.py`, whose
text proves it: |X| is the inverse CDF of one uniform real over the thresholds P(|X| ≥ k), with
a fair sign bit and, beyond 2^-32, a geometric tail drawn digit by digit in radix 256; each
comparison uses 63-bit bounds proven from floating point and reads the threshold's exact binary
digits only when they cannot decide, below 2^-30 of the values). The epsilon spent is exactly
the epsilon recorded.
RTP_DMM's decayed nodes are real values: each is rounded to a power-of-two grid before integer
noise, and its budget is calibrated to that rounding (noise at most 2^-12 wider than Laplace).
`noise = "laplace-fp-unsafe"` in a stream's options, or `wevent simulate --noise laplace`,
selects the papers' sampler; the reproduction's result tables are measured with it. The noise kind is
part of a stream's parameters, so M2 refuses a changed noise for an existing stream rather than
change its noise. At epsilon 0.0125 an
exact draw costs 1.5 µs as a scalar (M1) and 26 ns per value in a 100-bin vector, 1.4x numpy's
Laplace vector draw, with the optional `compiled` extra (`pip install -e '.[compiled]'`, which
the test extra includes): numba compiles the fast path into one loop
(`pipeline/core/compiled.py`), imported on the first vector draw, never at start-up. Without it
(the stream's image, `make run`) the same draws take eleven array operations, 52 ns per value,
2.8x numpy's one C call, whatever the vector's length costs them. At d = 10,000 a value costs
5-6 ns, about 0.5x numpy's. The two paths give the same draws: the compiled candidates may round
otherwise, but a candidate only proposes a value that the proven bounds then accept or refuse.
A budget seen once costs no table (BD's publication budget differs at almost every
publication): a scalar computes the one proven cell it reads, and so does the compiled loop for
each value of a vector shorter than the table; the table is built when a longer vector, or the
numpy path, first needs it. `wevent bench central` prints these figures.

**Where a paper leaves a choice**, the default is the reading stated where the code makes it. Every
other option is named and off by default, and an option that breaks privacy says so in its name
(`--artifact-compat-nonprivate`).
"""

from __future__ import annotations

import decimal
import functools
import math
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Protocol

import numpy as np

from . import compiled
from .validation import ParameterError

__all__ = ["NOISE_KINDS", "check_noise", "WordSource", "UniformBits", "ExactThreshold", "Thresholds", "DiscreteLaplaceTable",
           "discrete_laplace_table", "two_sided_geometric", "continuous_laplace", "discrete_laplace_variance",
           "laplace_variance", "noise_variance"]

NOISE_KINDS = ("discrete", "laplace")
# a stream config names the floating-point sampler for what it is; the core calls it "laplace"
_NOISE_NAMES = {"discrete": "discrete", "laplace": "laplace", "laplace-fp-unsafe": "laplace"}

_MASK63 = np.uint64(2**63 - 1)
_MASK53 = np.uint64(2**53 - 1)
_UNIT = 2.0**-53  # the unit roundoff of a double
_TAIL_EXPONENT = 33 * 0.6931471805599453  # a table of a^1..a^m stops at m = ceil(this / y): a^m <= 2^-33
_COMPLETE = 4096  # the largest level-0 table (epsilon >= about 0.0056); below it, values take the tail
_RADIX = 256  # the radix of the tail's digits
_UNIFORMS = 253  # uniforms per value after U_0 (the word source's address space); G never needs more
_OBJECT_WEIGHT = 2**40  # digit weights from here on are summed as Python ints (beyond int64)
_NO_CELLS = np.zeros(0, np.uint64)  # the compiled fast path computes each value's cell


def check_noise(noise) -> str:
    """``"discrete"`` (exact two-sided geometric on integer queries) or ``"laplace"`` (continuous, paper parity).

    ``"laplace-fp-unsafe"``, a stream config's name for the floating-point sampler, is ``"laplace"``.
    """
    if not isinstance(noise, str) or noise not in _NOISE_NAMES:
        raise ParameterError(f"noise must be one of {', '.join(_NOISE_NAMES)}, got {noise!r}")
    return _NOISE_NAMES[noise]


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


class WordSource(Protocol):
    """Uniform 64-bit words addressed by what they are for: the same address always reads the same word.

    ``values(size)``: one word per value (the sign bit, then the first 63 bits of ``U_0``); the
    array may be a buffer that the next read overwrites. ``first(uniform, lanes)``: the first
    word of uniform ``uniform >= 1`` of each of the values ``lanes``. ``words(uniform, lane)``: the
    words of that uniform in order (for ``uniform = 0``, the words after the value's word).
    """

    def values(self, size: int) -> np.ndarray: ...

    def first(self, uniform: int, lanes: np.ndarray) -> np.ndarray: ...

    def words(self, uniform: int, lane: int) -> Iterator[int]: ...


class UniformBits:
    """A uniform real in [0, 1): its first 63 bits ``u``, then the words of ``more``, each read once, when asked."""

    __slots__ = ("u", "_read", "_more")

    def __init__(self, u: int, more: Iterator[int]) -> None:
        self.u, self._more = u, more
        self._read: list[int] = []

    def word(self, i: int) -> int:
        """Bits ``63 + 64i + 1 .. 63 + 64(i + 1)`` of the uniform."""
        while len(self._read) <= i:
            try:
                self._read.append(int(next(self._more)))
            except StopIteration:
                raise RuntimeError("the word source ran out (a tie this long has probability below 2^-30000)") from None
        return self._read[i]


def _exp_minus(z: Fraction, digits: int) -> tuple[Fraction, Fraction]:
    """An interval containing ``e^-z`` (z > 0), from a decimal evaluation at ``digits`` significant digits."""
    with decimal.localcontext() as context:
        context.prec = digits
        context.Emax, context.Emin = decimal.MAX_EMAX, decimal.MIN_EMIN
        e = (-(decimal.Decimal(z.numerator) / decimal.Decimal(z.denominator))).exp()
    # z was rounded (relative 10^(1-digits)), then exp rounded again: e^-z = e * (1 + theta),
    # |theta| <= 4 * 10^(1-digits) * (1 + z) once that is below 1/2.
    slack = Fraction(4 * (1 + z)) / 10 ** (digits - 1)
    if slack >= Fraction(1, 2):
        return Fraction(0), Fraction(1)
    if not e:  # below the smallest decimal (z above about 2e18): far below any bit a comparison reads
        return Fraction(0), Fraction(1, 2**40_000)
    return Fraction(e) * (1 - slack), Fraction(e) * (1 + slack)


class ExactThreshold:
    """The exact binary digits of one threshold ``t`` in (0, 1), ``y > 0`` rational, ``1 <= r < n``:

    * ``"two-sided"``: ``t = 2 e^(-y r) / (1 + e^-y)`` (level 0, ``P(|X| >= r)`` at ``epsilon = y``);
    * ``"power"``: ``t = e^(-y r)`` (the last digit of the tail);
    * ``"truncated"``: ``t = (e^(-y r) - e^(-y n)) / (1 - e^(-y n))`` (a radix-``n`` digit of the tail).

    ``prefix(bits) = floor(t 2^bits)``: each is increasing in ``e^(-y r)`` and decreasing in the
    other exponential, so intervals around those bound ``t``; the precision doubles until both
    ends agree (``t`` is irrational, so they eventually do).

    >>> hex(ExactThreshold("power", Fraction(1), 1).prefix(64))   # e^-1 = 0x0.5e2d58d8b3bcdf1a...
    '0x5e2d58d8b3bcdf1a'
    """

    def __init__(self, kind: str, y: Fraction, r: int, n: int = 0) -> None:
        if kind not in ("two-sided", "power", "truncated") or y <= 0 or r < 1 or (kind == "truncated" and n <= r):
            raise ValueError(f"no threshold {kind!r} at y = {y}, r = {r}, n = {n}")
        self.kind, self.y, self.r, self.n = kind, Fraction(y), r, n
        self._prefixes: dict[int, int] = {}

    def _bounds(self, digits: int) -> tuple[Fraction, Fraction]:
        low, high = _exp_minus(self.y * self.r, digits)
        if self.kind == "power":
            return low, high
        if self.kind == "two-sided":
            a_low, a_high = _exp_minus(self.y, digits)
            return 2 * low / (1 + a_high), 2 * high / (1 + a_low)
        c_low, c_high = _exp_minus(self.y * self.n, digits)
        return (low - c_high) / (1 - c_high), (high - c_low) / (1 - c_low)

    def prefix(self, bits: int) -> int:
        """``floor(t * 2^bits)``."""
        if bits not in self._prefixes:
            # decimal precision is relative: ``bits`` bits are 0.3 bits digits, plus the magnitude of the exponents
            largest = self.y * max(self.r, self.n)
            digits = 30 + math.ceil(0.302 * bits) + len(str(math.ceil(largest))) + len(str(self.y.denominator))
            while True:
                low, high = self._bounds(digits)
                first, last = math.floor(low * 2**bits), math.floor(high * 2**bits)
                if first == last:
                    self._prefixes[bits] = first
                    break
                digits *= 2
        return self._prefixes[bits]

    def above(self, uniform: UniformBits) -> bool:
        """Is the uniform real below ``t``? (Its bits and ``t``'s, compared until they differ.)"""
        bits, prefix, i = 63, uniform.u, 0
        while True:
            exact = self.prefix(bits)
            if prefix != exact:
                return prefix < exact
            prefix, bits, i = (prefix << 64) | uniform.word(i), bits + 64, i + 1


class Thresholds:
    """A table ``t_1 > t_2 > ... > t_m`` in (0, 1): proven 63-bit bounds, and the exact inverse CDF.

    ``approx`` holds doubles ``t^_k`` with ``|t^_k / t_k - 1| <= error`` (a bound the caller
    proves; :func:`_powers` says how). Then ``low_k = floor(t^_k 2^63 (1 - 2 error))`` and
    ``high_k = ceil(t^_k 2^63 (1 + 2 error))``, each product rounded once more, satisfy
    ``low_k <= t_k 2^63 <= high_k`` whenever ``error >= 8u`` (``u = 2^-53``): ``(1 + e)(1 - 2e)
    (1 + u)^2 <= 1``. A ``t^_k`` that underflows says ``t_k 2^63 < 1``, where ``low = 0`` and
    ``high = 1`` hold. ``exact(k)`` gives threshold ``k``'s :class:`ExactThreshold` for a tie.

    The count ``#{k : U < t_k}`` is ``k`` for sure when ``u`` is in the cell
    ``[high_{k+1}, low_k)`` (:attr:`cells`; ``high_{m+1} = 0``, ``low_0 = 2^63``).
    ``candidate = (gamma, shift, alpha)`` proposes ``trunc(alpha log(u gamma + shift))``, the
    count in real arithmetic; only a value whose proposal misses its cell is searched for.
    """

    def __init__(self, approx: np.ndarray, error: float, exact: Callable[[int], ExactThreshold],
                 candidate: tuple[float, float, float]) -> None:
        margin = 2.0 * max(error, 8 * _UNIT)
        self.low = (approx * (2.0**63 * (1.0 - margin))).astype(np.uint64)  # floor: the values are >= 0
        self.high = np.ceil(approx * (2.0**63 * (1.0 + margin))).astype(np.uint64)
        if approx.size and approx[-1] * 2.0**63 < 1.0:  # underflow
            np.maximum(self.high, np.uint64(1), out=self.high)
        self.size = approx.size
        self.candidate = candidate
        self._make = exact
        self._exact: dict[int, ExactThreshold] = {}

    @functools.cached_property
    def cells(self) -> tuple[np.ndarray, np.ndarray]:
        """``(start, width)``: count ``k`` is certain for ``u`` in ``[start_k, start_k + width_k)``."""
        start, end = np.zeros(self.size + 1, np.uint64), np.zeros(self.size + 1, np.uint64)
        start[:-1], end[0], end[1:] = self.high, 2**63, self.low
        return start, np.where(end > start, end - start, np.uint64(0))

    @functools.cached_property
    def _ascending(self) -> tuple[np.ndarray, np.ndarray]:
        return self.low[::-1].copy(), self.high[::-1].copy()

    def exact(self, k: int) -> ExactThreshold:
        if k not in self._exact:
            self._exact[k] = self._make(k)
        return self._exact[k]

    def count(self, u: np.ndarray, uniform: Callable[[int], UniformBits]) -> np.ndarray:
        """``#{k : U_i < t_k}`` for each uniform ``U_i`` whose first 63 bits are ``u[i]`` (``uniform(i)``: all its bits)."""
        gamma, shift, alpha = self.candidate
        proposal = np.multiply(u, gamma)
        if shift:
            proposal += shift
        np.log(proposal, out=proposal)
        proposal *= alpha
        k = np.minimum(proposal, self.size).astype(np.int64)
        start, width = self.cells
        missed = np.flatnonzero((u - start[k]) >= width[k])
        if missed.size:
            k[missed] = self.search(u[missed], lambda i: uniform(int(missed[i])))
        return k

    def search(self, u: np.ndarray, uniform: Callable[[int], UniformBits]) -> np.ndarray:
        """:meth:`count` by binary search in the bounds, then the exact digits where they cannot tell."""
        low_up, high_up = self._ascending
        lower = self.size - np.searchsorted(low_up, u, side="right")  # t_k proven above U_i
        upper = self.size - np.searchsorted(high_up, u, side="right")  # t_k possibly above U_i
        for i in np.flatnonzero(lower != upper).tolist():  # below 2^-30 per value: exact digits
            bits, k = uniform(i), int(lower[i])
            while k < upper[i] and self.exact(k + 1).above(bits):
                k += 1
            lower[i] = k
        return lower


@functools.lru_cache(maxsize=64)
def _exp_context(digits: int) -> decimal.Context:
    return decimal.Context(prec=digits, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


def _certain_float_exp(y: float | Fraction) -> float:
    """``e^-y`` as a double within ``2u`` of the truth: ``y`` to 20 digits more than its integer part
    (a float converts to decimal exactly, a fraction is divided), a correctly rounded decimal ``exp``
    (relative error below ``(1 + y) 10^-19``, a thousandth of ``u``), then the correctly rounded
    conversion. (Far below the smallest double, the result is 0.)"""
    context = _exp_context(20 + len(str(math.ceil(y))))
    value = (decimal.Decimal(y) if isinstance(y, float)
             else context.divide(decimal.Decimal(y.numerator), decimal.Decimal(y.denominator)))
    return float(context.exp(context.minus(value)))


def _powers(b: float, count: int) -> tuple[np.ndarray, float]:
    """``b^1 .. b^count`` by a running product, and a bound on their relative errors.

    With ``|b^ / b - 1| <= 2u`` and one rounding per product, ``b^k`` is within
    ``(1 + 2u)^k (1 + u)^(k-1) - 1 <= 3.02 k u`` (for ``k u < 10^-3``) of the truth.
    """
    return np.cumprod(np.full(count, b)), 3.02 * _UNIT * count


class _Level:
    """One digit of the tail: the inverse CDF over ``thresholds``; ``radix`` its weight step. ``overflows``
    (the last digit): a count equal to ``radix`` means ``U < b^radix``, so the digit is drawn again."""

    def __init__(self, y: Fraction, radix: int, overflows: bool) -> None:
        self.radix, self.overflows = radix, overflows
        b = _certain_float_exp(y)
        powers, error = _powers(b, radix)
        alpha = -1.0 / float(y)  # U < b^r  <=>  r < log(U) / -y
        if overflows:
            self.thresholds = Thresholds(powers, error, functools.partial(ExactThreshold, "power", y),
                                         (2.0**-63, 0.0, alpha))
        else:
            # (b^r - b^n) / (1 - b^n) = sum_{j=r}^{n-1} b^j / sum_{j=0}^{n-1} b^j: sums of positive terms,
            # no cancellation; m sums add 1.02 m u, the quotient 2u more
            suffix = np.cumsum(powers[radix - 2::-1])[::-1]
            approx = suffix / (1.0 + suffix[0])
            error = 2 * (3.02 * radix + 1.02 * radix + 2) * _UNIT
            last = float(powers[-1])  # U < s_r  <=>  r < log(U (1 - b^n) + b^n) / -y
            self.thresholds = Thresholds(approx, error, functools.partial(_truncated, y, radix),
                                         (2.0**-63 * (1.0 - last), last, alpha))


def _truncated(y: Fraction, radix: int, r: int) -> ExactThreshold:
    return ExactThreshold("truncated", y, r, radix)


class DiscreteLaplaceTable:
    """Everything :func:`two_sided_geometric` needs at one ``epsilon``: level 0, the fast paths' cells, the tail.

    ``level0`` holds ``t_1 .. t_n``. When ``n`` reaches ``t_n <= 2^-32`` (``complete``), the cells
    give, for each candidate ``|X| = k``, the proven range of ``u``: ``[high_{k+1}, low_k)``, empty
    from ``k = n`` on. The vector path reads them from :attr:`cells` (rows ``(start, width)``, laid
    out as ``0..K, K..1`` so that a signed candidate indexes them directly); the scalar path
    computes the cells it needs (:meth:`cell`), so a budget seen once costs no table. Level
    0, the cells and the tail's digits (``levels()``) are built on first use.
    """

    def __init__(self, epsilon: float) -> None:
        self.epsilon = epsilon
        self.complete = _TAIL_EXPONENT / epsilon <= _COMPLETE
        self.size = math.ceil(_TAIL_EXPONENT / epsilon) if self.complete else 1  # t_n <= 2 * 2^-33
        self.a = _certain_float_exp(epsilon)
        # c = 2 / (1 + a) adds 3.01u (a's error halved, the sum, the quotient), the product u more;
        # U < c a^k  <=>  k < log(U / c) / -epsilon, and with u = U 2^63 the count is
        # trunc(alpha log(u gamma)) = trunc(alpha log(u) + beta)
        self.alpha = -1.0 / epsilon
        self.gamma = 2.0**-63 * (1.0 + self.a) / 2.0
        self.beta = self.alpha * math.log(self.gamma) if self.complete else math.nan  # unused by the tail
        self._levels: tuple[_Level, ...] | None = None
        self._cells: dict[int, tuple[int, int]] = {}

    @functools.cached_property
    def exact(self) -> Fraction:
        return Fraction(self.epsilon)

    @functools.cached_property
    def level0(self) -> Thresholds:
        powers, error = _powers(self.a, self.size)
        return Thresholds(powers * (2.0 / (1.0 + self.a)), error + 5 * _UNIT,
                          functools.partial(ExactThreshold, "two-sided", self.exact), (self.gamma, 0.0, self.alpha))

    @property
    def has_cells(self) -> bool:
        """Are :attr:`cells` built?"""
        return "cells" in self.__dict__

    @functools.cached_property
    def cells(self) -> tuple[np.ndarray, np.ndarray]:
        """``(start, width)`` of every signed candidate's cell (complete tables only)."""
        # the fast path's proposal is at most beta for u >= 1: its cells reach that far (empty from
        # the tail on), mirrored for negative proposals
        size, top = self.size, max(self.size, int(self.beta) + 2)
        first, extent = self.level0.cells
        start, width = np.zeros(2 * top + 1, np.uint64), np.zeros(2 * top + 1, np.uint64)
        start[:size], width[:size] = first[:size], extent[:size]  # the tail's cell stays empty
        start[-1:-size:-1], width[-1:-size:-1] = first[1:size], extent[1:size]
        return start, width

    def cell(self, k: int) -> tuple[int, int]:
        """``[high_{k+1}, low_k)`` of ``|X| = k`` (``0 <= k < n``, a complete table), computed alone and
        kept: the bounds of ``t_{k+1}`` and ``t_k`` as :class:`Thresholds` proves them
        (:func:`~wevent.core.compiled.cell_bounds`, which the compiled vector path computes too)."""
        cell = self._cells.get(k)
        if cell is None:
            low, high = compiled.cell_bounds(self.a, k)
            cell = self._cells[k] = math.ceil(low), int(high) if k else 2**63
        return cell

    def levels(self) -> tuple[_Level, ...]:
        """The tail's digits: radix 256 while the ratio's 256th power exceeds 2^-33, then the last digit."""
        if self._levels is None:
            levels, y = [], self.exact
            while _TAIL_EXPONENT / float(y) > _RADIX:
                levels.append(_Level(y, _RADIX, overflows=False))
                y *= _RADIX
            levels.append(_Level(y, math.ceil(_TAIL_EXPONENT / float(y)), overflows=True))
            self._levels = tuple(levels)
        return self._levels


@functools.lru_cache(maxsize=256)
def discrete_laplace_table(epsilon: float) -> DiscreteLaplaceTable:
    """The (cached) table of :func:`two_sided_geometric` at per-unit ``epsilon`` > 0.

    BD's budget changes at every publication, so a table is cheap to build (tens of
    microseconds: one decimal exponential, then array arithmetic) and the last 256 are kept.
    """
    if not (isinstance(epsilon, float) and math.isfinite(epsilon) and epsilon > 0
            and math.isfinite(_TAIL_EXPONENT / epsilon)):
        raise ParameterError(f"discrete noise needs a finite epsilon >= 1.3e-307, got {epsilon!r}")
    return DiscreteLaplaceTable(epsilon)


def two_sided_geometric(source: WordSource, epsilon: float, size: int | None = None):
    """Exact draws of ``X`` with ``P(X = x) ∝ exp(-epsilon |x|)`` from ``source``'s words (module docstring).

    ``size=None`` gives one Python int; otherwise an int64 array (of Python ints, dtype object,
    for epsilon below about 2^-35, where the tail's digits weigh 2^40 and more). Value ``i`` reads word ``i``
    of ``source.values`` and, only in its tail or on a tie, its own uniforms: the same words always
    give the same noise, and the scalar is value 0 of the vector.
    """
    table = discrete_laplace_table(float(epsilon))
    if size is None or size == 1:  # numpy's in-place arithmetic is slowest on one element: value 0 in Python
        value = _scalar(table, source)
        return value if size is None else np.array([value], np.int64 if abs(value) < 2**62 else object)
    words = source.values(size)
    if not table.complete:
        return _settle(table, source, words, words & _MASK63, np.zeros(size, np.int64), np.arange(size))
    kernel = compiled.discrete_fast_path()
    if kernel is not None:  # the same fast path as one compiled loop (numba, optional)
        # a budget seen once (BD's) builds no cells for a short vector: the loop computes each value's own
        start, width = table.cells if table.has_cells or size >= table.size else (_NO_CELLS, _NO_CELLS)
        x, missed = np.empty(size, np.int64), np.empty(size, np.bool_)
        if kernel(words, table.alpha, table.beta, start, width, table.a, table.size, x, missed):
            return _settle(table, source, words, words & _MASK63, x, np.flatnonzero(missed))
        return x
    u = words & _MASK63
    candidate = np.log(u)
    candidate *= table.alpha
    candidate += table.beta
    np.copysign(candidate, words.view(np.float64), out=candidate)  # the sign bit of a double is the word's top bit
    x = candidate.astype(np.int64)
    start, width = table.cells
    try:
        missed = (u - start[x]) >= width[x]  # u outside the proven cell of |x| (wraps when below it)
    except IndexError:  # a candidate beyond the table (u = 0): every value takes the exact count
        return _settle(table, source, words, u, x, np.arange(size))
    if np.count_nonzero(missed):
        return _settle(table, source, words, u, x, np.flatnonzero(missed))
    return x


def _scalar(table: DiscreteLaplaceTable, source: WordSource) -> int:
    """Value 0 of :func:`two_sided_geometric`'s vector, in Python floats and ints (M1's hot path)."""
    word = int(source.values(1)[0])
    u = word & (2**63 - 1)
    if table.complete and u:
        k = int(table.alpha * math.log(u) + table.beta)
        if k < table.size:
            start, end = table.cell(k)
            if start <= u < end:
                return -k if word >> 63 else k
    words = np.array([word], np.uint64)
    return int(_settle(table, source, words, words & _MASK63, np.zeros(1, np.int64), np.zeros(1, np.intp))[0])


def _settle(table: DiscreteLaplaceTable, source: WordSource, words: np.ndarray, u: np.ndarray, x: np.ndarray,
            lanes: np.ndarray) -> np.ndarray:
    """The exact values of ``lanes`` (level 0's exact count, then the tail), written into ``x``."""
    negative = (words[lanes] >> np.uint64(63)).astype(bool)
    first = u[lanes]
    bits = _uniforms(source, 0, lanes, first)
    magnitude = table.level0.search(first, bits) if table.complete else table.level0.count(first, bits)
    tail = np.flatnonzero(magnitude == table.level0.size)
    if tail.size:
        extra = _geometric(table, source, lanes[tail])
        if extra.dtype == object:
            magnitude, x = magnitude.astype(object), x.astype(object)
        magnitude[tail] += extra
    x[lanes] = np.where(negative, -magnitude, magnitude)
    return x


def _geometric(table: DiscreteLaplaceTable, source: WordSource, lanes: np.ndarray) -> np.ndarray:
    """``G`` (``P(G >= g) = a^g``) for each value in ``lanes``, from its uniforms 1, 2, ... (module docstring, step 3)."""
    g = np.zeros(lanes.size, np.int64)
    weight, uniform = 1, 1
    for level in table.levels():
        if weight >= _OBJECT_WEIGHT and g.dtype != object:
            g = g.astype(object)
        active = np.arange(lanes.size)
        while active.size:
            if uniform > _UNIFORMS:
                raise RuntimeError("the tail needs more uniforms than a word source addresses")
            first = source.first(uniform, lanes[active]) & _MASK63
            digit = level.thresholds.count(first, _uniforms(source, uniform, lanes[active], first))
            g[active] += digit * weight if g.dtype != object else digit.astype(object) * weight
            uniform += 1
            if not level.overflows:
                break
            active = active[digit == level.radix]
        weight *= level.radix
    return g


def _uniforms(source: WordSource, uniform: int, lanes: np.ndarray, first: np.ndarray) -> Callable[[int], UniformBits]:
    """``bits(i)``: uniform ``uniform`` of value ``lanes[i]``, whose first 63 bits are ``first[i]``."""
    def bits(i: int) -> UniformBits:
        more = source.words(uniform, int(lanes[i]))
        if uniform:
            next(more)  # the uniform's first word is the one its 63 bits came from
        return UniformBits(int(first[i]), more)
    return bits


def continuous_laplace(words: np.ndarray, scale: float) -> np.ndarray:
    """Continuous ``Lap(scale)`` noise in floating point from 64-bit words: the papers' sampler.

    The sign is the top bit; the magnitude ``-scale * log(V)``, with ``V = (m + 1/2) 2^-53`` from
    the low 53 bits, is exponential. Its low-order bits leak the value it is added to (module
    docstring): a stream must call it ``laplace-fp-unsafe``.
    """
    magnitude = np.add(words & _MASK53, 0.5)
    magnitude *= _UNIT
    np.log(magnitude, out=magnitude)
    magnitude *= -scale
    return np.copysign(magnitude, words.view(np.float64), out=magnitude)  # the sign bit of a double is the top bit
