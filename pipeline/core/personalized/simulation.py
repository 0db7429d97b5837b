"""Batch simulation of a personalized mechanism over a stream of ``(types, d)`` count matrices.

The truth a release estimates is the histogram of all users, ``counts.sum(axis=0)``. The summary
is ``wevent simulate``'s, with each user's window checked against their own ``(w_i, eps_i)``:
``max_user_window_spend_ratio`` is the largest ``spent / eps_i`` of any user's window (<= 1).

>>> from wevent.core.personalized import PersonalizedBudgetAbsorption, grouped
>>> from wevent.core.randomness import DerivedRandomness, SecretKey
>>> from wevent.core.synthetic import synthetic
>>> data = synthetic("log", users=500, slots=30, seed=3)
>>> requirements = grouped(500, 0.6, 20, seed=3)
>>> m = PersonalizedBudgetAbsorption.for_requirements(requirements, 2, randomness=DerivedRandomness(SecretKey.from_seed(3)))
>>> run = simulate_personalized(m, (requirements.type_counts(data.values_at(t), 2) for t in range(1, 31)))
>>> s = run.summary(mre_floor=1.0)
>>> s["slots"], s["max_user_window_spend_ratio"] <= 1.0, s["requirements"]["strictest_window"]
(30, True, 20)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

from ..simulation import SimulationRun
from .ledger import PersonalizedLedger
from .pwsm import PersonalizedMechanism

__all__ = ["PersonalizedRun", "simulate_personalized"]

# Requirement tables longer than this are summarised by their size only.
_TABLE_LIMIT = 64


@dataclass
class PersonalizedRun(SimulationRun):
    """A personalized mechanism's run: :class:`~wevent.core.simulation.SimulationRun` whose
    summary checks every user's window against their own ``(w_i, eps_i)`` instead of one budget.

    Parameters
    ----------
    mechanism : PersonalizedMechanism
        The mechanism after the run (its requirement types go in the summary).
    results : list of PersonalizedStepResult
        Every slot's outcome, in order.
    truth : numpy.ndarray
        ``(T, d)``: the histogram of all users at every slot.
    charged : PersonalizedLedger, optional
        The mechanism's ledger, already charged with every result.

    Examples
    --------
    >>> from wevent.core.personalized import PersonalizedBudgetDistribution
    >>> from wevent.core.randomness import DerivedRandomness, SecretKey
    >>> m = PersonalizedBudgetDistribution([2, 4], [1.0, 1.0], [30, 50], 2,
    ...                                    randomness=DerivedRandomness(SecretKey.from_seed(0)))
    >>> run = simulate_personalized(m, [np.array([[30, 0], [50, 0]])] * 8)
    >>> s = run.summary(mre_floor=1.0)
    >>> s["slots"], s["requirements"]["types"], s["max_user_window_spend_ratio"] <= 1.0
    (8, 2, True)

    References
    ----------
    X. Du et al. Personalized w-Event Privacy Protection for Infinite Data Streams.
    PVLDB 18(6), 2025: Definition 5 (every user's spend over their own window), the check of the
    summary.
    """

    mechanism: PersonalizedMechanism

    def summary(self, mre_floor: float) -> dict:
        summary = super().summary(mre_floor)
        types = self.mechanism.types
        ledger = self.ledger()
        assert isinstance(ledger, PersonalizedLedger)  # a personalized mechanism's new_ledger() makes one
        summary["options"] = {k: v for k, v in summary["options"].items() if not isinstance(v, np.ndarray)}
        # No single window budget: every type k has its own eps_k over its own w_k, so the absolute
        # "max_window_epsilon" of a central run would mix types; the per-type spend replaces it.
        del summary["max_window_epsilon"], summary["window_epsilon_bound"]
        summary["max_user_window_spend_ratio"] = ledger.max_spend_ratio()
        summary["user_window_spend_ratio_bound"] = float((self.mechanism.type_window_spend_bounds / types.epsilons).max())
        requirements = {
            "users": int(types.sizes.sum()),
            "types": types.count,
            "strictest_window": types.strictest[0],
            "strictest_epsilon": types.strictest[1],
        }
        if types.count <= _TABLE_LIMIT:
            requirements.update(windows=types.windows.tolist(), epsilons=types.epsilons.tolist(), sizes=types.sizes.tolist())
            spend = ledger.type_window_spend()
            summary["type_max_window_epsilon"] = (spend.max(axis=0) if spend.size else np.zeros(types.count)).tolist()
        summary["requirements"] = requirements
        return summary


def simulate_personalized(mechanism, type_counts: Iterable[np.ndarray],
                          progress: Callable[[Iterable], Iterable] | None = None) -> PersonalizedRun:
    """Step ``mechanism`` through every slot's ``(types, d)`` matrix (:meth:`~wevent.core.base.Mechanism.run`);
    the truth is each column sum."""
    slots = type_counts if isinstance(type_counts, np.ndarray) else [np.asarray(c) for c in type_counts]
    results = mechanism.run(progress(slots) if progress is not None else slots)
    truth = np.array([c.sum(axis=0) for c in slots] if isinstance(slots, list) else slots.sum(axis=1), dtype=float)
    return PersonalizedRun(mechanism, results, truth.reshape(len(results), mechanism.domain_size))
