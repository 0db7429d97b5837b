"""Error metrics of a released stream against the truth, over (T, d) matrices.

* MAE = mean over slots and bins of ``|r - c|`` (the error measure of Kellaris et al.'s evaluation).
* MSE = mean of ``(r - c)^2`` (LDP-IDS; AMRE of the personalized paper).
* MRE = mean of ``|r - c| / max(c, floor)``. No paper defines the floor (neither Kellaris et al.
  nor LDP-IDS); it is an explicit parameter and every summary records the value used.
  Conventional defaults: 1 for counts (central model), 1e-3 for frequencies (local model).

>>> r = np.array([[1.0, 3.0], [2.0, 2.0]]); c = np.array([[1.0, 2.0], [0.0, 2.0]])
>>> mae(r, c), mse(r, c), mre(r, c, floor=1.0)
(0.75, 1.25, 0.625)
"""

from __future__ import annotations

import numpy as np

from .validation import ParameterError

__all__ = ["mae", "mse", "mre", "COUNT_MRE_FLOOR", "FREQUENCY_MRE_FLOOR"]

COUNT_MRE_FLOOR = 1.0
FREQUENCY_MRE_FLOOR = 1e-3


def _pair(releases, truth) -> tuple[np.ndarray, np.ndarray]:
    r = np.asarray(releases, dtype=float)
    c = np.asarray(truth, dtype=float)
    if r.shape != c.shape:
        raise ParameterError(f"releases {r.shape} and truth {c.shape} differ in shape")
    return r, c


def mae(releases, truth) -> float:
    r, c = _pair(releases, truth)
    return float(np.abs(r - c).mean())


def mse(releases, truth) -> float:
    r, c = _pair(releases, truth)
    with np.errstate(over="ignore"):  # errors past 1e154 square to inf, which is the honest answer
        return float(np.square(r - c).mean())


def mre(releases, truth, floor: float) -> float:
    if not floor > 0:
        raise ParameterError(f"the MRE denominator floor must be > 0, got {floor!r}")
    r, c = _pair(releases, truth)
    return float((np.abs(r - c) / np.maximum(c, floor)).mean())
