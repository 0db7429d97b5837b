"""Compiled inner loops, where numpy's cost per call dominates: optional, with numba.

A short vector of exact discrete noise costs eleven numpy calls of about 0.4 us each, whatever
its length: at 100 values, 2.8 times numpy's own Laplace draw. :func:`discrete_fast_path` is the
same fast path as one loop compiled by numba (``pip install 'wevent[compiled]'``): each value's
candidate count from its word, accepted only inside the proven cell, exactly as
:func:`~wevent.core.noise.two_sided_geometric` does it in numpy. The candidate's floating-point
logarithm may round otherwise than numpy's, but a candidate decides only whether a value is found
here or by the exact count, never which value it is, so both paths give the same draws (the tests
compare them).

Nothing here is imported until a vector of noise is drawn, and without numba (the stream's
image does not install it) every draw takes the numpy path. numba compiles the loop on its first
use and caches the machine code beside this file (or in its user cache directory).

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

__all__ = ["discrete_fast_path", "disabled"]

_MASK63 = 2**63 - 1
_loaded: dict[str, Callable | None] = {}  # "discrete": the compiled loop, or None without numba
_enabled = [True]


def discrete_fast_path() -> Callable | None:
    """``kernel(words, alpha, beta, start, width, x, missed) -> misses``, or None (no numba, or disabled).

    For every value ``i``: ``u`` is its word's low 63 bits, ``k = trunc(alpha log(u) + beta)``
    the candidate, signed by the word's top bit; ``x[i] = +-k`` when ``u`` lies in the proven cell
    ``[start, start + width)`` of that signed index, else ``missed[i]`` is set (and ``x[i]`` is left
    to the exact count). Returns how many values missed.
    """
    if not _enabled[0]:
        return None
    if "discrete" not in _loaded:
        _loaded["discrete"] = _compile()
    return _loaded["discrete"]


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Every draw in the block takes the numpy path (the tests compare the two)."""
    _enabled[0] = False
    try:
        yield
    finally:
        _enabled[0] = True


def _fast_path(words, alpha, beta, start, width, x, missed):
    top = (start.size - 1) // 2
    misses = 0
    for i in range(words.size):
        word = words[i]
        u = word & np.uint64(_MASK63)
        k = int(alpha * math.log(float(u)) + beta) if u else top + 1
        if k > top:  # beyond the table (u = 0): the exact count
            missed[i] = True
            misses += 1
            continue
        index = start.size - k if word >> np.uint64(63) and k else k  # negative counts are mirrored from the end
        if u - start[index] >= width[index]:  # outside the proven cell (wraps when below it)
            missed[i] = True
            misses += 1
        else:
            missed[i] = False
            x[i] = -k if word >> np.uint64(63) else k
    return misses


def _compile() -> Callable | None:
    try:
        import numba  # noqa: PLC0415 - optional: without it the numpy path runs
    except ImportError:
        return None
    return numba.njit(cache=True, nogil=True, error_model="numpy")(_fast_path)
