"""Exact arithmetic on budgets: every float is an exact rational, and budgets are divided and summed as such.

A float is ``m 2^e`` for integers ``m`` and ``e``, so budgets can be handled without any rounding
that could hide an overspend. Two rules make the accounting exact:

* **Budgets are divided downwards, onto a grid.** A mechanism whose window budget is ``epsilon``
  records only multiples of :func:`grid` (epsilon), the unit in the last place of epsilon:
  :func:`divide` and :func:`share` return the largest multiple of that unit that the exact
  quotient or product does not exceed. Every multiple of the unit up to epsilon is a float, so
  the budgets of one slot, or of any window that stays within epsilon, add up exactly in floating
  point, in whatever order they are added.
* **Ledgers compare exact sums.** :func:`as_integers` writes floats as integers in units of a
  common power of two, whose sums (:func:`window_integer_sums`) are exact however many terms they
  have; :func:`sum_up` sums a few floats exactly with :func:`math.fsum`. :func:`round_up` and
  :func:`integers_up` turn an exact sum into the smallest float not below it: a spend rounded up
  exceeds a float bound exactly when the spend itself does, so a rounded-up figure shown to a
  person or a monitoring rule never hides an overspend.

Examples
--------
Three slots of ``50 / 3`` rounded to nearest spend ``50 + 3.6e-15``; rounded down they do not:

>>> 3 * Fraction(50 / 3) > 50, 3 * Fraction(divide(50.0, 3)) <= 50
(True, True)
>>> sum_up([0.1, 0.2]), 0.1 + 0.2 == sum_up([0.1, 0.2])  # the exact sum is 0.3000000000000000166...
(0.30000000000000004, True)
>>> round_up(Fraction(1, 3)) > Fraction(1, 3) > round_down(Fraction(1, 3))
True
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

__all__ = ["grid", "divide", "share", "round_down", "round_up", "sum_up", "unit_exponent", "as_integers",
           "window_integer_sums", "integers_up"]

_MANTISSA = 53  # bits of a float's significand
_SMALLEST = -1074  # the exponent of the smallest subnormal float


def grid(epsilon):
    """The unit every budget carved out of ``epsilon`` is a multiple of: the spacing of floats at epsilon.

    >>> grid(1.0) == 2.0**-52
    True
    """
    if isinstance(epsilon, float) and 0 <= epsilon < math.inf:  # one budget: a mechanism's hot path
        return math.ulp(epsilon)  # what np.spacing gives for a finite x >= 0
    return _plain(np.spacing(np.asarray(epsilon, dtype=float)))


def divide(total, parts, unit=None):
    """The largest multiple ``q`` of ``unit`` (default ``grid(total)``) with ``parts * q <= total``, exactly.

    ``parts`` are whole numbers (a window's slots, a count of publications); arrays divide element
    by element. The float quotient is within half a unit of the exact one, so the multiple below
    it is either the answer or one unit too many, which the product (exact for a multiple of the
    unit at most ``total``, and above ``total`` when the multiple is) tells apart.

    >>> divide(1.0, 4), divide(50.0, 3) < 50 / 3, divide(np.array([1.0, 3.0]), np.array([2, 3])).tolist()
    (0.25, True, [0.5, 1.0])
    """
    if isinstance(total, float) and isinstance(parts, int) and 0 <= total < math.inf and 0 < parts < 2**53 and (
            unit is None or isinstance(unit, float)):  # the same operations on one budget, in Python floats
        step = math.ulp(total) if unit is None else unit
        units = total / parts / step
        if units < math.inf:
            quotient = math.floor(units) * step
            return quotient - step if quotient * parts > total else quotient
    total = np.asarray(total, dtype=float)
    parts = np.asarray(parts, dtype=float)
    unit = grid(total) if unit is None else np.asarray(unit, dtype=float)
    quotient = np.floor(total / parts / unit) * unit
    return _plain(np.where(quotient * parts > total, quotient - unit, quotient))


def _plain(values: np.ndarray):
    """A Python float for a 0-d result, the array otherwise."""
    return float(values) if values.ndim == 0 else values


def share(total: float, fraction: float | Fraction, unit: float | None = None) -> float:
    """The largest multiple of ``unit`` (default ``grid(total)``) at most ``fraction * total``, exactly.

    >>> share(1.0, 0.1) <= Fraction(1.0) * Fraction(0.1) < share(1.0, 0.1) + grid(1.0)
    True
    """
    step = Fraction(float(grid(total) if unit is None else unit))
    return float(math.floor(Fraction(total) * Fraction(fraction) / step) * step)


def round_down(value: Fraction) -> float:
    """The largest float at most ``value``."""
    nearest = float(value)
    return math.nextafter(nearest, -math.inf) if Fraction(nearest) > value else nearest


def round_up(value: Fraction) -> float:
    """The smallest float at least ``value``."""
    nearest = float(value)
    return math.nextafter(nearest, math.inf) if Fraction(nearest) < value else nearest


def sum_up(values) -> float:
    """The smallest float at least the exact sum of ``values`` (floats), in two passes of :func:`math.fsum`.

    ``fsum`` rounds the exact sum correctly, so the sign of ``fsum(values + [-s])`` is the sign of
    the exact remainder: a non-zero one is a multiple of the smallest float and does not round to 0.
    """
    values = [float(v) for v in values]
    total = math.fsum(values)
    return math.nextafter(total, math.inf) if math.fsum([*values, -total]) > 0 else total


def _mantissas(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integers ``m`` and ``e`` with ``values == m * 2**e`` (``m`` zero for zeros)."""
    fraction, exponent = np.frexp(values)
    return (fraction * 2.0**_MANTISSA).astype(np.int64), exponent.astype(np.int64) - _MANTISSA


def unit_exponent(*arrays) -> int:
    """The largest ``E`` such that every finite value of ``arrays`` is a whole multiple of ``2**E``."""
    smallest = None
    for values in arrays:
        values = np.ravel(np.asarray(values, dtype=float))
        mantissa, exponent = _mantissas(values[np.isfinite(values)])
        mantissa, exponent = mantissa[mantissa != 0], exponent[mantissa != 0]
        if mantissa.size:
            low = mantissa & -mantissa  # the lowest set bit: the value's own smallest power of two
            lowest = int((exponent + np.frexp(low.astype(float))[1] - 1).min())
            smallest = lowest if smallest is None else min(smallest, lowest)
    return 0 if smallest is None else smallest


def as_integers(values, exponent: int) -> np.ndarray:
    """``values`` (finite floats, multiples of ``2**exponent``) as exact Python integers in units of ``2**exponent``."""
    values = np.asarray(values, dtype=float)
    mantissa, own = _mantissas(values)
    shift = own - exponent
    integers = np.empty(values.shape, dtype=object)
    up, down = shift >= 0, shift < 0  # a negative shift only drops zero bits (the exponent divides every value)
    integers[up] = mantissa[up].astype(object) << shift[up].astype(object)
    integers[down] = mantissa[down].astype(object) >> (-shift[down]).astype(object)
    return integers


def window_integer_sums(integers: np.ndarray, window: int) -> np.ndarray:
    """``out[i] = sum(integers[max(0, i-w+1) : i+1])`` along the first axis, exactly (integers do not round).

    >>> window_integer_sums(np.array([1, 2, 3, 4], dtype=object), 2).tolist()
    [1, 3, 5, 7]
    """
    running = np.cumsum(integers, axis=0)
    before = np.zeros(integers.shape, dtype=object)
    before[window:] = running[:-window] if window < len(integers) else before[window:]
    return running - before


def _integer_up(number: int, exponent: int) -> float:
    """The smallest float at least ``number * 2**exponent`` (``number >= 0``; inf beyond the floats)."""
    shift = max(number.bit_length() - _MANTISSA, _SMALLEST - exponent)
    if shift > 0:
        number, exponent = -(-number >> shift), exponent + shift  # divided by 2**shift, rounded up
    try:
        return math.ldexp(float(number), exponent)
    except OverflowError:
        return math.inf


_integers_up = np.frompyfunc(_integer_up, 2, 1)


def integers_up(integers: np.ndarray, exponent: int) -> np.ndarray:
    """Every one of ``integers`` (in units of ``2**exponent``) as the smallest float at least its value.

    When every integer lies in ``0 .. 2^53 - 1`` and the unit is not below the smallest subnormal,
    every value is a float exactly (a multiple of ``2^-1074`` with at most 53 significant bits), so
    one vector conversion and ``ldexp`` give them; otherwise each is rounded up on its own.
    """
    array = np.asarray(integers)
    if array.size and exponent >= _SMALLEST:
        floats = array.astype(float)  # exact below 2^53; a larger integer converts to 2^53 or more
        if floats.min() >= 0 and floats.max() < 2.0**_MANTISSA:
            with np.errstate(over="ignore"):  # beyond the floats: inf, as one at a time gives
                return np.ldexp(floats, exponent).reshape(np.shape(integers))
    return np.asarray(_integers_up(integers, exponent), dtype=float).reshape(np.shape(integers))
