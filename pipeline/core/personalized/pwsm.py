"""The PWSM framework: Du et al., PVLDB 18(6) 2025, Algorithm 2 (personalized w-event privacy).

Each user i keeps their own requirement: at most ``eps_i`` spent in any ``w_i`` consecutive slots.
A slot runs M1 = DC (:mod:`.dissimilarity`, budget ``e1_i = eps_i/(2 w_i)``) and M2: a subclass
names every user's publication budget ``e2_i`` (or nullifies the slot), OBS picks the threshold
``theta_2`` and its error ``err_2``, and the slot publishes iff ``dis > sqrt(err_2)`` (strict):
the kept users of a fresh SM sample (coins at ``SAMPLE_PUBLICATION``) plus ``theta_2``-DP noise
per bin (at ``PUBLICATION``): exact two-sided geometric by default, ``Lap(1/theta_2)`` with
``noise="laplace"`` (see :class:`CentralMechanism`). Otherwise it repeats the last release and
charges no publication budget.

Input per slot: the ``(types, d)`` matrix of users per requirement type and value
(:meth:`.requirements.Requirements.type_counts` builds it from per-user values); bookkeeping is
per type, O(m) per slot. The M1/M2 split and the options follow :class:`CentralMechanism`:
``measure(counts)``, ``publish(counts, dissimilarity)``, ``step(counts)`` = both.

The options (``threshold``, ``force_first_publish``, ``dc_obs_sensitivity``) are described with
PBD and PBA, which take them.

Spend: each user of type k is charged ``e1_k`` at every slot and ``e2_k`` at each publication;
``type_window_spend_bounds`` states each type's window bound.

Examples
--------
Two types, 30 users with (w, eps) = (2, 1) and 50 with (4, 1), everyone at value 0. Publishing
gives every user ``eps/4`` (one OBS candidate, so nobody is sampled out); zero noise:

>>> from wevent.core.personalized import PersonalizedBudgetDistribution
>>> from wevent.core.randomness import SecretKey, ZeroNoise
>>> m = PersonalizedBudgetDistribution([2, 4], [1.0, 1.0], [30, 50], 2, randomness=ZeroNoise(SecretKey.from_seed(0)))
>>> r = m.step([[30, 0], [50, 0]])
>>> r.strategy.value, r.release.tolist(), r.type_eps1.tolist(), r.type_eps2.tolist(), r.theta
('publish', [80.0, 0.0], [0.25, 0.125], [0.25, 0.25], 0.25)
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base import StepResult, Strategy
from ..central import CentralMechanism
from ..central._base import DecisionOverride
from ..central.dissimilarity import Dissimilarity
from ..options import Option
from ..randomness import DerivedRandomness, Phase
from ..validation import ParameterError
from .dissimilarity import DissimilarityCalculation
from .ledger import PersonalizedLedger, SlidingPersonalizedLedger
from .obs import BudgetSelection, obs
from .requirements import RequirementTypes
from .sampling import keep_probabilities, sample_counts

__all__ = ["PersonalizedStepResult", "PersonalizedMechanism", "THRESHOLDS", "DecisionOverride"]

_SELECTIONS_KEPT = 4096  # OBS selections remembered per mechanism (a few KB each way)

# What M2 compares the dissimilarity with, from OBS's selection.
THRESHOLDS = {
    "sqrt-error": lambda selection: math.sqrt(selection.error),  # Alg. 2 line 5: the paper's rule
    "scale": lambda selection: 1.0 / selection.theta,  # BD/BA's rule: the Laplace scale
}


@dataclass(frozen=True, eq=False, kw_only=True)
class PersonalizedStepResult(StepResult):
    """One slot's outcome with every type's charge.

    ``type_eps1[k]``/``type_eps2[k]`` are what each user of type k was charged on DC and on the
    publication; ``eps1``/``eps2`` are their maxima (the largest charge any user received).
    ``theta`` is OBS's publication threshold (None where OBS did not run or found no budget).
    """

    type_eps1: np.ndarray
    type_eps2: np.ndarray
    theta: float | None = None

    @property
    def type_charges(self) -> np.ndarray:
        """What each user of every type paid at this slot: ``type_eps1 + type_eps2``."""
        return self.type_eps1 + self.type_eps2


class PersonalizedMechanism(CentralMechanism):
    """PWSM (Alg. 2) over ``m`` requirement types; subclasses choose the publication budgets.

    ``windows``, ``epsilons``, ``sizes``: every type's ``(w_k, eps_k)`` and registered users.
    ``epsilon``/``window`` (the :class:`Mechanism` attributes) are the strictest pair
    ``(min eps_k, max w_k)``; each user's own pair is in ``types``.
    """

    model = "personalized"
    dissimilarity_measure: DissimilarityCalculation
    OPTIONS = {
        "threshold": Option.choice("what the dissimilarity must exceed: sqrt(err_2) (Algorithm 2 line 5) or BD/BA's "
                                   "1/theta_2", tuple(THRESHOLDS), example="scale"),
        "force_first_publish": Option.boolean("publish slot 1 whatever its dissimilarity"),
        "dc_obs_sensitivity": Option.number("the sensitivity DC's OBS assumes when it picks theta_1", 0, example=2.0,
                                            open_low=True),
        "noise": Option.choice("exact two-sided geometric noise on integer queries, or the paper's Lap(1/theta)",
                               ("discrete", "laplace"), example="laplace"),
    }

    def __init__(
        self,
        windows,
        epsilons,
        sizes,
        domain_size: int,
        *,
        threshold: str = "sqrt-error",
        force_first_publish: bool = False,
        dc_obs_sensitivity: float = 1.0,
        randomness: DerivedRandomness | None = None,
        clamp_round: bool = False,
        noise: str = "discrete",
        decision_override: DecisionOverride | None = None,
    ) -> None:
        self.types = RequirementTypes(windows, epsilons, sizes)
        strictest_window, strictest_epsilon = self.types.strictest
        super().__init__(strictest_epsilon, strictest_window, domain_size, randomness=randomness,
                         clamp_round=clamp_round, noise=noise, decision_override=decision_override)
        if threshold not in THRESHOLDS:
            raise ParameterError(f"unknown threshold {threshold!r}; choose one of {', '.join(THRESHOLDS)}")
        self.threshold = threshold
        self.force_first_publish = bool(force_first_publish)
        self.dissimilarity_measure = DissimilarityCalculation(self.types, self.domain_size,
                                                              obs_sensitivity=dc_obs_sensitivity, sampler=self._sample,
                                                              noise=self.noise)
        self._selections: dict[bytes, BudgetSelection | None] = {}

    @classmethod
    def for_requirements(cls, requirements, domain_size: int, **options) -> "PersonalizedMechanism":
        """The mechanism for a :class:`.requirements.Requirements` population."""
        types = requirements.types
        return cls(types.windows, types.epsilons, types.sizes, domain_size, **options)

    # --- what a subclass decides ---------------------------------------------------------------
    @abc.abstractmethod
    def publication_budgets(self, slot: int) -> np.ndarray | None:
        """Every type's ``e2_k`` if ``slot`` publishes, or None if the slot is nullified."""

    @abc.abstractmethod
    def _commit(self, slot: int, spent: np.ndarray, published: bool) -> None:
        """Record the slot's publication charges (all zero unless it published)."""

    @property
    @abc.abstractmethod
    def type_window_spend_bounds(self) -> np.ndarray:
        """The most any window of ``w_k`` slots can charge a user of type k (``<= eps_k``)."""

    @property
    def window_spend_bound(self) -> float:
        """The largest of :attr:`type_window_spend_bounds` (an absolute budget, for one user's own window)."""
        return float(self.type_window_spend_bounds.max())

    def new_ledger(self) -> PersonalizedLedger:
        """A ledger per requirement type: each type's windows against its own ``(w_k, eps_k)``."""
        return PersonalizedLedger.for_mechanism(self)

    def sliding_ledger(self, state: np.ndarray | None = None) -> SlidingPersonalizedLedger:
        """:meth:`new_ledger`'s account over the longest window only, continued from ``state``."""
        return SlidingPersonalizedLedger(self.types.windows, self.types.epsilons, state)

    # --- one slot ------------------------------------------------------------------------------
    def _publish(self, slot: int, counts: np.ndarray, dissimilarity: Dissimilarity | None) -> PersonalizedStepResult:
        budgets = self.publication_budgets(slot)
        if budgets is None:
            return self._charge(slot, Strategy.NULLIFIED, dissimilarity, None, None, None)
        selection = self._selection(budgets)
        threshold = THRESHOLDS[self.threshold](selection) if selection is not None else math.inf
        publish = selection is not None and (
            (self.force_first_publish and slot == 1) or self._decide(slot, dissimilarity, threshold)
        )
        if selection is None or not publish:
            return self._charge(slot, Strategy.APPROXIMATE, dissimilarity, threshold, selection, None)
        kept = self._sample(counts, keep_probabilities(budgets, selection.theta), self.randomness, slot,
                            Phase.SAMPLE_PUBLICATION)
        self._fresh(slot, kept.sum(axis=0), selection.theta)  # SM_d: sensitivity 1, no rescaling
        return self._charge(slot, Strategy.PUBLISH, dissimilarity, threshold, selection, budgets)

    def _selection(self, budgets: np.ndarray) -> BudgetSelection | None:
        """OBS over the types' budgets, remembered: budget vectors recur (PBA's take a dozen forms in
        10,000 slots, PBD's repeat whenever a window holds no publication), and OBS is a pure function."""
        key = budgets.tobytes()
        if key not in self._selections:
            if len(self._selections) >= _SELECTIONS_KEPT:
                self._selections.clear()
            self._selections[key] = obs(budgets, self.types.sizes)
        return self._selections[key]

    def _charge(self, slot: int, strategy: Strategy, dissimilarity: Dissimilarity | None, threshold: float | None,
                selection: BudgetSelection | None, spent: np.ndarray | None) -> PersonalizedStepResult:
        spent = np.zeros(self.types.count) if spent is None else spent
        self._commit(slot, spent, strategy is Strategy.PUBLISH)
        eps1 = self.dissimilarity_measure.budgets
        return PersonalizedStepResult(
            slot=slot,
            release=self.last_release,
            strategy=strategy,
            eps1=float(eps1.max()),
            eps2=float(spent.max()),
            dissimilarity=dissimilarity.value if dissimilarity is not None else None,
            threshold=threshold,
            type_eps1=eps1,
            type_eps2=spent,
            theta=selection.theta if selection is not None else None,
        )

    def _sample(self, counts: np.ndarray, probabilities: np.ndarray, randomness: DerivedRandomness, slot: int,
                phase: int) -> np.ndarray:
        """SM_s, the one place either phase samples (a test overrides it with per-user coins)."""
        return sample_counts(counts, probabilities, randomness, slot, phase)

    def _draw_ahead(self, slots: np.ndarray, counts: np.ndarray) -> None:
        """The noise drawn ahead, and DC's samples of the chunk when DC samples with :func:`sample_counts`
        (this class's :meth:`_sample`): they depend on the counts, not on what the slots decide."""
        super()._draw_ahead(slots, counts)
        sampler = self.dissimilarity_measure.sampler
        if getattr(sampler, "__self__", None) is self and getattr(sampler, "__func__", None) is _OWN_SAMPLE:
            self.dissimilarity_measure.sample_ahead(slots, counts, self.randomness)

    def _forget_ahead(self) -> None:
        super()._forget_ahead()
        self.dissimilarity_measure.forget()

    def _check(self, counts) -> np.ndarray:
        """One slot's ``(types, d)`` matrix of users: whole numbers >= 0, at most each type's size."""
        array = np.asarray(counts)
        shape = (self.types.count, self.domain_size)
        if array.shape != shape:
            raise ParameterError(f"a slot's type counts must have shape {shape} (types, bins), got {array.shape}")
        if array.dtype.kind not in "iu":
            if array.dtype.kind != "f" or not np.all(np.isfinite(array)) or np.any(array != np.floor(array)):
                raise ParameterError("type counts must be whole numbers of users")
            array = array.astype(np.int64)
        if array.size and array.min() < 0:
            raise ParameterError("type counts must be >= 0")
        reporting = array.sum(axis=1)
        if (reporting > self.types.sizes).any():
            k = int(np.argmax(reporting > self.types.sizes))
            raise ParameterError(f"type {k} has {int(reporting[k])} users in this slot but only {int(self.types.sizes[k])} registered")
        return array

    def _check_slots(self, counts) -> np.ndarray:
        """The matrices of consecutive slots, checked together: :meth:`_check` of each."""
        array = np.asarray(counts)
        if (array.ndim != 3 or array.shape[1:] != (self.types.count, self.domain_size) or array.dtype.kind not in "iu"
                or (array.size and array.min() < 0) or (array.sum(axis=2) > self.types.sizes).any()):
            return np.stack([self._check(c) for c in counts])  # one at a time: the error names the slot's problem
        return array

    # --- state ---------------------------------------------------------------------------------
    def _params(self) -> dict[str, Any]:
        return {
            "windows": np.array(self.types.windows),
            "epsilons": np.array(self.types.epsilons),
            "sizes": np.array(self.types.sizes),
            "domain_size": self.domain_size,
            "threshold": self.threshold,
            "force_first_publish": self.force_first_publish,
            "dc_obs_sensitivity": self.dissimilarity_measure.obs_sensitivity,
            "clamp_round": self.clamp_round,
            "noise": self.noise,
        }


_OWN_SAMPLE = PersonalizedMechanism._sample
