"""Parameter checks shared by every mechanism; each failure names the parameter and the value.

:data:`MIN_EPSILON` is the one lower bound on privacy budgets: the stream configuration, every
command line option and every constructor that takes an epsilon derive theirs from it.

>>> check_epsilon(1e-320)
Traceback (most recent call last):
...
wevent.core.validation.ParameterError: epsilon must be a finite number >= 1e-290, got 1e-320
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["MIN_EPSILON", "ParameterError", "check_epsilon", "check_positive", "check_window", "check_domain", "check_positive_int", "check_counts"]


class ParameterError(ValueError):
    """A mechanism parameter or an input is invalid; the message is one line a user can act on."""


MIN_EPSILON = 1e-290
"""The smallest privacy budget accepted anywhere (a window's epsilon, a user's, a query index's).

Every budget a mechanism records is a multiple of its window budget's grid, the spacing of floats
there (:func:`wevent.core.exact.grid`, about ``epsilon 2^-52``), so the smallest budget a slot can
spend is about ``2.2e-306``. Noise at a budget ``e`` needs a finite scale ``1/e``, and exact
discrete noise sizes its tables by ``22.9/e`` (:mod:`wevent.core.noise`): both overflow below
``22.9/DBL_MAX``, about ``1.3e-307``, and denormal budgets (below ``2.2e-308``) would lose their
precision besides.

>>> import sys
>>> from wevent.core.exact import grid
>>> bool(grid(MIN_EPSILON) > 22.9 / sys.float_info.max)
True
"""


def check_positive(value, name: str) -> float:
    """A finite real number > 0 (a share, a gain, a sensitivity: anything but a privacy budget)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise ParameterError(f"{name} must be a finite number > 0, got {value!r}")
    return number


def check_epsilon(epsilon, name: str = "epsilon") -> float:
    """A privacy budget: a finite number >= :data:`MIN_EPSILON`."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise ParameterError(f"{name} must be a number, got {epsilon!r}")
    value = float(epsilon)
    if not math.isfinite(value) or value < MIN_EPSILON:
        raise ParameterError(f"{name} must be a finite number >= {MIN_EPSILON:g}, got {epsilon!r}")
    return value


def check_positive_int(value, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and float(value).is_integer():
            value = int(float(value))
        else:
            raise ParameterError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ParameterError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_window(window) -> int:
    return check_positive_int(window, "window w")


def check_domain(domain_size) -> int:
    return check_positive_int(domain_size, "domain size d")


def check_counts(counts, domain_size: int) -> np.ndarray:
    """One slot's histogram: a finite float vector of length ``domain_size``."""
    array = np.asarray(counts, dtype=float)
    if array.shape != (domain_size,):
        raise ParameterError(f"a slot histogram must have {domain_size} bins, got shape {array.shape}")
    if not math.isfinite(array.sum()):  # one reduction; any NaN or infinity makes the sum non-finite
        raise ParameterError("a slot histogram must be finite (found NaN or infinity)")
    return array
