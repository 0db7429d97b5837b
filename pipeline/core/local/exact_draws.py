"""Exact draws for the devices: every probability a report depends on is a rational or a double,
and every coin compares whole uniform words with it in integer arithmetic.

A floating-point draw can leak the input through the set of values it can produce, or through
a probability that rounding moved (Mironov, "On significance of the least significant bits for
differential privacy", CCS 2012). The randomisers of this package avoid both: their outputs are
chosen from a fixed finite set by uniform integers, and the irrational ``e^eps`` enters only
through rationals ``R/S <= e^eps`` (:func:`exp_ratio`, :func:`exp_share`), so every likelihood
ratio is at most ``R/S`` exactly and no device spends more than its budget.

* :func:`uniform_below`: uniform integers in ``[0, bound)`` from 64-bit words (a word at or above
  the largest multiple of ``bound`` is replaced by the next word of the source, so none is favoured);
* :func:`coins_below`: Bernoulli(``p``) for doubles ``p`` in ``[0, 1]``: is the uniform real the
  words spell below ``p``? The first word's first 53 bits decide unless they are the first 53
  bits of ``p`` (probability ``2^-53``); then the next bits are compared with ``p``'s next bits;
* :func:`exp_share`: a dyadic probability ``K / 2^64`` of odds ``K / (2^64 - K) <= e^eps``: a
  coin of it is one comparison of a word with ``K`` (or of more bits, for ``K / 2^72``);
* :func:`exp_ratio`: the integers ``R``, ``S = 2^s`` of the ratio, from a lower bound of ``e^eps``
  computed in decimal arithmetic (the same on every machine), as large as the draws' range allows.

Draws read their words from a source, ``words(count)``: a device's
:meth:`~wevent.core.randomness.KeyStream.words`, or a simulation's ``rng.bit_generator.random_raw``.
The first words of a batch are read at once; the rare replacements and tie-breaks read on from
the same source in lane order, so the same source state always gives the same draws.

>>> from wevent.core.randomness import KeyStream
>>> stream = KeyStream.from_seed(0)
>>> draws = uniform_below(stream.words(5), 6, stream.words)
>>> bool(((0 <= draws) & (draws < 6)).all())
True
>>> coins_below(np.array([0, 2**63, 2**64 - 1], dtype=np.uint64), np.array([0.5, 0.5, 1.0]), stream.words).tolist()
[True, False, True]
>>> kept, other = exp_ratio(1.0, 1, 1)
>>> kept + other <= DRAW_RANGE, Fraction(kept, other) <= exp_lower(Fraction(1)), float(Fraction(kept, other)) == math.e
(True, True, True)
"""

from __future__ import annotations

import decimal
import functools
import math
from fractions import Fraction
from typing import Callable

import numpy as np

__all__ = ["DRAW_RANGE", "WordSource", "exp_lower", "exp_ratio", "exp_share", "uniform_below", "coins_below"]

DRAW_RANGE = 2**56
"""Every uniform integer is drawn below at most this: a word is replaced with probability < 2^-8."""

WordSource = Callable[[int], np.ndarray]  # the next ``count`` uniform 64-bit words, as uint64
_WORD = 64
_MANTISSA = 53
_LARGEST = np.uint64(2**64 - 1)
_DIGITS = 60  # decimal digits of the lower bounds: a relative error far below what any ratio keeps
_EXPONENT_CAP = 64  # e^64 > 2^92: a larger exponent changes no ratio of terms below 2^56 and no 72-bit share


def exp_lower(y: Fraction) -> Fraction:
    """A lower bound of ``e^y`` within a relative ``10^-55`` of it, for rational ``|y| <= 128``.

    ``decimal`` rounds ``y`` and then ``exp`` correctly to 60 digits: ``e^y`` is within a factor
    ``1 +- 4 (1 + |y|) 10^-59`` of the result, and the bound takes that factor off. It is the
    same number on every machine (no libm is involved).

    >>> e_low, e_high = Fraction("2.718281828459045235360287471352662497757"), Fraction("2.718281828459045235360287471352662497758")
    >>> e_low < exp_lower(Fraction(1)) < e_high  # e = 2.71828182845904523536028747135266249775724709...
    True
    """
    if abs(y) > 2 * _EXPONENT_CAP:
        raise ValueError(f"exp_lower takes |y| <= {2 * _EXPONENT_CAP}, got {y}")
    with decimal.localcontext() as context:
        context.prec = _DIGITS
        value = (decimal.Decimal(y.numerator) / decimal.Decimal(y.denominator)).exp()
    return Fraction(value) * (1 - Fraction(4 * (1 + abs(y))) / 10 ** (_DIGITS - 1))


