"""Per-user budget ledger of the personalized mechanisms, kept per requirement type.

Users of one type are charged the same at every slot, so the ledger stores a ``(slots, types)``
matrix of charges (DC's ``eps1`` and the publication's ``eps2``) and checks every window of each
type's own ``w_k`` against its ``eps_k``. :meth:`PersonalizedLedger.user_charges` expands it to
any user's charge at every slot through the user -> type map; that is the per-user view an audit
re-verifies (Definition 5 of Du et al.: ``sum_{k in W_i(t)} eps_{i,k} <= eps_i`` for every user i
and slot t).

>>> ledger = PersonalizedLedger(windows=[2, 3], epsilons=[1.0, 3.0])
>>> for slot, eps2 in enumerate([[0.5, 1.0], [0.0, 0.0], [0.25, 1.5]], start=1):
...     ledger.record_charges(slot, [0.25, 0.5], eps2)
>>> ledger.type_window_spend().tolist()
[[0.75, 1.5], [1.0, 2.0], [0.75, 4.0]]
>>> ledger.max_spend_ratio(), ledger.violations()
(1.3333333333333333, [(1, 3, 4.0, 3.0)])

Windows are summed exactly (:class:`~wevent.core.accounting.ChargeMatrix`): three charges of 0.1
exceed 0.3, whose float is below their exact sum, though ``0.1 + 0.1 + 0.1`` rounds above it.

>>> thirds = PersonalizedLedger(windows=[3], epsilons=[0.3])
>>> for slot in (1, 2, 3):
...     thirds.record_charges(slot, [0.0], [0.1])
>>> thirds.violations()
[(0, 3, 0.30000000000000004, 0.3)]
>>> ledger.user_charges(np.array([1, 0, 1]), user=1).tolist()
[0.75, 0.25, 0.5]

A live service keeps the last window of each type only, and finds the same spend:

>>> live = SlidingPersonalizedLedger(windows=[2, 3], epsilons=[1.0, 3.0])
>>> for slot, charges in enumerate(ledger.charges(), start=1):
...     spend = live.record_charges(slot, charges)
>>> spend.tolist() == ledger.type_window_spend()[-1].tolist(), live.tightest().group
(True, 1)
"""

from __future__ import annotations

import numpy as np

from ..accounting import ChargeMatrix, SlidingLedger, WindowSpend
from ..validation import ParameterError

__all__ = ["PersonalizedLedger", "SlidingPersonalizedLedger"]


