"""Mode C (:mod:`wevent.core.decayed`): inverse-variance combination of Modes A and B.

The release index (Mode A, noise of the w-event histograms) and RTP_DMM on the raw counts
(Mode B, its own independent noise) estimate the same decayed aggregate. Weighting each by the
inverse of its noise variance gives the minimum-variance unbiased combination:
``â = (a/v_a + b/v_b) / (1/v_a + 1/v_b)``, ``Var(â) = v_a v_b / (v_a + v_b)``. The weights depend on
the variances only (public), so this is post-processing. An estimate with zero variance is
taken as is. Mode A's answer is unbiased only when its releases are fresh: a repeated (stale)
release adds a bias that no variance reflects, and the combination inherits it.

Spend: nothing beyond the two indexes it reads.

>>> inverse_variance(np.array([10.0]), np.array([4.0]), np.array([13.0]), np.array([12.0]))
(array([10.75]), array([3.]))
"""

from __future__ import annotations

import numpy as np

from ..validation import ParameterError
from .release_index import ReleaseIndex
from .rtp_dmm import RTPDMM

__all__ = ["CombinedIndex", "inverse_variance"]


def inverse_variance(a: np.ndarray, var_a: np.ndarray, b: np.ndarray, var_b: np.ndarray):
    """Combine two independent unbiased estimates elementwise: ``(estimate, variance)``."""
    total = var_a + var_b
    safe = np.where(total > 0, total, 1.0)
    weight_a = np.where(total > 0, var_b / safe, 0.5)  # both exact: they agree, take the mean
    return weight_a * a + (1.0 - weight_a) * b, var_a * var_b / safe


class CombinedIndex:
    """Mode C: answers ``query`` like the two indexes it combines (each is fed on its own)."""

    def __init__(self, released: ReleaseIndex, private: RTPDMM) -> None:
        for attribute in ("window", "decay", "bins", "first_slot"):
            if getattr(released, attribute) != getattr(private, attribute):
                raise ParameterError(f"mode A and mode B indexes differ in {attribute}: "
                                     f"{getattr(released, attribute)!r} != {getattr(private, attribute)!r}")
        self.released = released
        self.private = private

    @property
    def slot(self) -> int:
        return min(self.released.slot, self.private.slot)

    def query(self, from_slot, to_slot, decay=None) -> tuple[np.ndarray, np.ndarray]:
        """``(answer, standard_error)`` of the combined estimate; both indexes must be at the same slot."""
        if self.released.slot != self.private.slot:
            raise ParameterError(f"mode A is at slot {self.released.slot} and mode B at slot {self.private.slot}: "
                                 "a combined answer needs both at the same slot")
        a, se_a = self.released.query(from_slot, to_slot, decay)
        b, se_b = self.private.query(from_slot, to_slot, decay)
        answer, variance = inverse_variance(a, se_a**2, b, se_b**2)
        return answer, np.sqrt(variance)
