"""Parameter checks shared by every mechanism; each failure names the parameter and the value."""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["ParameterError", "check_epsilon", "check_window", "check_domain", "check_positive_int", "check_counts"]


class ParameterError(ValueError):
    """A mechanism parameter or an input is invalid; the message is one line a user can act on."""


def check_epsilon(epsilon, name: str = "epsilon") -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise ParameterError(f"{name} must be a number, got {epsilon!r}")
    value = float(epsilon)
    if not math.isfinite(value) or value <= 0:
        raise ParameterError(f"{name} must be a finite number > 0, got {epsilon!r}")
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
