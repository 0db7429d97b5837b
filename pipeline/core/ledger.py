"""Sliding-window budget ledger: the record every w-event guarantee is checked against.

Theorem 3 of Kellaris et al. (sliding-window composition): a stream mechanism whose slot ``i``
is ``eps_i``-DP is w-event ``epsilon``-DP iff every window of ``w`` consecutive slots spends at
most ``epsilon``. Each slot's spend is ``eps_{i,1}`` (dissimilarity, M1) plus ``eps_{i,2}``
(publication, M2). The ledger keeps both and reports the largest window sum, exact and rounded up
(:class:`~.accounting.ChargeMatrix`).

Examples
--------
>>> ledger = WindowLedger(window=3)
>>> for eps2 in (0.25, 0.0, 0.125, 0.1875):
...     ledger.record(BudgetEntry(slot=ledger.slots + 1, eps1=1 / 6, eps2=eps2))
>>> round(ledger.max_window_spend(), 6)
0.875
>>> ledger.worst_window()
(1, 3)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .accounting import ChargeMatrix, WindowSpend, window_sums

__all__ = ["BudgetEntry", "WindowLedger", "window_sums"]


@dataclass(frozen=True)
class BudgetEntry:
    """The budget one slot spent: ``eps1`` on dissimilarity (M1) and ``eps2`` on publication (M2)."""

    slot: int
    eps1: float
    eps2: float

    @property
    def total(self) -> float:
        return self.eps1 + self.eps2


class WindowLedger:
    """Every slot's (eps1, eps2) for a stream, with window-spend queries for tests and audits.

    A :class:`~.accounting.WindowAccount` of one group: every user pays every slot's spend.
    ``epsilon`` is the bound :meth:`tightest` measures against (the mechanism's own budget when
    :meth:`~.base.Mechanism.new_ledger` makes it; infinite when not given).
    """

    def __init__(self, window: int, epsilon: float = float("inf")) -> None:
        self.window = int(window)
        self.epsilon = float(epsilon)
        self._slots: list[int] = []
        self._eps1: list[float] = []
        self._eps2: list[float] = []

    @property
    def slots(self) -> int:
        return len(self._slots)

    def record(self, entry: BudgetEntry) -> None:
        """Charge one slot: a :class:`BudgetEntry` or a step result (anything with slot, eps1, eps2)."""
        if self._slots and entry.slot != self._slots[-1] + 1:
            raise ValueError(f"ledger slots must be consecutive: got {entry.slot} after {self._slots[-1]}")
        self._slots.append(int(entry.slot))
        self._eps1.append(float(entry.eps1))
        self._eps2.append(float(entry.eps2))

    @property
    def eps1(self) -> np.ndarray:
        return np.asarray(self._eps1)

    @property
    def eps2(self) -> np.ndarray:
        return np.asarray(self._eps2)

    def _charges(self) -> ChargeMatrix:
        return ChargeMatrix((self.eps1, self.eps2), [self.window], [self.epsilon])

    def window_spend(self) -> np.ndarray:
        """Total spend of the window ending at each recorded slot (exact, rounded up)."""
        return self._charges().window_spend()[:, 0]

    def max_window_spend(self) -> float:
        spend = self.window_spend()
        return float(spend.max()) if spend.size else 0.0

    def max_window_publication_spend(self) -> float:
        spend = window_sums(self.eps2, self.window)
        return float(spend.max()) if spend.size else 0.0

    def worst_window(self) -> tuple[int, int] | None:
        """First and last slot of the most expensive window (None while empty)."""
        worst = self.tightest()
        return None if worst is None else (self._slots[worst.first], self._slots[worst.last])

    def tightest(self) -> WindowSpend | None:
        """The most expensive window, against ``epsilon`` (None while empty)."""
        return self._charges().tightest()
