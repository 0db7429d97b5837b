"""Budget Absorption (BA): Kellaris, Papadopoulos, Xiao, Papadias, PVLDB 2014, Algorithm 3."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base import StepResult, Strategy
from ..exact import divide, grid
from ..randomness import DerivedRandomness
from ._base import AdaptiveCentralMechanism, DecisionOverride
from .dissimilarity import Dissimilarity

__all__ = ["BudgetAbsorption"]


class BudgetAbsorption(AdaptiveCentralMechanism):
    """Budget Absorption: a publication absorbs the budget of the slots that skipped before it.

    Every slot owns one publication unit ``u = pool / w`` (``epsilon/(2w)`` by default), rounded
    down onto epsilon's grid (:func:`~wevent.core.exact.divide`), so ``k u`` is exact. A slot
    that does not publish leaves its unit for a later publication to absorb; a publication that
    absorbs ``k - 1`` units (``k <= w``) nullifies the next ``k - 1`` slots, so every window still
    averages at most one unit per slot. The publication rule is ``dis > 1/eps_2`` (strict).

    Parameters
    ----------
    epsilon : float
        The budget of any window of ``window`` consecutive slots, > 0.
    window : int
        ``w``, the window length in slots, >= 1.
    domain_size : int
        ``d``, the bins of a slot's histogram of counts (sensitivity 1 per user and slot).
    budget_shift : bool, default False
        Give M1 ``epsilon / d`` instead of ``epsilon / (2w)`` when ``d > 2w`` and the rest to the
        publications (the optimisation of Section 4.5; off by default, as in the paper's
        evaluation).
    force_first_publish : bool, default False
        Publish slot 1 whatever its dissimilarity, with the budget the rule gives it. Off by
        default: slot 1 is compared with the virtual release ``r_0 = 0``, which is public.
    randomness : DerivedRandomness, optional
        Where every draw comes from (a fresh random key if omitted).
    clamp_round : bool, default False
        Round fresh releases to non-negative integers (post-processing, no budget).
    noise : {"discrete", "laplace"}, default "discrete"
        Exact two-sided geometric noise on integer queries, or the paper's ``Lap(1/eps)``.
    decision_override : callable, optional
        ``slot -> bool | None``, a test hook that replaces the publish rule where not None.

    Spend
    -----
    ``eps_1 = epsilon/(2w)`` on M1 at every slot, nullified ones included (Algorithm 3 computes
    the dissimilarity before it checks for nullification, so the charge is the same at every
    slot); publication budgets ``k u`` with ``1 <= k <= w`` summing to at most ``epsilon/2`` in
    any window: at most ``epsilon`` in all (:attr:`window_spend_bound`).

    Notes
    -----
    Choices where Algorithm 3 is open to reading:

    * The nullified range after a publication is measured in integer units of the last
      publication (line 5 prints ``eps_{i,2}``, which would make the rule circular; the text
      means the last publication's budget). Integers make the range exact in floating point.
    * The units a publication absorbs count the slot itself: ``min(t - (l + nullified), w)``
      with ``l`` the last publication, as the formula says (the text calls it the skipped ones).
    * Before any publication, ``l = 0`` is a virtual release ``r_0 = 0`` that used one unit, so
      nothing is nullified after it and slot 1 compares its counts with zeros.

    Examples
    --------
    The paper's example (w = 3; decisions P, S, P, ·, P, S, consulted only at non-nullified
    slots):

    >>> from wevent.core.randomness import SecretKey, ZeroNoise
    >>> script = {1: True, 2: False, 3: True, 5: True, 6: False}
    >>> m = BudgetAbsorption(1.0, 3, 2, randomness=ZeroNoise(SecretKey.from_seed(0)),
    ...                      decision_override=script.get)
    >>> results = m.run([[1, 1]] * 6)
    >>> [r.strategy.value[0].upper() for r in results]
    ['P', 'A', 'P', 'N', 'P', 'A']
    >>> [round(r.eps2 * 6, 9) for r in results]
    [1.0, 0.0, 2.0, 0.0, 1.0, 0.0]

    References
    ----------
    G. Kellaris, S. Papadopoulos, X. Xiao, D. Papadias. Differentially Private Event Sequences
    over Infinite Streams. PVLDB 7(12), 2014: Section 4.3, Algorithm 3, Theorem 5.
    """

    name = "ba"

    def __init__(
        self,
        epsilon: float,
        window: int,
        domain_size: int,
        *,
        budget_shift: bool = False,
        force_first_publish: bool = False,
        randomness: DerivedRandomness | None = None,
        clamp_round: bool = False,
        noise: str = "discrete",
        decision_override: DecisionOverride | None = None,
    ) -> None:
        super().__init__(epsilon, window, domain_size, budget_shift=budget_shift,
                         force_first_publish=force_first_publish, randomness=randomness, clamp_round=clamp_round,
                         noise=noise, decision_override=decision_override)
        self.unit = divide(self.dissimilarity_measure.publication_pool, self.window, grid(self.epsilon))
        self.last_publication = 0  # l: the virtual release r_0 at slot 0 ...
        self.last_units = 1  # ... used one unit, so nothing is nullified after it

    @property
    def window_spend_bound(self) -> float:
        return self.window * self.dissimilarity_measure.eps1 + self.window * self.unit

    def _publish(self, slot: int, counts: np.ndarray, dissimilarity: Dissimilarity | None) -> StepResult:
        to_nullify = self.last_units - 1
        if slot - self.last_publication <= to_nullify:
            return self._repeat(slot, Strategy.NULLIFIED, dissimilarity)
        # Own unit plus the skipped slots since the nullified range, at most w in all.
        units = min(slot - (self.last_publication + to_nullify), self.window)
        eps2 = self.unit * units
        threshold = 1.0 / eps2
        if (self.force_first_publish and slot == 1) or self._decide(slot, dissimilarity, threshold):
            self._fresh(slot, counts, eps2)
            self.last_publication, self.last_units = slot, units
            return self._result(slot, Strategy.PUBLISH, eps2, dissimilarity, threshold)
        return self._repeat(slot, Strategy.APPROXIMATE, dissimilarity, threshold)

    def _dynamic(self) -> dict[str, Any]:
        return {**super()._dynamic(), "last_publication": self.last_publication, "last_units": self.last_units}

    def _load(self, dynamic: dict[str, Any]) -> None:
        super()._load(dynamic)
        self.last_publication = int(dynamic["last_publication"])
        self.last_units = int(dynamic["last_units"])