class PersonalizedLedger:
    """Every slot's charge to every requirement type ``(w_k, eps_k)``, with window checks.

    A :class:`~wevent.core.accounting.WindowAccount` with one group per requirement type.
    """

    def __init__(self, windows, epsilons) -> None:
        self.windows = np.asarray(windows, dtype=np.int64)
        self.epsilons = np.asarray(epsilons, dtype=float)
        self._slots: list[int] = []
        self._eps1: list[np.ndarray] = []
        self._eps2: list[np.ndarray] = []
        self._matrices: dict[str, ChargeMatrix] = {}  # the exact sums of each part, until the next slot

    @classmethod
    def for_mechanism(cls, mechanism) -> "PersonalizedLedger":
        return cls(mechanism.types.windows, mechanism.types.epsilons)

    @property
    def slots(self) -> int:
        return len(self._slots)

    def record(self, result) -> None:
        """Add a :class:`.pwsm.PersonalizedStepResult`."""
        self.record_charges(result.slot, result.type_eps1, result.type_eps2)

    def record_charges(self, slot: int, eps1, eps2) -> None:
        """Add one slot's per-type charges (slots must be consecutive)."""
        if self._slots and slot != self._slots[-1] + 1:
            raise ParameterError(f"ledger slots must be consecutive: got {slot} after {self._slots[-1]}")
        eps1, eps2 = np.asarray(eps1, dtype=float), np.asarray(eps2, dtype=float)
        if eps1.shape != self.windows.shape or eps2.shape != self.windows.shape:
            raise ParameterError(f"a slot's charges must have one entry per type ({self.windows.size})")
        self._slots.append(int(slot))
        self._eps1.append(eps1)
        self._eps2.append(eps2)
        self._matrices.clear()

    def _matrix(self, rows: list[np.ndarray]) -> np.ndarray:
        return np.array(rows, dtype=float).reshape(len(rows), self.windows.size)

    @property
    def eps1(self) -> np.ndarray:
        """``(slots, types)`` DC charges."""
        return self._matrix(self._eps1)

    @property
    def eps2(self) -> np.ndarray:
        """``(slots, types)`` publication charges."""
        return self._matrix(self._eps2)

    def charges(self) -> np.ndarray:
        """``(slots, types)``: every slot's charge per type, ``eps1 + eps2`` (as floats)."""
        return self.eps1 + self.eps2

    def _matrix_of(self, part: str = "total") -> ChargeMatrix:
        """The exact window sums of ``part``, kept until the next slot (a summary reads them several times)."""
        if part not in self._matrices:
            parts = {"total": (self.eps1, self.eps2), "eps1": (self.eps1,), "eps2": (self.eps2,)}[part]
            self._matrices[part] = ChargeMatrix(parts, self.windows, self.epsilons)  # one pass per type, not per user
        return self._matrices[part]

    def type_window_spend(self, part: str = "total") -> np.ndarray:
        """``(slots, types)``: each type's spend over its own window ending at each slot, exact and
        rounded up.

        ``part`` is ``"total"``, ``"eps1"`` (DC only) or ``"eps2"`` (publications only).
        """
        return self._matrix_of(part).window_spend()

    def type_max_spend_ratio(self) -> np.ndarray:
        """Per type: the largest window spend over ``eps_k`` (must be <= 1)."""
        if not self.slots:
            return np.zeros(self.windows.size)
        return self.type_window_spend().max(axis=0) / self.epsilons

    def max_spend_ratio(self) -> float:
        """The largest ``spent / eps_i`` over every user and every window of their own ``w_i``."""
        return float(self.type_max_spend_ratio().max())

    def tightest(self) -> WindowSpend | None:
        """The window of the type whose spend comes closest to its ``eps_k`` (None while empty)."""
        return self._matrix_of().tightest() if self.slots else None

    def max_window_spend(self) -> float:
        """The largest absolute spend of any user's own window."""
        return float(self.type_window_spend().max()) if self.slots else 0.0

    def violations(self) -> list[tuple[int, int, float, float]]:
        """``(type, last slot, spend, eps)`` of every window that spends more than ``eps``, exactly
        (``spend`` rounded up)."""
        charges = self._matrix_of()
        spend = charges.window_spend()
        rows, types = np.nonzero(charges.overspent())
        return [(int(k), self._slots[r], float(spend[r, k]), float(self.epsilons[k])) for r, k in zip(rows, types)]

    # --- the per-user view ----------------------------------------------------------------------
    def user_charges(self, user_types: np.ndarray, user: int) -> np.ndarray:
        """User ``user``'s charge at every slot (``user_types`` maps users to types)."""
        return self.charges()[:, int(user_types[user])]


class SlidingPersonalizedLedger(SlidingLedger):
    """:class:`PersonalizedLedger`'s account as a live service keeps it: each type's charges over
    the longest window only, one column per type (:class:`~wevent.core.accounting.SlidingLedger`).

    Parameters
    ----------
    windows, epsilons : sequence
        Every requirement type's ``w_k`` and ``eps_k``.
    state : numpy.ndarray, optional
        The :meth:`state` of the ledger this one continues.
    """

    def __init__(self, windows, epsilons, state: np.ndarray | None = None) -> None:
        super().__init__(windows, epsilons, state)

    def charges(self, result) -> np.ndarray:
        """Every type's charge at ``result``'s slot (a :class:`.pwsm.PersonalizedStepResult`)."""
        return result.type_charges
