"""Per-user audit of a local stream: every user's spend and reports in every window of ``w`` slots.

The w-event guarantee of the local model is per user (Theorem 5.1 of the arXiv version of LDP-IDS): for every user and every
window of ``w`` consecutive slots, the budgets of the reports the user was asked for sum to at
most ``epsilon``; population division keeps every user to at most one report per window (Theorem 6.2 of the arXiv version).
:class:`UserLedger` replays :class:`LocalStepResult` records (the users asked in each phase and the
per-report budget) and keeps the largest per-user window spend and report count seen. A user
asked in a phase is charged whether or not the report arrived (the conservative reading).

It is an auditor, not mechanism state: ``O(N)`` memory, ``O(users asked)`` per slot, plus one
``O(N)`` maximum in slots where some user was asked individually.

>>> from pipeline.core.base import Strategy
>>> ledger = UserLedger(population=4, window=2)
>>> def slot(t, users, eps):
...     return LocalStepResult(t, np.zeros(1), Strategy.PUBLISH, 0.0, eps, users2=np.array(users))
>>> for t, users in enumerate([[0, 1], [2], [0], [3]], start=1):
...     _ = ledger.record(slot(t, users, 1.0))
>>> ledger.max_window_reports, ledger.max_window_spend
(1, 1.0)
>>> _ = ledger.record(slot(5, [3], 1.0))  # user 3 again, one slot after its last report
>>> ledger.max_window_reports
2
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from ..accounting import WindowSpend
from ..validation import check_positive_int, check_window
from .protocol import LocalStepResult

__all__ = ["UserLedger"]


class UserLedger:
    """Largest per-user window spend and window report count over the recorded slots.

    A :class:`~pipeline.core.accounting.WindowAccount` whose groups are the users: :meth:`tightest`
    is the costliest window of any user, against ``epsilon`` (infinite when not given).
    """

    def __init__(self, population: int, window: int, epsilon: float = float("inf")) -> None:
        self.population = check_positive_int(population, "population N")
        self.window = check_window(window)
        self.epsilon = float(epsilon)
        self._spend = np.zeros(self.population)
        self._reports = np.zeros(self.population, dtype=np.int32)
        self._everyone_reports = 0  # charges to every user, kept as a scalar
        self._individual = 0  # charges to listed users inside the window
        self._slots: deque[list[tuple[np.ndarray | None, float]]] = deque()
        self.max_window_spend = 0.0
        self.max_window_reports = 0
        self._recorded = 0
        self._tightest: WindowSpend | None = None

    def record(self, result: LocalStepResult) -> tuple[float, int]:
        """Charge one slot; the largest (spend, reports) of any user in the window ending here."""
        charges = [(users, eps) for users, eps in ((result.users1, result.eps1), (result.users2, result.eps2)) if eps > 0]
        for users, eps in charges:
            self._charge(users, eps, +1)
        self._slots.append(charges)
        # Charges to everyone are re-added from the window each slot so no running float sum drifts.
        spend = math.fsum(eps for entries in self._slots for users, eps in entries if users is None)
        reports = self._everyone_reports
        user = None
        if self._individual:
            top = int(self._spend.argmax())
            spend += float(self._spend[top])
            user = top if self._spend[top] > 0 else None
            reports += int(self._reports.max())
        if self._tightest is None or spend > self._tightest.spend:
            row = self._recorded
            self._tightest = WindowSpend(spend, self.epsilon, 0, max(0, row - self.window + 1), row, user)
        self._recorded += 1
        self.max_window_spend = max(self.max_window_spend, spend)
        self.max_window_reports = max(self.max_window_reports, reports)
        if len(self._slots) == self.window:  # the oldest slot is outside every later window
            for users, eps in self._slots.popleft():
                self._charge(users, eps, -1)
        return spend, reports

    def tightest(self) -> WindowSpend | None:
        """The costliest window of any user so far (None before the first slot)."""
        return self._tightest

    def _charge(self, users: np.ndarray | None, eps: float, sign: int) -> None:
        if users is None:
            self._everyone_reports += sign
        else:
            self._spend[users] += sign * eps  # ids within one phase are distinct
            self._reports[users] += sign
            self._individual += sign
