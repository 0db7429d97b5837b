"""Per-user audit of a local stream: every user's spend and reports in every window of ``w`` slots.

The w-event guarantee of the local model is per user (Theorem 5.1 of the arXiv version of LDP-IDS): for every user and every
window of ``w`` consecutive slots, the budgets of the reports the user was asked for sum to at
most ``epsilon``; population division keeps every user to at most one report per window (Theorem 6.2 of the arXiv version).
:class:`UserLedger` replays :class:`LocalStepResult` records (the users asked in each phase and the
per-report budget) and keeps the largest per-user window spend and report count seen. A user
asked in a phase is charged whether or not the report arrived (the conservative reading).

It is an auditor, not mechanism state: ``O(N)`` memory, ``O(users asked)`` per slot, plus one
``O(N)`` maximum in slots where some user was asked individually. Spends are exact: the charges
to everyone add up as fractions, and the listed users' as counts of each budget
(:class:`~wevent.core.accounting.UserCharges`).

>>> from wevent.core.base import Strategy
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

A live service cannot keep a number per user between slots; :class:`SlidingUserLedger` bounds
every user's window from two numbers per slot instead:

>>> live = SlidingUserLedger([2], [1.0])
>>> [live.record(slot(t, users, 0.5)).tolist() for t, users in enumerate([[0, 1], [2], [3]], start=1)]
[[0.5], [0.5], [0.5]]
"""

from __future__ import annotations

from collections import deque
from fractions import Fraction

import numpy as np

from ..accounting import SlidingLedger, UserCharges, WindowSpend
from ..exact import round_up, sum_up
from ..validation import check_positive_int, check_window
from .protocol import LocalStepResult

__all__ = ["UserLedger", "SlidingUserLedger"]


class UserLedger:
    """Largest per-user window spend and window report count over the recorded slots.

    A :class:`~wevent.core.accounting.WindowAccount` whose groups are the users: :meth:`tightest`
    is the costliest window of any user, against ``epsilon`` (infinite when not given).
    """

    def __init__(self, population: int, window: int, epsilon: float = float("inf")) -> None:
        self.population = check_positive_int(population, "population N")
        self.window = check_window(window)
        self.epsilon = float(epsilon)
        self._listed = UserCharges(self.population)
        self._reports = np.zeros(self.population, dtype=np.int32)
        # the window's charges to every user, exactly: an integer in units of 2^-_everyone_bits (every
        # float budget is a whole number of such units once the unit is its own or finer)
        self._everyone = 0
        self._everyone_bits = 0
        self._everyone_reports = 0  # charges to every user, kept as a scalar
        self._individual = 0  # charges to listed users inside the window
        self._slots: deque[list[tuple[np.ndarray | None, float]]] = deque()
        self.max_window_spend = 0.0
        self.max_window_reports = 0
        self._recorded = 0
        self._tightest: WindowSpend | None = None
        self._most = Fraction(-1)  # the exact spend of the tightest window

    def record(self, result: LocalStepResult) -> tuple[float, int]:
        """Charge one slot; the largest (spend, reports) of any user in the window ending here (the
        spend exact and rounded up)."""
        charges = [(users, eps) for users, eps in ((result.users1, result.eps1), (result.users2, result.eps2)) if eps > 0]
        for users, eps in charges:
            self._charge(users, eps, +1)
        self._slots.append(charges)
        exact, reports, user = Fraction(self._everyone, 1 << self._everyone_bits), self._everyone_reports, None
        if self._individual:
            top, listed = self._listed.fullest()
            exact += listed
            user = top if listed > 0 else None
            reports += int(self._reports.max())
        spend = round_up(exact)
        if exact > self._most:
            row = self._recorded
            self._most, self._tightest = exact, WindowSpend(spend, self.epsilon, 0, max(0, row - self.window + 1),
                                                            row, user)
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
        if users is None:  # exact: a running sum of integers never drifts
            numerator, denominator = float(eps).as_integer_ratio()  # the denominator a power of two
            bits = denominator.bit_length() - 1
            if bits > self._everyone_bits:
                self._everyone <<= bits - self._everyone_bits
                self._everyone_bits = bits
            self._everyone += sign * (numerator << (self._everyone_bits - bits))
            self._everyone_reports += sign
        else:
            self._listed.charge(users, eps, sign)
            self._reports[users] += sign  # ids within one phase are distinct
            self._individual += sign


class SlidingUserLedger(SlidingLedger):
    """The local model's account as a live service keeps it: a bound on every user's window from
    two charges per slot, with no number per user.

    A slot's first column is what the phases that asked every user charged (every user paid
    their sum); its second is the largest budget a phase charged to listed users only. A window's
    spend is the first column's sum plus the second's largest: population division asks a listed
    user at most once per window (Theorem 6.2 of the arXiv version), so no user paid more.
    :class:`UserLedger` keeps the exact per-user account in simulation, and ``wevent audit``
    re-checks every user from the published records.

    Parameters
    ----------
    windows : sequence of int
        ``[w]``.
    bounds : sequence of float
        ``[epsilon]``: every user's budget over a window.
    state : numpy.ndarray, optional
        The :meth:`state` of the ledger this one continues.
    """

    @property
    def columns(self) -> int:
        return 2  # charges to every user, the largest charge to listed users

    def charges(self, result: LocalStepResult) -> np.ndarray:
        phases = ((result.users1, result.eps1), (result.users2, result.eps2))
        everyone = sum_up([eps for users, eps in phases if users is None])
        listed = max([eps for users, eps in phases if users is not None], default=0.0)
        return np.array([everyone, listed])

    def window_spend(self, window: np.ndarray) -> np.ndarray:
        return np.array([sum_up([*window[:, 0], window[:, 1].max()])])
