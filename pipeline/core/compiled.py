"""Compiled inner loops, where numpy's cost per call dominates: optional, with numba.

A short vector of exact discrete noise costs eleven numpy calls of about 0.4 us each, whatever
its length: at 100 values, 2.8 times numpy's own Laplace draw. :func:`discrete_fast_path` is the
same fast path as one loop compiled by numba (``pip install 'wevent[compiled]'``): each value's
candidate count from its word, accepted only inside the proven cell, exactly as
:func:`~wevent.core.noise.two_sided_geometric` does it in numpy. The candidate's floating-point
logarithm may round otherwise than numpy's, but a candidate decides only whether a value is found
here or by the exact count, never which value it is, so both paths give the same draws (the tests
compare them).

:func:`whole_distance` is M1's L1 distance of whole numbers as one loop (numpy's takes three
calls and two temporaries). Its sum runs in another order than numpy's pairwise one, and gives
the same value: every term is a whole number, so every partial sum below ``2^53`` is exact, and
once one reaches ``2^53`` all the later ones stay there (the terms are not negative, rounding is
monotone), where M1's cap at ``2^52`` makes every order agree.

The noise loop reads each cell from the table of its budget, or, for a budget whose table has
no cells yet and a vector shorter than that table, computes the value's own cell with
:func:`cell_bounds` (the formula the scalar path runs in Python): a budget seen once, as BD's
publication budgets are, then costs no table.

numba is not imported until a loop is first asked for (a vector of noise, or M1's distance with
discrete noise), and without it (the stream's image does not install it) numpy computes the
same values. numba compiles the loops on their first use and caches the machine code beside this
file (or in its user cache directory).

>>> from wevent.core import compiled
>>> with compiled.disabled():
...     compiled.discrete_fast_path() is None
True
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator

import numpy as np

__all__ = ["discrete_fast_path", "whole_distance", "disabled", "cell_bounds"]

_MASK63 = 2**63 - 1
_UNIT = 2.0**-53  # the unit roundoff of a double
_loaded: dict[str, Callable | None] = {}  # the compiled loops by name, each None without numba
_enabled = [True]


def discrete_fast_path() -> Callable | None:
    """``kernel(words, alpha, beta, start, width, a, size, x, missed) -> misses``, or None (no numba, or disabled).

    For every value ``i``: ``u`` is its word's low 63 bits, ``k = trunc(alpha log(u) + beta)``
    the candidate, signed by the word's top bit; ``x[i] = +-k`` when ``u`` lies in the proven cell
    of ``|x| = k``, else ``missed[i]`` is set (and ``x[i]`` is left to the exact count). The cell
    is ``[start, start + width)`` of the signed index when ``start`` holds a table's cells, else
    (``start`` empty) :func:`cell_bounds` of ``a`` and ``k < size``. Returns how many values missed.
    """
    return _kernel("discrete")


def whole_distance() -> Callable | None:
    """``kernel(release, counts) -> sum_j |release[j] - counts[j]|`` (a float) for whole numbers, the same
    as numpy's sum wherever it stays below ``2^52`` (module docstring), or None (no numba, or disabled)."""
    return _kernel("distance")


def _kernel(name: str) -> Callable | None:
    if not _enabled[0]:
        return None
    if not _loaded:
        _loaded.update(_compile())
    return _loaded[name]


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Every draw in the block takes the numpy path (the tests compare the two)."""
    _enabled[0] = False
    try:
        yield
    finally:
        _enabled[0] = True


def cell_bounds(a: float, k: int) -> tuple[float, float]:
    """Reals whose ceiling and integer part are ``high_{k+1}`` and ``low_k`` of a complete level-0 table at
    ``a = e^-epsilon`` (``a`` within ``2u``), as :class:`~wevent.core.noise.Thresholds` proves them (``low_0`` is
    ``2^63``, whatever the second real).

    ``a^k`` is taken by repeated squaring: ``k - 1`` roundings in all, counted with their
    multiplicities, so the bound of :func:`~wevent.core.noise._powers` holds for it; ``c = 2 / (1 + a)``
    and the products add ``5u``.
    """
    powered, square, exponent = 1.0, a, k
    while exponent:
        if exponent & 1:
            powered *= square
        exponent >>= 1
        square *= square
    c, margin = 2.0 / (1.0 + a), 2.0 * max(3.02 * _UNIT * (k + 1) + 5 * _UNIT, 8 * _UNIT)
    return powered * a * c * (2.0**63 * (1.0 + margin)), powered * c * (2.0**63 * (1.0 - margin))


_compiled_cell_bounds: Callable = cell_bounds  # what the kernel calls: its compiled form, set before the kernel compiles


def _fast_path(words, alpha, beta, start, width, a, size, x, missed):
    tabled = start.size > 0
    top = (start.size - 1) // 2 if tabled else size - 1
    misses = 0
    for i in range(words.size):
        word = words[i]
        u = word & np.uint64(_MASK63)
        k = int(alpha * math.log(float(u)) + beta) if u else top + 1
        if k > top:  # beyond the table (u = 0): the exact count
            missed[i] = True
            misses += 1
            continue
        if tabled:
            index = start.size - k if word >> np.uint64(63) and k else k  # negative counts are mirrored from the end
            inside = u - start[index] < width[index]  # wraps when below the cell
        else:
            low, high = _compiled_cell_bounds(a, k)
            inside = np.uint64(math.ceil(low)) <= u and (k == 0 or u < np.uint64(int(high)))
        if inside:
            missed[i] = False
            x[i] = -k if word >> np.uint64(63) else k
        else:
            missed[i] = True
            misses += 1
    return misses


def _distance(release, counts):
    total = 0.0
    for j in range(release.size):
        total += abs(release[j] - counts[j])
    return total


def _compile() -> dict[str, Callable | None]:
    try:
        import numba  # noqa: PLC0415 - optional: without it the numpy path runs
    except ImportError:
        return {"discrete": None, "distance": None}
    njit = numba.njit(cache=True, nogil=True, error_model="numpy")
    global _compiled_cell_bounds  # noqa: PLW0603 - the kernel calls it, so it is compiled before the kernel
    _compiled_cell_bounds = njit(cell_bounds)
    return {"discrete": njit(_fast_path), "distance": njit(_distance)}
