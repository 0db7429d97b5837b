"""Personalized Budget Absorption (PBA): Du et al., PVLDB 18(6) 2025, Algorithm 5.

User i's unit share is ``s_i = eps_i / (2 w_i)`` per slot. A publication at slot t uses
``k_i = min(tA_i, w_i)`` shares: the slots since the end of the user's own nullified range after
the last publication l, the current one included. It borrows the ``k_i - 1`` slots that follow,
and every user is nullified for ``max_j k_j - 1`` slots (the longest borrowing); users whose own
borrowing is shorter get those idle slots back through ``tA_i``. Share counts are integers
(spec AMB-12) and the start is a virtual publication at ``l = 0`` with one share each.

``artifact_compat_nonprivate=True`` reproduces the authors' code, which never updates ``l`` or
the share counts after a publication: nothing is ever nullified and every publication from
``t >= w_i`` on uses ``eps_i / 2``. **That breaks the window guarantee** (spec §5 [ART BUG]); it
exists only to reproduce the published curves.

Spend: for a user of type k, ``e1_k = s_k`` per slot on DC, and type k's publication budgets are
BA's at ``(w_k, eps_k)`` under decisions where the extra nullified slots act as skips, so any
window of ``w_k`` slots holds at most ``w_k`` shares: at most ``eps_k`` in all (spec I1-I4).

Examples
--------
Example 4 of the paper (w = 4, 2, 3; intents release, skip, release, release, release):

>>> from pipeline.core.randomness import SecretKey, ZeroNoise
>>> m = PersonalizedBudgetAbsorption([4, 2, 3], [1.0, 1.0, 1.0], [1, 1, 1], 2,
...                                  randomness=ZeroNoise(SecretKey.from_seed(0)),
...                                  decision_override={1: True, 2: False, 3: True, 4: True, 5: True}.get)
>>> results = m.run([[[1, 0]] * 3] * 5)
>>> [r.strategy.value for r in results]
['publish', 'approximate', 'publish', 'nullified', 'publish']
>>> [(r.type_eps2 / m.share_budgets).round(9).tolist() for r in results]
[[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [2.0, 2.0, 2.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..validation import ParameterError
from .pwsm import PersonalizedMechanism

__all__ = ["PersonalizedBudgetAbsorption"]


class PersonalizedBudgetAbsorption(PersonalizedMechanism):
    name = "pba"

    def __init__(self, windows, epsilons, sizes, domain_size: int, *, artifact_compat_nonprivate: bool = False,
                 **options) -> None:
        super().__init__(windows, epsilons, sizes, domain_size, **options)
        self.artifact_compat_nonprivate = bool(artifact_compat_nonprivate)
        self.share_budgets = self.types.publication_pools / self.types.windows  # s_k, computed as BA's unit
        self.last_publication = 0  # l: the virtual publication at slot 0 ...
        self.last_shares = np.ones(self.types.count, dtype=np.int64)  # ... with one share each

    @property
    def type_window_spend_bounds(self) -> np.ndarray:
        w = self.types.windows
        publication_shares = w * w if self.artifact_compat_nonprivate else w  # w shares every slot vs per window
        return w * self.types.dissimilarity_budgets + publication_shares * self.share_budgets

    def absorbable_shares(self, slot: int) -> np.ndarray | None:
        """Every type's ``k_k`` if ``slot`` is not nullified, else None (Alg. 5 lines 5-11)."""
        own_nullified = self.last_shares - 1  # tN_k
        if slot - self.last_publication <= own_nullified.max():
            return None
        absorbable = np.maximum(slot - self.last_publication - own_nullified, 0)  # tA_k >= 1 here
        return np.minimum(absorbable, self.types.windows)

    def publication_budgets(self, slot: int) -> np.ndarray | None:
        shares = self.absorbable_shares(slot)
        return None if shares is None else self.share_budgets * shares

    def _commit(self, slot: int, spent: np.ndarray, published: bool) -> None:
        if published and not self.artifact_compat_nonprivate:
            self.last_shares = self.absorbable_shares(slot)
            self.last_publication = slot

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "artifact_compat_nonprivate": self.artifact_compat_nonprivate}

    def _dynamic(self) -> dict[str, Any]:
        return {**super()._dynamic(), "last_publication": self.last_publication, "last_shares": self.last_shares.copy()}

    def _load(self, dynamic: dict[str, Any]) -> None:
        super()._load(dynamic)
        shares = np.array(dynamic["last_shares"], dtype=np.int64)
        if shares.shape != self.last_shares.shape:
            raise ParameterError(f"PBA state holds {shares.size} share counts for {self.last_shares.size} types")
        self.last_publication = int(dynamic["last_publication"])
        self.last_shares = shares
