"""Personalized Budget Distribution (PBD): Du et al., PVLDB 18(6) 2025, Algorithm 4.

Each user i has a publication pool of ``eps_i/2`` per window. At slot t, with ``rem_i`` the pool
minus the publication budgets user i spent in the previous ``w_i - 1`` slots, a publication
would charge ``e2_i = rem_i / 2``; PWSM (:mod:`.pwsm`) decides with OBS over these budgets.
A spent amount comes back once its slot leaves the user's window. The window sums are taken
afresh every slot from a ring of the last ``w_k - 1`` charges per type (no drifting running
total) and ``rem`` is clamped at 0 (spec §9).

``lookback="artifact"`` subtracts the previous ``w_i`` slots instead, as the authors' code does
(more conservative; spec AMB-11). The paper's ``w_i - 1`` is the default.

Spend: for a user of type k, ``e1_k = eps_k/(2 w_k)`` per slot on DC, and, since decisions are
global, type k's publication budgets are BD's at ``(w_k, eps_k)`` under the same decisions:
every publication takes at most half of what the earlier ones in the same window left, so a
window of ``w_k`` slots spends at most ``(eps_k/2)(1 - 2^-w_k)`` on publications, and at most
``eps_k (1 - 2^-(w_k+1))`` in all (:attr:`type_window_spend_bounds`; spec I1-I3, I5).

Examples
--------
Example 3 of the paper (one user, eps = 1, w = 4; decisions release, skip, release):

>>> from pipeline.core.randomness import SecretKey, ZeroNoise
>>> m = PersonalizedBudgetDistribution([4], [1.0], [1], 2, randomness=ZeroNoise(SecretKey.from_seed(0)),
...                                    decision_override={1: True, 2: False, 3: True}.get)
>>> [(float(r.type_eps1[0]), float(r.type_eps2[0])) for r in m.run([[[1, 0]]] * 3)]
[(0.125, 0.25), (0.125, 0.0), (0.125, 0.125)]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..validation import ParameterError
from .pwsm import PersonalizedMechanism

__all__ = ["PersonalizedBudgetDistribution"]

LOOKBACKS = ("paper", "artifact")


class PersonalizedBudgetDistribution(PersonalizedMechanism):
    name = "pbd"

    def __init__(self, windows, epsilons, sizes, domain_size: int, *, lookback: str = "paper", **options) -> None:
        super().__init__(windows, epsilons, sizes, domain_size, **options)
        if lookback not in LOOKBACKS:
            raise ParameterError(f"unknown lookback {lookback!r}; choose one of {', '.join(LOOKBACKS)}")
        self.lookback = lookback
        # Publication budgets of the previous `lookback_slots[k]` slots of type k, in ring
        # positions slot % lookback_slots[k]; columns beyond a type's ring stay 0.
        self.lookback_slots = self.types.windows - (1 if lookback == "paper" else 0)
        self._recent = np.zeros((self.types.count, int(self.lookback_slots.max())))
        self._ringed = np.flatnonzero(self.lookback_slots > 0)

    @property
    def type_window_spend_bounds(self) -> np.ndarray:
        w = self.types.windows
        return w * self.types.dissimilarity_budgets + self.types.publication_pools * (1.0 - 2.0 ** -w.astype(float))

    def remaining_budgets(self) -> np.ndarray:
        """``rem_k`` of the next slot: the pool minus the look-back's publication budgets, >= 0."""
        return np.maximum(self.types.publication_pools - self._recent.sum(axis=1), 0.0)

    def publication_budgets(self, slot: int) -> np.ndarray:
        return self.remaining_budgets() / 2.0

    def _commit(self, slot: int, spent: np.ndarray, published: bool) -> None:
        rows = self._ringed
        self._recent[rows, slot % self.lookback_slots[rows]] = spent[rows]

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "lookback": self.lookback}

    def _dynamic(self) -> dict[str, Any]:
        return {**super()._dynamic(), "recent_publication_budgets": self._recent.copy()}

    def _load(self, dynamic: dict[str, Any]) -> None:
        super()._load(dynamic)
        recent = np.array(dynamic["recent_publication_budgets"], dtype=float)
        if recent.shape != self._recent.shape:
            raise ParameterError(f"PBD state holds a look-back of shape {recent.shape}, expected {self._recent.shape}")
        self._recent = recent
