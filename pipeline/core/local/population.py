"""The population ledger of population division: who may still be asked in the current window.

Population division (spec ldp-ids §1.5, §3, §4.6-4.7; [A] Thm 6.2) keeps every user to at most one
report in any ``w`` consecutive slots: users asked at slot ``t`` leave the available set ``U_A``
and come back only at the end of slot ``t + w - 1`` (recycling, RES-12). Samples are uniform
without replacement from ``U_A`` and independent of the data.

Layout: one permutation of the user ids held as a circle. ``U_A`` is the arc of ``available``
ids starting at ``start``; right after it come the users taken in the current slot, then the
previous slot's, ..., and the users of slot ``t - w + 1`` end just before ``start``. Taking ``k``
users picks ``k`` uniform positions of the arc and swaps them to its end (a vectorised
swap-remove), so they join the newest group; recycling the oldest group only moves ``start``
back. The state is that permutation (int32 for up to 2^31 users: 4 MB per million users) and
the group sizes of the last ``w`` slots.

Examples
--------
>>> ledger = PopulationLedger(population=10, window=2)
>>> first = ledger.take(1, 3, np.random.default_rng(0))
>>> len(first), ledger.available
(3, 7)
>>> ledger.end_slot(1)  # slot 1 < w: nobody comes back yet
>>> second = ledger.take(2, 7, np.random.default_rng(1))
>>> sorted(set(first) | set(second)) == list(range(10)), ledger.available
(True, 0)
>>> ledger.end_slot(2)  # end of slot 2 = t: the users of slot t - w + 1 = 1 come back
>>> ledger.available
3
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..validation import check_positive_int, check_window

__all__ = ["PopulationLedger"]


class PopulationLedger:
    """The available set ``U_A`` of ``population`` users and the groups of the last ``window`` slots."""

    def __init__(self, population: int, window: int) -> None:
        self.population = check_positive_int(population, "population N")
        self.window = check_window(window)
        dtype = np.int32 if self.population < 2**31 else np.int64
        self._order = np.arange(self.population, dtype=dtype)
        self._start = 0
        self.available = self.population
        self._taken = np.zeros(self.window, dtype=np.int64)  # users taken at slot s, at index s % w

    def in_window(self) -> int:
        """Users taken in the current window (not yet recycled)."""
        return int(self._taken.sum())

    def take(self, slot: int, count: int, rng: np.random.Generator) -> np.ndarray:
        """Remove ``count`` uniformly chosen available users; their ids, sorted (int64)."""
        if count > self.available:  # the methods' pools make this impossible (spec §4.6): a bug if hit
            raise RuntimeError(f"population ledger ran short at slot {slot}: {count} wanted, {self.available} available")
        if count <= 0:
            return np.zeros(0, dtype=np.int64)
        available = self.available
        tail = available - count
        chosen = rng.choice(available, count, replace=False, shuffle=False)
        holes = chosen[chosen < tail]
        in_tail = np.zeros(count, dtype=bool)
        in_tail[chosen[chosen >= tail] - tail] = True
        fillers = tail + np.flatnonzero(~in_tail)
        holes = (self._start + holes) % self.population
        fillers = (self._start + fillers) % self.population
        self._order[holes], self._order[fillers] = self._order[fillers], self._order[holes]
        taken = self._order[(self._start + tail + np.arange(count)) % self.population]
        self.available = tail
        self._taken[slot % self.window] += count
        return np.sort(taken.astype(np.int64))

    def end_slot(self, slot: int) -> None:
        """Recycling at the end of ``slot``: the users of slot ``slot - w + 1`` are available again."""
        if slot < self.window:
            return
        oldest = (slot + 1) % self.window  # == (slot - w + 1) % w
        count = int(self._taken[oldest])
        self._start = (self._start - count) % self.population
        self.available += count
        self._taken[oldest] = 0

    # --- state -------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {"order": self._order.copy(), "start": self._start, "available": self.available, "taken": self._taken.copy()}

    def load(self, state: dict[str, Any]) -> None:
        self._order = np.asarray(state["order"]).copy()
        self._start = int(state["start"])
        self.available = int(state["available"])
        self._taken = np.asarray(state["taken"], dtype=np.int64).copy()
