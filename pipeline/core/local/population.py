"""The population ledger of population division: who may still be asked in the current window.

Population division (Section 6 and Theorem 6.2 of the arXiv version of LDP-IDS) keeps every user to at most one
report in any ``w`` consecutive slots: users asked at slot ``t`` leave the available set ``U_A``
and come back only at the end of slot ``t + w - 1`` (recycling: the users of ``t - w + 1`` return at the end of ``t``). Samples are uniform
without replacement from ``U_A`` and independent of the data.

Sampling ``k`` of the ``A`` available users: ``k`` distinct uniform ranks among the available ids
in increasing order (uniform draws with replacement until ``k`` distinct ones appear, which by
exchangeability are a uniform random subset of their number; a uniform random surplus is dropped;
for ``k > A/2`` the ranks to keep are drawn instead). The sample depends on the available *set*
only, not on the order it was built in, so the state need not record an order.

State: the users of each take of the last ``w`` slots (M1's and M2's samples), each set as a
bitset or sorted-id gaps, whichever is shorter (:mod:`.user_sets`): at most ``N / 8`` bytes per
take, 125 KB at a million users. The available set is everything else. A take's bytes are packed
once and reused until its slot is recycled, so saving the state re-encodes nothing that did not
change, and they equal the packed users of the request that asked them. In memory the available set is a boolean mask, built on the first ``take`` after a load;
until then a restored ledger costs no ``O(N)`` work (a slot's set is unpacked when it is needed).

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
from typing import Any, TypeVar

import numpy as np

from ..validation import ParameterError, check_positive_int, check_window
from .user_sets import count_users, pack_users, unpack_users

__all__ = ["PopulationLedger"]


class PopulationLedger:
    """The available set ``U_A`` of ``population`` users and the users taken in the last ``window`` slots."""

    def __init__(self, population: int, window: int) -> None:
        self.population = check_positive_int(population, "population N")
        self.window = check_window(window)
        self.available = self.population
        # Slot s at index s % w: the users of each of its takes, as sorted ids and as bytes (either
        # None until needed: bytes are packed when the state is saved, ids unpacked when used).
        self._taken: list[list[np.ndarray | None]] = [[] for _ in range(self.window)]
        self._packed: list[list[bytes | None]] = [[] for _ in range(self.window)]
        self._sizes = [0] * self.window
        self._mask: np.ndarray | None = None  # True where available; None until a take needs it

    def in_window(self) -> int:
        """Users taken in the current window (not yet recycled)."""
        return self.population - self.available

    def take(self, slot: int, count: int, rng: np.random.Generator) -> np.ndarray:
        """Remove ``count`` uniformly chosen available users; their ids, sorted (int64)."""
        if count > self.available:  # the methods' pools make this impossible: a bug if hit
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
        self._taken[index].append(taken)
        self._packed[index].append(None)
        self._sizes[index] += count
        return taken

    def end_slot(self, slot: int) -> None:
        """Recycling at the end of ``slot``: the users of slot ``slot - w + 1`` are available again."""
        if slot < self.window:
            return
        oldest = (slot + 1) % self.window  # == (slot - w + 1) % w
        if self._mask is not None:
            for back in self._taken_in(oldest):
                self._mask[back] = True
        self.available += self._sizes[oldest]
        self._taken[oldest], self._packed[oldest], self._sizes[oldest] = [], [], 0

    def _taken_in(self, index: int) -> list[np.ndarray]:
        """The users of each take of the slot at ``index``, unpacked on first use after a load."""
        taken, packed = self._taken[index], self._packed[index]
        unpacked = []
        for i, (users, blob) in enumerate(zip(taken, packed)):
            if users is None:  # every take is held unpacked, packed, or both
                users = taken[i] = unpack_users(_held(blob), self.population)
            unpacked.append(users)
        return unpacked

    def _available_mask(self) -> np.ndarray:
        if self._mask is None:
            self._mask = np.ones(self.population, dtype=bool)
            for index in range(self.window):
                for taken in self._taken_in(index):
                    self._mask[taken] = False
        return self._mask

    # --- state -------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The users of every take of every slot of the window, by ``slot % w``."""
        for taken, packed in zip(self._taken, self._packed):
            for i, users in enumerate(taken):
                if packed[i] is None:
                    packed[i] = pack_users(_held(users), self.population)
        return {"taken": [list(packed) for packed in self._packed]}

    def load(self, state: dict[str, Any]) -> None:
        slots = list(state["taken"])
        if len(slots) != self.window:
            raise ParameterError(f"a population state of {len(slots)} slots is not one of a window of {self.window}")
        self._packed = [[bytes(p) for p in packed] for packed in slots]
        self._taken = [[None] * len(packed) for packed in self._packed]  # unpacked when recycled or a take needs them
        self._sizes = [sum(count_users(_held(p)) for p in packed) for packed in self._packed]
        self.available = self.population - sum(self._sizes)
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


T = TypeVar("T")


def _held(value: T | None) -> T:
    """One form of a take, which the ledger holds whenever the other form is None."""
    assert value is not None, "a take is held unpacked, packed, or both"
    return value