@functools.lru_cache(maxsize=4096)
def exp_ratio(epsilon: float, kept: int, others: int, limit: int = DRAW_RANGE) -> tuple[int, int]:
    """``(R, S)``, ``R/S <= e^epsilon``, for a draw of weight ``R`` on ``kept`` outcomes and ``S``
    on ``others``: ``S = 2^s`` with the largest ``s`` such that ``kept R + others S <= limit``,
    ``R = floor(S * exp_lower(epsilon))``.

    The ratio is ``e^epsilon`` to about ``2^-s``; a randomiser drawing with these weights is
    ``ln(R/S)``-LDP, never more than ``epsilon``. When even ``S = 1`` does not fit (``e^epsilon``
    near ``limit / kept``), ``R`` is the largest weight that fits: the ratio is then capped below
    ``e^epsilon``. ``R == S`` means ``epsilon`` is too small for ``limit``: the draw says nothing.

    >>> exp_ratio(50.0, 1, 1)  # capped: ln(R/S) is about 38.8, below the 50 asked
    (72057594037927935, 1)
    """
    if kept < 1 or others < 1 or kept + others > limit:
        raise ValueError(f"a ratio needs kept, others >= 1 and kept + others <= {limit}, got {kept}, {others}")
    lower = exp_lower(Fraction(min(epsilon, _EXPONENT_CAP)))
    for shift in range(limit.bit_length(), -1, -1):
        other = 1 << shift
        weight = math.floor(lower * other)
        if kept * weight + others * other <= limit:
            return weight, other
    return (limit - others) // kept, 1  # below floor(e^epsilon): the cap


@functools.lru_cache(maxsize=4096)
def exp_share(epsilon: float, bits: int = _WORD) -> int:
    """``K = floor(2^bits l / (1 + l))``, ``l = exp_lower(epsilon)``: the coin "a ``bits``-bit uniform
    is below ``K``" has probability ``K / 2^bits`` and odds ``K / (2^bits - K) <= e^epsilon``, as
    close as ``bits`` bits allow.

    >>> share = exp_share(1.0); Fraction(share, 2**64 - share) <= exp_lower(Fraction(1)), share / 2**64 == math.e / (1 + math.e)
    (True, True)
    """
    lower = exp_lower(Fraction(min(epsilon, _EXPONENT_CAP)))
    return math.floor(2**bits * lower / (1 + lower))


def uniform_below(words: np.ndarray, bound, more: WordSource) -> np.ndarray:
    """Uniform integers in ``[0, bound)`` (int64), one per word of ``words``; ``bound`` is an int or
    an array of one bound per word, each in ``[1, 2^63)``.

    ``word mod bound`` is uniform when the word lies below the largest multiple of ``bound`` that
    fits in 64 bits; a word at or above it (probability < ``bound / 2^64``) is replaced by the next
    word of ``more``, lane by lane in order, until every lane has an accepted word.
    """
    bounds = np.asarray(bound, dtype=np.uint64)
    highest = _LARGEST - (_LARGEST % bounds + np.uint64(1)) % bounds  # the last word of the whole multiples
    draws = words % bounds
    redraw = np.flatnonzero(words > highest)
    while redraw.size:
        fresh = more(redraw.size)
        lane_bounds = bounds if bounds.ndim == 0 else bounds[redraw]
        draws[redraw] = fresh % lane_bounds
        redraw = redraw[fresh > (highest if highest.ndim == 0 else highest[redraw])]
    return draws.astype(np.int64)


def coins_below(words: np.ndarray, p: np.ndarray, more: WordSource) -> np.ndarray:
    """Exact Bernoulli(``p``) coins for doubles ``p`` in ``[0, 1]``, one per word.

    The coin is "the uniform real ``0.w1 w2 ...`` (words in binary) is below ``p``". ``p 2^53`` is
    exact in floating point and so is the word's first 53 bits as an integer ``U``: the coin is 1
    when ``U + 1 <= p 2^53``, 0 when ``U >= p 2^53``, and otherwise (``U`` is the integer part of
    ``p 2^53``, probability ``2^-53``) the word's last 11 bits, then the next words of ``more``,
    are compared with the next bits of ``p``.
    """
    scaled = np.asarray(p, dtype=np.float64) * 2.0**_MANTISSA
    top = (words >> np.uint64(_WORD - _MANTISSA)).view(np.int64).astype(np.float64)
    coins = top + 1.0 <= scaled
    for lane in np.flatnonzero((top < scaled) & ~coins).tolist():
        low = int(words[lane]) & ((1 << (_WORD - _MANTISSA)) - 1)
        coins[lane] = _coin_after_tie(float(scaled[lane] - top[lane]), low, _WORD - _MANTISSA, more)
    return coins


def _coin_after_tie(rest: float, chunk: int, bits: int, more: WordSource) -> bool:
    """Is the uniform real spelled by ``chunk`` (``bits`` bits) and the next words below ``rest``, a
    double in ``(0, 1)``?"""
    while True:
        scaled = math.ldexp(rest, bits)
        whole = math.floor(scaled)
        if chunk != whole:
            return chunk < whole
        rest = scaled - whole  # exact: a double has at most 53 significant bits, so this ends
        if rest == 0.0:
            return False  # every bit of p tied: the uniform is at least p
        chunk, bits = int(more(1)[0]), _WORD
