"""Sliding-window budget ledger: the record every w-event guarantee is checked against.

Theorem 3 of Kellaris et al. (sliding-window composition): a stream mechanism whose slot ``i``
is ``eps_i``-DP is w-event ``epsilon``-DP iff every window of ``w`` consecutive slots spends at
most ``epsilon``. Each slot's spend is ``eps_{i,1}`` (dissimilarity, M1) plus ``eps_{i,2}``
(publication, M2). The ledger keeps both and reports the largest window sum.

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


def window_sums(per_slot: np.ndarray, window: int) -> np.ndarray:
    """Sum over the window ending at every slot: ``out[i] = sum(per_slot[max(0, i-w+1) : i+1])``.

    Each window is summed directly (not as a difference of running totals), so the result has
    the accuracy of a sum of ``w`` terms however long the stream is. The terms are added oldest
    first, as ``sum(list_of_the_window)`` adds them, so a live ledger that sums its last ``w``
    charges that way gets the very same float (numpy's reductions may reorder a sum).

    >>> window_sums(np.array([1.0, 2.0, 3.0, 4.0]), 2).tolist()
    [1.0, 3.0, 5.0, 7.0]
    """
    values = np.asarray(per_slot, dtype=float)
    padded = np.concatenate([np.zeros(window - 1), values])
    out = np.zeros(values.size)
    for age in range(window):  # oldest term first; the zeros before slot 1 add nothing
        out += padded[age : age + values.size]
    return out


class WindowLedger:
    """Every slot's (eps1, eps2) for a stream, with window-spend queries for tests and audits."""

    def __init__(self, window: int) -> None:
        self.window = int(window)
        self._slots: list[int] = []
        self._eps1: list[float] = []
        self._eps2: list[float] = []

    @property
    def slots(self) -> int:
        return len(self._slots)

    def record(self, entry: BudgetEntry) -> None:
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

    def window_spend(self) -> np.ndarray:
        """Total spend of the window ending at each recorded slot."""
        return window_sums(self.eps1 + self.eps2, self.window)

    def max_window_spend(self) -> float:
        spend = self.window_spend()
        return float(spend.max()) if spend.size else 0.0

    def max_window_publication_spend(self) -> float:
        spend = window_sums(self.eps2, self.window)
        return float(spend.max()) if spend.size else 0.0

    def worst_window(self) -> tuple[int, int] | None:
        """First and last slot of the most expensive window (None while empty)."""
        spend = self.window_spend()
        if not spend.size:
            return None
        end = int(np.argmax(spend))
        return self._slots[max(0, end - self.window + 1)], self._slots[end]
