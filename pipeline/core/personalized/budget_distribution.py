"""Personalized Budget Distribution (PBD): Du et al., PVLDB 18(6) 2025, Algorithm 4."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..exact import divide
from ..options import Option
from ..randomness import DerivedRandomness
from ..validation import ParameterError
from .pwsm import DecisionOverride, PersonalizedMechanism

__all__ = ["PersonalizedBudgetDistribution"]

LOOKBACKS = ("paper", "artifact")


class PersonalizedBudgetDistribution(PersonalizedMechanism):
    """Personalized Budget Distribution: BD with every user's own pool and window.

    Each user i has a publication pool of ``eps_i/2`` per window. At slot t, with ``rem_i`` the
    pool minus the publication budgets user i spent in the previous ``w_i - 1`` slots, a
    publication would charge ``e2_i = rem_i / 2``; PWSM (:class:`PersonalizedMechanism`)
    decides with OBS over these budgets. A spent amount comes back once its slot leaves the
    user's window.

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
    lookback : {"paper", "artifact"}, default "paper"
        How many past slots ``rem_i`` subtracts: ``w_i - 1`` as Algorithm 4 prints, or ``w_i`` as
        the authors' code does (more conservative, so also private).

    Spend
    -----
    A user of type k pays ``e1_k = eps_k/(2 w_k)`` per slot on DC, and, since decisions are
    global, type k's publication budgets are BD's at ``(w_k, eps_k)`` under the same decisions:
    every publication takes at most half of what the earlier ones in the same window left, so a
    window of ``w_k`` slots spends at most ``(eps_k/2)(1 - 2^-w_k)`` on publications, and at
    most ``eps_k (1 - 2^-(w_k+1))`` in all (:attr:`type_window_spend_bounds`).
    Accounting charges every user the allocated budget ``e_k`` even where the sample gives
    them less (``min(e_k, theta)``): conservative, and what the window invariants are
    checked against.

    Notes
    -----
    The window sums are taken afresh every slot from a ring of the last charges per type, and
    ``rem / 2`` is rounded down onto the type's grid (:func:`~wevent.core.exact.divide`), so every
    charge is a multiple of it and every sum of them within ``eps_k`` is exact.

    Examples
    --------
    Example 3 of the paper (one user, eps = 1, w = 4; decisions release, skip, release):

    >>> from wevent.core.randomness import SecretKey, ZeroNoise
    >>> m = PersonalizedBudgetDistribution([4], [1.0], [1], 2, randomness=ZeroNoise(SecretKey.from_seed(0)),
    ...                                    decision_override={1: True, 2: False, 3: True}.get)
    >>> [(float(r.type_eps1[0]), float(r.type_eps2[0])) for r in m.run([[[1, 0]]] * 3)]
    [(0.125, 0.25), (0.125, 0.0), (0.125, 0.125)]

    References
    ----------
    X. Du et al. Personalized w-Event Privacy Protection for Infinite Data Streams.
    PVLDB 18(6), 2025: Section 4.4, Algorithm 4, Example 3; Algorithms 1-3 (OBS, PWSM, DC).
    """

    name = "pbd"
    OPTIONS = {
        "lookback": Option.choice("how many past slots rem_i subtracts: w_i - 1 as Algorithm 4 prints, or w_i as "
                                  "the authors' code does", LOOKBACKS, example="artifact"),
    }

    def __init__(
        self,
        windows,
        epsilons,
        sizes,
        domain_size: int,
        *,
        lookback: str = "paper",
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
        return divide(self.remaining_budgets(), 2, self.types.grids)

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
