"""The population ledger of population division: who may still be asked in the current window.

Population division (spec ldp-ids §1.5, §3, §4.6-4.7; [A] Thm 6.2) keeps every user to at most one
report in any ``w`` consecutive slots: users asked at slot ``t`` leave the available set ``U_A``
and come back only at the end of slot ``t + w - 1`` (recycling, RES-12). Samples are uniform
without replacement from ``U_A`` and independent of the data.

State: a bitmap of ``U_A`` and the ids taken in each of the last ``w`` slots (int32 for up to 2^31
users), at most ``N`` ids in all because nobody is taken twice in a window: ``4.1 N`` bytes, about
4 MB per million users.

Sampling ``k`` of the ``A`` available users (sorted ids out, as requests need them): the sorted
ids of ``U_A`` come from one scan of the bitmap; uniform positions ``0..A-1`` are drawn with
replacement until ``k`` distinct ones appear, which by exchangeability are a uniform random subset
of their number, and a uniform random surplus is dropped. When ``k > A/2`` the ``A - k`` users to
leave are drawn instead (the complement of a uniform subset is uniform). Cost ``O(N/64 + k log k)``.

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
        free = np.flatnonzero(self._free)
        if 2 * count <= free.size:
            taken = free[_uniform_positions(free.size, count, rng)]
        else:
            taken = np.delete(free, _uniform_positions(free.size, free.size - count, rng))
        self._free[taken] = False
        self.available -= count
        self._taken[slot % self.window].append(taken.astype(self._id_type))
        return taken

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


def _uniform_positions(size: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count <= size / 2`` distinct positions of ``0..size-1``, a uniform random subset, sorted."""
    kind = np.int32 if size < 2**31 else np.int64  # 32-bit positions sort twice as fast
    picked = np.zeros(0, dtype=kind)
    while picked.size < count:
        # Draws expected to give the missing positions (coupon collector), plus a margin.
        wanted = -size * math.log1p(-count / size) * (count - picked.size) / count
        ordered = np.sort(np.concatenate([picked, rng.integers(0, size, int(1.05 * wanted) + 64, dtype=kind)]))
        picked = ordered[np.concatenate([[True], ordered[1:] != ordered[:-1]])]  # (np.unique is ~15x slower)
    surplus = picked.size - count
    return np.delete(picked, rng.choice(picked.size, surplus, replace=False)) if surplus else picked
