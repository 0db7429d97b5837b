"""The two publication schedules LDP-IDS adapts from Kellaris et al. (LBD/LPD and LBA/LPA).

Both budget division (amounts are budgets) and population division (amounts are users) use them:

* :class:`Distribution` (LBD, LPD): a publication may take half of what the window's publication
  pool has left, ``remaining = pool - (amounts of the previous w-1 slots)``; an amount leaves the
  window ``w`` slots later and is thereby recycled.
* :class:`Absorption` (LBA, LPA): every slot owns one unit; a publication absorbs the units of
  the slots skipped since the last one (``k <= w`` in all) and the next ``k - 1`` slots are
  nullified. Unit counts stay integers (so no floating-point ratio decides a range), with the literal
  init ``k_0 = 0`` (the algorithms' ``eps_{l,2} = 0``), under
  which the first publication at slot t may take ``min(t + 1, w)`` units; no window ever holds
  more than ``w`` units (checked exhaustively in the tests).

>>> a = Absorption(window=3)
>>> a.nullified(1), a.units(1)
(False, 2)
>>> a.published(1, 2); a.nullified(2), a.units(3)
(True, 1)
>>> d = Distribution(pool=8, window=3)
>>> d.remaining(); d.record(1, 4); d.remaining()
8
4
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Distribution", "Absorption"]


class Distribution:
    """``pool`` minus the publication amounts of the previous ``w - 1`` slots."""

    def __init__(self, pool, window: int) -> None:
        self.pool = pool
        self.window = window
        self._recent = np.zeros(window - 1, dtype=np.asarray(pool).dtype)  # amount of slot s at s % (w-1)

    def remaining(self):
        # Summed afresh each slot so that no running total can drift.
        return self.pool - self._recent.sum().item()

    def record(self, slot: int, amount) -> None:
        if self.window > 1:
            self._recent[slot % (self.window - 1)] = amount

    def state(self) -> dict[str, Any]:
        return {"recent": self._recent.copy()}

    def load(self, state: dict[str, Any]) -> None:
        self._recent = np.array(state["recent"], dtype=self._recent.dtype)


class Absorption:
    """Last publication slot ``l`` and its integer unit count ``k_l`` (init 0 and 0)."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.last = 0
        self.last_units = 0

    def nullified(self, slot: int) -> bool:
        """Whether ``slot`` lies in the ``k_l - 1`` slots after the last publication."""
        return slot - self.last <= self.last_units - 1

    def units(self, slot: int) -> int:
        """Units a publication at ``slot`` would get: its own plus those skipped, at most ``w``."""
        return min(slot - (self.last + self.last_units - 1), self.window)

    def published(self, slot: int, units: int) -> None:
        self.last, self.last_units = slot, units

    def state(self) -> dict[str, Any]:
        return {"last": self.last, "last_units": self.last_units}

    def load(self, state: dict[str, Any]) -> None:
        self.last, self.last_units = int(state["last"]), int(state["last_units"])
