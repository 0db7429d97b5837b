"""The population ledger of population division: who may still be asked in the current window.

Population division (spec ldp-ids §1.5, §3, §4.6-4.7; [A] Thm 6.2) keeps every user to at most one
report in any ``w`` consecutive slots: users asked at slot ``t`` leave the available set ``U_A``
and come back only at the end of slot ``t + w - 1`` (recycling, RES-12). Samples are uniform
without replacement from ``U_A`` and independent of the data.

Sampling ``k`` of the ``A`` available users: ``k`` distinct uniform ranks among the available ids
in increasing order (uniform draws with replacement until ``k`` distinct ones appear, which by
exchangeability are a uniform random subset of their number; a uniform random surplus is dropped;
for ``k > A/2`` the ranks to keep are drawn instead). The sample depends on the available *set*
only, not on the order it was built in, so the state need not record an order.

State: the users taken in each of the last ``w`` slots, each set as a bitset or sorted-id gaps,
whichever is shorter (:mod:`.user_sets`): at most ``N / 8`` bytes per slot, 125 KB per slot at a
million users. The available set is everything else. A slot's bytes are packed when the slot
takes users and reused until it is recycled, so saving the state re-encodes nothing that did not
change. In memory the available set is a boolean mask, built on the first ``take`` after a load.

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

from ..validation import ParameterError, check_positive_int, check_window
from .user_sets import pack_users, unpack_users

__all__ = ["PopulationLedger"]


class PopulationLedger:
    """The available set ``U_A`` of ``population`` users and the users taken in the last ``window`` slots."""

    def __init__(self, population: int, window: int) -> None:
        self.population = check_positive_int(population, "population N")
        self.window = check_window(window)
        self.available = self.population
        self._taken: list[np.ndarray | None] = [None] * self.window  # slot s at index s % w, sorted ids
        self._packed: list[bytes | None] = [None] * self.window  # their bytes, None until packed
        self._mask: np.ndarray | None = None  # True where available; None until a take needs it

    def in_window(self) -> int:
        """Users taken in the current window (not yet recycled)."""
        return self.population - self.available

    def take(self, slot: int, count: int, rng: np.random.Generator) -> np.ndarray:
        """Remove ``count`` uniformly chosen available users; their ids, sorted (int64)."""
        if count > self.available:  # the methods' pools make this impossible (spec §4.6): a bug if hit
            raise RuntimeError(f"population ledger ran short at slot {slot}: {count} wanted, {self.available} available")
        if count <= 0:
            return np.zeros(0, dtype=np.int64)
        available = self.available
        if 2 * count <= available:
            chosen = _uniform_positions(available, count, rng)
        else:  # the complement of a uniform subset is uniform: draw the ranks that stay
            chosen = np.ones(available, dtype=bool)
            chosen[_uniform_positions(available, available - count, rng)] = False
            chosen = np.flatnonzero(chosen)
        mask = self._available_mask()
        taken = np.flatnonzero(mask)[chosen].astype(np.int64)  # sorted: ranks ascend with ids
        mask[taken] = False
        self.available -= count
        index = slot % self.window
        before = self._taken[index]
        self._taken[index] = taken if before is None else np.union1d(before, taken)
        self._packed[index] = None
        return taken

    def end_slot(self, slot: int) -> None:
        """Recycling at the end of ``slot``: the users of slot ``slot - w + 1`` are available again."""
        if slot < self.window:
            return
        oldest = (slot + 1) % self.window  # == (slot - w + 1) % w
        back = self._taken[oldest]
        if back is not None:
            if self._mask is not None:
                self._mask[back] = True
            self.available += back.size
        self._taken[oldest] = self._packed[oldest] = None

    def _available_mask(self) -> np.ndarray:
        if self._mask is None:
            self._mask = np.ones(self.population, dtype=bool)
            for taken in self._taken:
                if taken is not None:
                    self._mask[taken] = False
        return self._mask

    # --- state -------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The taken set of every slot of the window, by ``slot % w`` (empty bytes: nobody)."""
        for index, taken in enumerate(self._taken):
            if taken is not None and self._packed[index] is None:
                self._packed[index] = pack_users(taken, self.population)
        return {"taken": [b"" if packed is None else packed for packed in self._packed]}

    def load(self, state: dict[str, Any]) -> None:
        packed = list(state["taken"])
        if len(packed) != self.window:
            raise ParameterError(f"a population state of {len(packed)} slots is not one of a window of {self.window}")
        self._packed = [bytes(p) if len(p) else None for p in packed]
        self._taken = [None if p is None else unpack_users(p, self.population) for p in self._packed]
        sizes = [t.size for t in self._taken if t is not None]
        self.available = self.population - sum(sizes)
        if self.available < 0:
            raise ParameterError("a population state takes more users than the population holds")
        self._mask = None


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
