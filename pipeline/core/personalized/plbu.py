"""PLBU: personalized LDP Budget Uniform, the local-model baseline of Du et al. (PVLDB 2025), Section 5.2.

LBU (LDP-IDS, Section 4.1) with each user's own requirement: at every slot, user i reports their
value through generalized randomized response at ``eps_i / w_i``, so any w_i consecutive slots
spend exactly ``eps_i``. The server adds the users' unbiased estimates of the indicator of each
bin: ``(1[y_i = j] - q_i) / (p_i - q_i)`` with ``p_i = e^e / (e^e + d - 1)`` and
``q_i = 1 / (e^e + d - 1)`` at ``e = eps_i / w_i``. The paper does not name the oracle; GRR is
LBU's with d <= 3 e^eps + 2, and the one that takes a budget per user without per-user vectors.

>>> import numpy as np
>>> from pipeline.core.personalized import Requirements
>>> plbu = PersonalizedLBU(Requirements([2, 4], [1.0, 2.0]), domain_size=3, rng=np.random.default_rng(0))
>>> plbu.slot_epsilons.tolist()                       # eps_i / w_i
[0.5, 0.5]
>>> plbu.step(np.array([0, 2])).shape
(3,)
"""

from __future__ import annotations

import numpy as np

from ..validation import ParameterError, check_domain
from .requirements import Requirements

__all__ = ["PersonalizedLBU"]


class PersonalizedLBU:
    """Every user reports every slot by GRR at ``eps_i / w_i``; the server sums unbiased estimates.

    Parameters
    ----------
    requirements : every user's ``(w_i, eps_i)``.
    domain_size : d, values are 0..d-1.
    rng : the devices' randomness (a simulation draws every user's report from it).

    Attributes
    ----------
    slot_epsilons : ``eps_i / w_i``, each user's budget per slot.
    variance : the variance of each bin's estimate, ``Σ_i q_i (1 - q_i) / (p_i - q_i)^2`` for a bin
        no user holds (a bin user i holds adds ``p_i (1 - p_i)`` instead of ``q_i (1 - q_i)``).
    """

    name = "plbu"

    def __init__(self, requirements: Requirements, domain_size: int, *, rng: np.random.Generator) -> None:
        self.domain_size = check_domain(domain_size)
        if self.domain_size < 2:
            raise ParameterError("PLBU needs a domain of at least 2 values")
        self.slot_epsilons = requirements.epsilons / requirements.windows
        e = np.exp(self.slot_epsilons)
        self._keep = e / (e + self.domain_size - 1)  # p_i
        self._other = 1.0 / (e + self.domain_size - 1)  # q_i
        self._weights = 1.0 / (self._keep - self._other)
        self._offset = float((self._other * self._weights).sum())
        self.variance = float((self._other * (1.0 - self._other) * self._weights**2).sum())
        self._rng = rng

    def step(self, values) -> np.ndarray:
        """The estimated histogram (counts) of one slot's values, one per user in requirement order."""
        values = np.asarray(values)
        if values.shape != self._keep.shape:
            raise ParameterError(f"expected one value per user ({self._keep.size}), got shape {values.shape}")
        if values.size and (values.min() < 0 or values.max() >= self.domain_size):
            raise ParameterError(f"values must lie in 0..{self.domain_size - 1}")
        keep = self._rng.random(values.size) < self._keep
        # another value, uniform among the d - 1 others
        other = (values + 1 + self._rng.integers(0, self.domain_size - 1, values.size)) % self.domain_size
        reports = np.where(keep, values, other)
        return np.bincount(reports, weights=self._weights, minlength=self.domain_size) - self._offset
