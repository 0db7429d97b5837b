"""Personalized Budget Absorption (PBA): Du et al., PVLDB 18(6) 2025, Algorithm 5."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..exact import divide
from ..options import Option
from ..randomness import DerivedRandomness
from ..validation import ParameterError
from .pwsm import DecisionOverride, PersonalizedMechanism

__all__ = ["PersonalizedBudgetAbsorption"]


class PersonalizedBudgetAbsorption(PersonalizedMechanism):
    """Personalized Budget Absorption: BA with every user's own shares and window.

    User i's share is ``s_i = eps_i / (2 w_i)`` per slot, rounded down onto the user's grid
    (:func:`~wevent.core.exact.divide`), so that ``k s_i`` is exact. A publication at slot t uses
    ``k_i = min(tA_i, w_i)`` shares: the slots since the end of the user's own nullified range
    after the last publication ``l``, the current one included. It borrows the ``k_i - 1``
    slots that follow, and every user is nullified for ``max_j k_j - 1`` slots (the longest
    borrowing); users whose own borrowing is shorter get those idle slots back through ``tA_i``.
    PWSM (:class:`PersonalizedMechanism`) decides with OBS over these budgets.

    Parameters
    ----------
    windows, epsilons, sizes : array_like
        Every requirement type's window ``w_k`` (>= 1), budget ``eps_k`` (> 0) and number of
        registered users; a user of type k gets ``eps_k`` in any ``w_k`` consecutive slots.
    domain_size : int
        ``d``, the bins of a slot's histogram.
    threshold : {"sqrt-error", "scale"}, default "sqrt-error"
        What the dissimilarity must exceed: ``sqrt(err_2)`` (Algorithm 2 line 5) or BD/BA's
        ``1/theta_2``; with every user identical, "scale" makes PBD and PBA equal BD and BA.
    force_first_publish : bool, default False
        Publish slot 1 whatever its dissimilarity. Off by default: the paper gives no ``r_0``,
        so slot 1 is compared with ``r_0 = 0`` (as the authors' code does) under the normal rule.
    dc_obs_sensitivity : float, default 1.0
        The sensitivity DC's OBS assumes when it picks ``theta_1``. Algorithm 3 uses 1 (the
        error model of OBS) while DC's noise has sensitivity ``1/d``; it changes only which
        threshold is picked, never the noise, so any value is private.
    randomness : DerivedRandomness, optional
        Where every draw comes from (a fresh random key if omitted).
    clamp_round : bool, default False
        Round fresh releases to non-negative integers (post-processing, no budget).
    noise : {"discrete", "laplace"}, default "discrete"
        Exact two-sided geometric noise on integer queries, or the paper's ``Lap(1/theta)``.
    decision_override : callable, optional
        ``slot -> bool | None``, a test hook that replaces the publish rule where not None.
    artifact_compat_nonprivate : bool, default False
        Reproduce the authors' code, which never updates ``l`` or the share counts after a
        publication: nothing is ever nullified and every publication from ``t >= w_i`` on uses
        ``eps_i / 2``. **That breaks the window guarantee**; it exists only to reproduce the
        published curves, and :attr:`type_window_spend_bounds` then says so (up to ``w_k eps_k``).

    Spend
    -----
    A user of type k pays ``s_k`` per slot on DC, and type k's publication budgets are BA's at
    ``(w_k, eps_k)`` under decisions where the extra nullified slots act as skips, so any
    window of ``w_k`` slots holds at most ``w_k`` shares: at most ``eps_k`` in all.
    Accounting charges every user the allocated budget ``e_k`` even where the sample gives
    them less (``min(e_k, theta)``): conservative, and what the window invariants are
    checked against.

    Notes
    -----
    "If l exists" in Algorithm 5 is read as a virtual publication at ``l = 0`` with one share
    per user, which reproduces Example 4, and the nullified ranges come from integer share
    counts, never from a floating-point ratio of budgets.

    Examples
    --------
    Example 4 of the paper (w = 4, 2, 3; intents release, skip, release, release, release):

    >>> from wevent.core.randomness import SecretKey, ZeroNoise
    >>> m = PersonalizedBudgetAbsorption([4, 2, 3], [1.0, 1.0, 1.0], [1, 1, 1], 2,
    ...                                  randomness=ZeroNoise(SecretKey.from_seed(0)),
    ...                                  decision_override={1: True, 2: False, 3: True, 4: True, 5: True}.get)
    >>> results = m.run([[[1, 0]] * 3] * 5)
    >>> [r.strategy.value for r in results]
    ['publish', 'approximate', 'publish', 'nullified', 'publish']
    >>> [(r.type_eps2 / m.share_budgets).round(9).tolist() for r in results]
    [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [2.0, 2.0, 2.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]

    References
    ----------
    X. Du et al. Personalized w-Event Privacy Protection for Infinite Data Streams.
    PVLDB 18(6), 2025: Section 4.4, Algorithm 5, Example 4; Algorithms 1-3 (OBS, PWSM, DC).
    """

    name = "pba"
    OPTIONS = {
        "artifact_compat_nonprivate": Option.boolean("reproduce the authors' code, which never updates l or the "
                                                     "share counts after a publication", nonprivate=True),
    }

    def __init__(
        self,
        windows,
        epsilons,
        sizes,
        domain_size: int,
        *,
        artifact_compat_nonprivate: bool = False,
        threshold: str = "sqrt-error",
        force_first_publish: bool = False,
        dc_obs_sensitivity: float = 1.0,
        randomness: DerivedRandomness | None = None,
        clamp_round: bool = False,
        noise: str = "discrete",
        decision_override: DecisionOverride | None = None,
    ) -> None:
        super().__init__(windows, epsilons, sizes, domain_size, threshold=threshold,
                         force_first_publish=force_first_publish, dc_obs_sensitivity=dc_obs_sensitivity,
                         randomness=randomness, clamp_round=clamp_round, noise=noise,
                         decision_override=decision_override)
        self.artifact_compat_nonprivate = bool(artifact_compat_nonprivate)
        # s_k, computed as BA's unit
        self.share_budgets = divide(self.types.publication_pools, self.types.windows, self.types.grids)
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
            shares = self.absorbable_shares(slot)
            assert shares is not None, "a slot that published was not nullified"
            self.last_shares = shares
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
