"""The population ledger of population division: who may still be asked in the current window.

Population division (spec ldp-ids §1.5, §3, §4.6-4.7; [A] Thm 6.2) keeps every user to at most one
report in any ``w`` consecutive slots: users asked at slot ``t`` leave the available set ``U_A``
and come back only at the end of slot ``t + w - 1`` (recycling, RES-12). Samples are uniform
without replacement from ``U_A`` and independent of the data.

State: a bitmap of ``U_A`` and the ids taken in each of the last ``w`` slots (int32 for up to 2^31
users), at most ``N`` ids in all because nobody is taken twice in a window: ``4.1 N`` bytes, about
4 MB per million users.

Sampling ``k`` of the ``A`` available users (sorted ids out, as requests need them):

* while ``U_A`` is at least an eighth of the users and ``k <= A/2``: uniform draws from
  ``0..N-1`` kept when available are i.i.d. uniform on ``U_A``; ``np.unique`` of enough of them
  gives a sorted set of distinct users (sort, then drop repeats) which, by exchangeability, is a uniform random subset of
  its size; dropping a uniform random surplus leaves a uniform ``k``-subset. Cost ``O(k log k)``.
* otherwise: the sorted ids of ``U_A`` (``O(N)``) indexed by ``k`` sorted uniform positions.

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
>>> ledger.end_slot(2)  # end of slot 2: the users of slot 2 - w + 1 = 1 come back
>>> ledger.available
3
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..validation import check_positive_int, check_window

__all__ = ["PopulationLedger"]


class PopulationLedger:
    """The available set ``U_A`` of ``population`` users and the users taken in the last ``window`` slots."""

    def __init__(self, population: int, window: int) -> None:
        self.population = check_positive_int(population, "population N")
        self.window = check_window(window)
        self._id_type = np.int32 if self.population < 2**31 else np.int64
        self._free = np.ones(self.population, dtype=bool)
        self.available = self.population
        self._taken: list[list[np.ndarray]] = [[] for _ in range(self.window)]  # slot s at index s % w

    def in_window(self) -> int:
        """Users taken in the current window (not yet recycled)."""
        return self.population - self.available

    def take(self, slot: int, count: int, rng: np.random.Generator) -> np.ndarray:
        """Remove ``count`` uniformly chosen available users; their ids, sorted (int64)."""
        if count > self.available:  # the methods' pools make this impossible (spec §4.6): a bug if hit
            raise RuntimeError(f"population ledger ran short at slot {slot}: {count} wanted, {self.available} available")
        if count <= 0:
            return np.zeros(0, dtype=np.int64)
        if 8 * self.available >= self.population and 2 * count <= self.available:
            taken = self._by_rejection(count, rng)
        else:
            free = np.flatnonzero(self._free)
            taken = free[np.sort(rng.choice(free.size, count, replace=False, shuffle=False))]
        self._free[taken] = False
        self.available -= count
        self._taken[slot % self.window].append(taken.astype(self._id_type))
        return taken.astype(np.int64)

    def _by_rejection(self, count: int, rng: np.random.Generator) -> np.ndarray:
        share = self.available / self.population
        picked = np.zeros(0, dtype=self._id_type)
        while picked.size < count:
            # Draws of available users expected to give the missing distinct ones, plus a margin.
            missing = count - picked.size
            wanted = -self.available * math.log1p(-min(count / self.available, 0.99)) * missing / count
            draws = rng.integers(0, self.population, int(1.05 * wanted / share) + 64, dtype=self._id_type)
            picked = _sorted_distinct(np.concatenate([picked, draws[self._free[draws]]]))
        surplus = picked.size - count
        return np.delete(picked, rng.choice(picked.size, surplus, replace=False)) if surplus else picked

    def end_slot(self, slot: int) -> None:
        """Recycling at the end of ``slot``: the users of slot ``slot - w + 1`` are available again."""
        if slot < self.window:
            return
        oldest = (slot + 1) % self.window  # == (slot - w + 1) % w
        for taken in self._taken[oldest]:
            self._free[taken] = True
            self.available += taken.size
        self._taken[oldest] = []

    # --- state -------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        groups = [np.concatenate(g) if g else np.zeros(0, self._id_type) for g in self._taken]
        return {"taken": np.concatenate(groups), "sizes": np.array([g.size for g in groups], dtype=np.int64)}

    def load(self, state: dict[str, Any]) -> None:
        taken = np.asarray(state["taken"], dtype=self._id_type)
        bounds = np.concatenate([[0], np.cumsum(state["sizes"])])
        self._taken = [[taken[a:b].copy()] if b > a else [] for a, b in zip(bounds[:-1], bounds[1:])]
        self._free = np.ones(self.population, dtype=bool)
        self._free[taken] = False
        self.available = self.population - taken.size


def _sorted_distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique`` by sorting (numpy 2.4's ``unique`` is ~15x slower on 10^4-10^5 integers)."""
    ordered = np.sort(values)
    return ordered[np.concatenate([[True], ordered[1:] != ordered[:-1]])]
