"""The population ledger of population division: who may still be asked in the current window.

Population division (spec ldp-ids §1.5, §3, §4.6-4.7; [A] Thm 6.2) keeps every user to at most one
report in any ``w`` consecutive slots: users asked at slot ``t`` leave the available set ``U_A``
and come back only at the end of slot ``t + w - 1`` (recycling, RES-12). Samples are uniform
without replacement from ``U_A`` and independent of the data.

State: the ids of ``U_A`` in an array (in no particular order) and the ids taken in each of the
last ``w`` slots, int32 for up to 2^31 users: at most ``N`` ids in all, 4 MB per million users.

Sampling ``k`` of the ``A`` available users: ``k`` distinct uniform positions of the ``U_A`` array
(uniform draws with replacement until ``k`` distinct ones appear, which by exchangeability are a
uniform random subset of their number; a uniform random surplus is dropped; for ``k > A/2`` the
positions to keep are drawn instead). The users at those positions leave by a vectorised
swap-remove (the array's last users fill the holes) and recycled users are appended, so a call
costs ``O(k log k)`` (sorting the ids a request carries), whatever ``N``.

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
        self._free = np.arange(self.population, dtype=self._id_type)  # U_A in its first `available` entries
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
        available, tail = self.available, self.available - count
        if 2 * count <= available:
            chosen = _uniform_positions(available, count, rng)
        else:  # the complement of a uniform subset is uniform: draw the positions that stay
            chosen = np.ones(available, dtype=bool)
            chosen[_uniform_positions(available, available - count, rng)] = False
            chosen = np.flatnonzero(chosen)
        taken = self._free[chosen]
        in_tail = np.zeros(count, dtype=bool)
        in_tail[chosen[chosen >= tail] - tail] = True
        self._free[chosen[chosen < tail]] = self._free[tail + np.flatnonzero(~in_tail)]  # swap-remove
        self.available = tail
        taken.sort()
        self._taken[slot % self.window].append(taken)
        return taken.astype(np.int64)

    def end_slot(self, slot: int) -> None:
        """Recycling at the end of ``slot``: the users of slot ``slot - w + 1`` are available again."""
        if slot < self.window:
            return
        oldest = (slot + 1) % self.window  # == (slot - w + 1) % w
        for taken in self._taken[oldest]:
            self._free[self.available : self.available + taken.size] = taken
            self.available += taken.size
        self._taken[oldest] = []

    # --- state -------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        groups = [np.concatenate(g) if g else np.zeros(0, self._id_type) for g in self._taken]
        return {"available": self._free[: self.available].copy(), "taken": np.concatenate(groups),
                "sizes": np.array([g.size for g in groups], dtype=np.int64)}

    def load(self, state: dict[str, Any]) -> None:
        available = np.asarray(state["available"], dtype=self._id_type)
        taken = np.asarray(state["taken"], dtype=self._id_type)
        bounds = np.concatenate([[0], np.cumsum(state["sizes"])])
        self._taken = [[taken[a:b].copy()] if b > a else [] for a, b in zip(bounds[:-1], bounds[1:])]
        self._free = np.concatenate([available, taken])  # capacity N; past `available`: scratch
        self.available = available.size

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
