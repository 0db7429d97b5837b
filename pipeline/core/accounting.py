"""Budget accounting: one way to charge slots and to check every window of ``w`` slots.

Theorem 3 of Kellaris et al. (sliding-window composition) makes the w-event guarantee a check on
sums: a stream whose slot ``i`` spends ``eps_i`` is w-event ``epsilon``-DP iff every window of
``w`` consecutive slots spends at most ``epsilon``. Who pays a slot's spend depends on the model,
but it is always a *charge matrix*:

* **groups** of users charged alike at every slot, one column each with its own window and bound:
  one group in the central model, one per requirement type ``(w_k, eps_k)`` in the personalized
  model (Du et al., Alg. 2), and in the local model the phases that ask every user;
* **listed** charges of the local model, which fall on the users a phase lists (population
  division, Ren et al. §5.1) on top of group 0.

A group's window spend is the sum of its column over the window (:func:`window_sums`); a listed
user's adds their own charges in the window (:class:`UserCharges`). :class:`ChargeMatrix` computes
both and finds the first window over its bound: it is what ``wevent audit`` checks the published
records with.

Every check is exact (:mod:`wevent.core.exact`): the charges are floats, and floats are exact
rationals, so a window passes when the exact sum of its charges is at most its bound, with no
tolerance. A spend shown as a float (:attr:`WindowSpend.spend`, :func:`window_sums`) is that
exact sum rounded up: it exceeds a bound exactly when the spend does.

The ledgers that live beside a mechanism answer the same questions slot by slot: they are
:class:`WindowAccount` s, and every mechanism makes its own, in two forms. ``new_ledger``
(:meth:`wevent.core.base.Mechanism.new_ledger`: the core's ``WindowLedger``,
``PersonalizedLedger`` and ``UserLedger``) keeps every slot, for simulations and tests;
``sliding_ledger`` (:class:`SlidingLedger` and its per-model forms) keeps only the charges the
next window needs, which a live service stores between slots (the stream layer's M2 does, in its
table). The per-model charge arithmetic lives in those classes and nowhere else.

:class:`Budget` is a stream's budget once its parts are settled: what the host mechanism may
spend in a window, and what a query index on raw counts (the decayed structure of Sun et al.
2019) reserves from every window for itself: by sequential composition the two shares add up.

Examples
--------
>>> shared = np.array([[0.25, 0.5], [0.5, 0.5], [0.25, 1.0]])
>>> charges = ChargeMatrix(shared, windows=[2, 3], bounds=[1.0, 1.5])
>>> charges.window_spend().tolist()
[[0.25, 0.5], [0.75, 1.0], [0.75, 2.0]]
>>> charges.first_overspend()
WindowSpend(spend=2.0, bound=1.5, group=1, first=0, last=2, user=None)

A live service charges the same slots one at a time, keeping only the last window:

>>> live = SlidingLedger([2, 3], [1.0, 1.5])
>>> for slot, row in enumerate(shared, start=1):
...     spend = live.record_charges(slot, row)
>>> spend.tolist(), live.tightest() == charges.first_overspend()
([0.75, 2.0], True)

Ten slots of 0.1 spend a little more than 1 (0.1 is ``1 + 2^-54`` tenths): an epsilon of 1 does
not cover them, whatever a float sum rounds them to.

>>> ChargeMatrix(np.full(10, 0.1), windows=[10], bounds=[1.0]).first_overspend()
WindowSpend(spend=1.0000000000000002, bound=1.0, group=0, first=0, last=9, user=None)

Where accounting lives
----------------------

**Accounting lives in the core.** `pipeline/core/accounting.py` holds a stream's `Budget` (the
total, the host's share and the reserved share, settled when the config loads), the
`WindowAccount` protocol every ledger follows (charge a slot; name the window closest to its
bound as a `WindowSpend`), the `SlidingLedger` and the `ChargeMatrix`. Every mechanism makes its
own ledgers: `new_ledger()` keeps every slot (`WindowLedger`, `PersonalizedLedger`,
`UserLedger`), for simulation and tests; `sliding_ledger()` keeps the last window only
(`SlidingLedger`, `SlidingPersonalizedLedger`, `SlidingUserLedger`), for M2, which stores its
state in its table value. `wevent audit` re-checks the published records with the
`ChargeMatrix`. The stream layer computes no charge: its per-model logic only says what a
window's spend shows in records and gauges. The device fleet's `DeviceLedger`
(`producers/device_fleet.py`) names its fullest window in the same terms but charges its own
way, because it admits requests before any report exists ("Where accounting lives", below).

**One accounting path.** `pipeline/core/accounting.py` is where budgets are counted. A slot's
spend is a charge matrix: one group in the central model, one per requirement type in the
personalized model, the phases that ask everyone in the local model, plus the charges of the
users a phase lists. Every window of every group or user is summed against its bound, exactly
(`pipeline/core/exact.py`: floats as integers in units of a common power of two), and a spend
shown as a float is the exact one rounded up, so it exceeds a bound exactly when the spend
does. Mechanisms divide budgets downwards: every budget a mechanism records is the largest
multiple of its epsilon's grid (the spacing of floats at epsilon) that its share allows, so `w`
slots of `epsilon / w` never add up to more than epsilon, and every sum of budgets within
epsilon is exact in floating point. Each
mechanism makes its own ledger, in two forms: `new_ledger()` keeps every slot (simulation and
tests), `sliding_ledger()` keeps only the charges its next window needs, which M2 stores in its
table and restores at every release (a state written before holds the same matrix). How a
model charges its users lives in its core ledgers, never in the stream layer; `wevent audit`
checks the records through the same `ChargeMatrix`. The device fleet's ledger answers the same
question (`DeviceLedger.tightest()`, the fullest user window, which `wevent devices` prints at
start) but charges its own way: it admits a request before any report leaves, refusing each
user it would take over epsilon, where a mechanism's ledger records a release after the fact;
it charges a request once by its digest; and it keeps every charge's users on disk.

**One budget.** A stream's budget is settled once, when the config is loaded: a total epsilon,
the share a query index (modes B and C) reserves from every window, and what is left for the
mechanism, the largest float whose exact sum with the reserved share fits the total. Audit
records carry the total and the reserved share as configured. The gauges
`wevent_window_epsilon_spent` (the mechanism's spend, rounded up), `wevent_window_epsilon_reserved`
and `wevent_window_epsilon_budget` (the total) say the same, and `WeventWindowSpendAboveBudget`
fires when spent + reserved > budget, compared exactly (the float sum, and its rounding error
when the sum equals the budget), so an overspend of either share shows, by however little. No
budget below 1e-290 is accepted anywhere (the config, every `--epsilon`, personalized
requirements, a query index, the core's constructors: `wevent.core.validation.MIN_EPSILON`):
below it the noise of a slot's share has no finite scale.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol, runtime_checkable

import numpy as np

from .exact import as_integers, integers_up, round_down, round_up, sum_up, unit_exponent, window_integer_sums
from .validation import check_epsilon, check_window

__all__ = ["Budget", "WindowSpend", "WindowAccount", "SlidingLedger", "ChargeMatrix", "UserCharges", "window_sums",
           "latest_window_spend", "slide_charges"]


@dataclass(frozen=True)
class Budget:
    """A stream's w-event budget and how it is shared, settled once when the stream is configured.

    Parameters
    ----------
    total : float
        ``epsilon``: the most any window of ``window`` slots may spend, all parts together.
    window : int
        ``w``.
    reserved : float
        The share a query index takes from every window for itself (0 without one).

    Attributes
    ----------
    host : float
        What the host mechanism may spend in a window: the largest float at most ``total -
        reserved``, exactly. Records and metrics carry ``total`` and ``reserved`` as they are
        here, and a window passes when the host's spend plus ``reserved`` is at most ``total``, so
        an overspend of either part shows.

    Examples
    --------
    >>> Budget(1.0, 10, reserved=0.25).host
    0.75
    """

    total: float
    window: int
    reserved: float = 0.0

    def __post_init__(self) -> None:
        check_epsilon(self.total, "total epsilon")
        check_window(self.window)
        if self.reserved:
            _host_share(self.total, self.reserved)  # a share that is not a budget, or leaves the host nothing

    @property
    def host(self) -> float:
        return _host_share(self.total, self.reserved) if self.reserved else self.total


def _host_share(total: float, reserved: float) -> float:
    from .decayed import host_epsilon  # noqa: PLC0415 - the query index's rule, where the index (importing us) lives

    return host_epsilon(total, reserved)


@dataclass(frozen=True)
class WindowSpend:
    """One window's spend against its bound: rows ``first..last`` (0-based slots of the ledger) of
    group ``group``, and the ``user`` who spent it when one listed user did (None: the whole group)."""

    spend: float
    bound: float
    group: int
    first: int
    last: int
    user: int | None = None

    @property
    def ratio(self) -> float:
        return self.spend / self.bound

    def exceeds(self) -> bool:
        """Whether the window spent more than its bound, exactly: ``spend`` is the exact spend
        rounded up, and a float bound lies below the one exactly when it lies below the other."""
        return self.spend > self.bound


@runtime_checkable
class WindowAccount(Protocol):
    """What a window ledger offers: charge one slot, and say which window comes closest to its bound.

    ``record`` takes a mechanism's step result for its next slot (slots come in order) and charges
    it to the groups or users who paid; ``tightest`` is the window with the largest spend over its
    bound so far (None before any slot; a :class:`SlidingLedger` knows the windows ending at its
    newest slot only). A ledger whose ``tightest().exceeds()`` recorded a mechanism that broke its
    guarantee.
    """

    def record(self, result) -> object: ...

    def tightest(self) -> WindowSpend | None: ...


def window_sums(per_slot: np.ndarray, window: int) -> np.ndarray:
    """Sum over the window ending at every slot: ``out[i] = sum(per_slot[max(0, i-w+1) : i+1])``.

    ``per_slot`` is one value per slot, or a ``(slots, groups)`` matrix summed per column. Each
    sum is exact (as integers in units of the values' smallest power of two) and then rounded up
    to a float, so a live ledger that sums the same window gets the very same float however long
    the stream is, and no window over a float bound shows as within it.

    >>> window_sums(np.array([1.0, 2.0, 3.0, 4.0]), 2).tolist()
    [1.0, 3.0, 5.0, 7.0]
    >>> float(window_sums(np.full(10, 0.1), 10)[-1]), sum([0.1] * 10)  # exactly 1.0000000000000000555...
    (1.0000000000000002, 0.9999999999999999)
    """
    values = np.asarray(per_slot, dtype=float)
    exponent = unit_exponent(values)
    return integers_up(window_integer_sums(as_integers(values, exponent), window), exponent)


def latest_window_spend(recent: np.ndarray, windows: Sequence[int] | np.ndarray) -> np.ndarray:
    """Every group's spend over its own window ending at the newest row of ``recent`` (slots, groups),
    exactly and rounded up, as :func:`window_sums` gives it: a live service and a simulation of the
    same stream agree to the bit.

    >>> latest_window_spend(np.array([[0.5, 1.0], [0.25, 2.0], [0.125, 4.0]]), [2, 3]).tolist()
    [0.375, 7.0]
    """
    recent = np.asarray(recent, dtype=float)
    lengths = np.asarray(windows, dtype=np.int64)
    return np.array([sum_up(recent[-int(w):, k]) if len(recent) else 0.0 for k, w in enumerate(lengths.tolist())])


def slide_charges(recent: np.ndarray, charges: np.ndarray, keep: int) -> tuple[np.ndarray, np.ndarray]:
    """A new slot's ``charges`` (one per group) after the ``recent`` rows: the rows of the window
    ending at the new slot (at most ``keep``), and those the next slot's window still needs
    (at most ``keep - 1``): what a live service stores between slots."""
    charges = np.asarray(charges, dtype=float)
    window = np.vstack([np.asarray(recent, dtype=float).reshape(-1, charges.size), charges[None, :]])[-keep:]
    return window, (window[1:] if len(window) == keep else window)


class SlidingLedger:
    """A mechanism's ledger as a live service keeps it: only the charges its next window needs.

    A :class:`WindowAccount` of bounded size. :meth:`record` charges a slot (slots come in order)
    and returns every group's spend over its own window ending there, exact and rounded up as
    :func:`window_sums` gives it, so a service and a simulation of the same stream agree to the bit.
    :meth:`state` is what the service stores between slots, the charges of the slots the next
    window still needs (one row each, one column per charge :meth:`charges` makes); a ledger made
    with that state continues where this one stopped. Older windows are forgotten, so
    :meth:`tightest` is the group closest to its bound in the window ending at the newest slot.

    This class charges every user of a group alike: with one group (the central model), every
    user pays each slot's ``eps1 + eps2``. The personalized and local models charge differently
    and derive their own; every mechanism makes the one that fits it
    (:meth:`wevent.core.base.Mechanism.sliding_ledger`).

    Parameters
    ----------
    windows : sequence of int
        Every group's window ``w_k``.
    bounds : sequence of float
        Every group's budget over its own window.
    state : numpy.ndarray, optional
        ``(slots, columns)``: the :meth:`state` of the ledger this one continues (nothing is
        charged yet when omitted).

    Examples
    --------
    >>> from wevent.core.ledger import BudgetEntry
    >>> ledger = SlidingLedger([3], [1.0])
    >>> [ledger.record(BudgetEntry(t, 0.125, eps2)).tolist() for t, eps2 in enumerate([0.25, 0.0, 0.25, 0.125], 1)]
    [[0.375], [0.5], [0.875], [0.75]]
    >>> ledger.tightest()
    WindowSpend(spend=0.75, bound=1.0, group=0, first=1, last=3, user=None)
    >>> SlidingLedger([3], [1.0], ledger.state()).state().tolist()  # the two slots the next window needs
    [[0.375], [0.25]]

    References
    ----------
    G. Kellaris, S. Papadopoulos, X. Xiao, D. Papadias. Differentially Private Event Sequences
    over Infinite Streams. PVLDB 7(12), 2014: Theorem 3 (sliding-window composition).
    """

    def __init__(self, windows, bounds, state: np.ndarray | None = None) -> None:
        self.windows = np.asarray(windows, dtype=np.int64)
        self.bounds = np.asarray(bounds, dtype=float)
        self.keep = int(self.windows.max())  # the rows of the longest window
        self.recent = np.zeros((0, self.columns)) if state is None else np.asarray(state, dtype=float)
        self._spend: np.ndarray | None = None  # every group's window ending at the newest slot
        self._newest = -1  # 0-based, as WindowSpend counts slots

    @property
    def columns(self) -> int:
        """The charges a slot makes: one per group."""
        return int(self.windows.size)

    def charges(self, result) -> np.ndarray:
        """What ``result``'s slot charged, one number per column: every user ``eps1 + eps2``
        (exact for a mechanism's budgets, which lie on its grid; rounded up otherwise)."""
        return np.array([sum_up([result.eps1, result.eps2])])

    def window_spend(self, window: np.ndarray) -> np.ndarray:
        """Every group's spend over its own window, from the rows of the longest one (oldest first)."""
        return latest_window_spend(window, self.windows)

    def record(self, result) -> np.ndarray:
        """Charge ``result``'s slot; every group's spend over its own window ending there."""
        return self.record_charges(result.slot, self.charges(result))

    def record_charges(self, slot: int, charges) -> np.ndarray:
        """Charge 1-based ``slot`` (the one after the last charged) ``charges``, one per column."""
        window, self.recent = slide_charges(self.recent, charges, self.keep)
        self._spend, self._newest = self.window_spend(window), int(slot) - 1
        return self._spend

    def tightest(self) -> WindowSpend | None:
        """The group whose window ending at the newest slot comes closest to its bound (None before any)."""
        if self._spend is None:
            return None
        group = _closest(self._spend > self.bounds, self._spend / self.bounds)
        return WindowSpend(float(self._spend[group]), float(self.bounds[group]), group,
                           max(0, self._newest - int(self.windows[group]) + 1), self._newest)

    def state(self) -> np.ndarray:
        """The charges of the slots the next window still needs (``(slots, columns)``, oldest first)."""
        return self.recent


def _closest(over, ratios) -> int:
    """The first group that overspends, else the first with the largest ratio of spend to bound: an
    overspend is picked even where a rounded ratio ties with a window exactly at its bound."""
    over = np.asarray(over, dtype=bool)
    return int(np.flatnonzero(over)[0]) if over.any() else int(np.argmax(ratios))


class ChargeMatrix:
    """Every slot's charges, by group and by listed user, with every window's exact spend and check.

    Parameters
    ----------
    shared : numpy.ndarray or tuple of numpy.ndarray
        ``(slots, groups)``: what every user of each group paid at each slot; a tuple of such
        matrices holds the parts of one charge (``eps1`` and ``eps2``), added exactly.
    windows, bounds : sequence
        Every group's window ``w_k`` and budget ``eps_k`` (an infinite budget bounds nothing).
    reserved : float
        A share taken from every window of every group besides these charges (a query index's).
    listed : list, optional
        Per slot, the ``(users, epsilon)`` charges that fall on listed users only, as positions in
        a vector of ``population`` users; each adds to group 0's shared charges. A user listed
        twice in one charge pays twice.
    population : int
        The length of the users' vector (the largest position plus one at least).

    Notes
    -----
    Every charge, bound and reserved share is written as an integer in units of the largest power
    of two that divides them all (:func:`~wevent.core.exact.as_integers`); window sums of those
    integers are exact, however long the ledger and however far apart the charges' magnitudes.
    """

    def __init__(self, shared, windows, bounds, *, reserved: float = 0.0,
                 listed: list[list[tuple[np.ndarray, float]]] | None = None, population: int = 0) -> None:
        parts = [np.asarray(part, dtype=float) for part in (shared if isinstance(shared, tuple) else (shared,))]
        self.parts = [part[:, None] if part.ndim == 1 else part for part in parts]
        self.windows = np.asarray(windows, dtype=np.int64)
        self.bounds = np.asarray(bounds, dtype=float)
        self.reserved = float(reserved)
        self.listed = listed
        self.population = int(population)
        self._exact: tuple[np.ndarray, np.ndarray, int] | None = None  # window spends, bounds, unit exponent
        self._spend: np.ndarray | None = None
        self._worst_user: np.ndarray | None = None  # per slot: the listed user who paid the most in its window
        self._listed_top: np.ndarray | None = None  # ... and how much (integers in the unit of the spends)
        self.listed_users = 0  # how many listed users were charged at all (known once the spend is)

    @property
    def slots(self) -> int:
        return int(self.parts[0].shape[0])

    def exact_spend(self) -> tuple[np.ndarray, np.ndarray, int]:
        """``(spend, bounds, E)``: every window's exact spend (``(slots, groups)`` integers, group 0's
        with the most any listed user paid on top in that window) and every group's bound, as
        integers in units of ``2**E`` (an infinite bound stays a float, which Python compares
        exactly with integers)."""
        if self._exact is None:
            budgets = [budget for row in self.listed or () for _, budget in row]
            exponent = unit_exponent(*self.parts, self.bounds, [self.reserved], budgets)
            charges = as_integers(self.parts[0], exponent)
            for part in self.parts[1:]:
                charges = charges + as_integers(part, exponent)
            spend = np.empty(charges.shape, dtype=object)
            for k, w in enumerate(self.windows.tolist()):  # a window longer than the ledger holds all of it
                spend[:, k] = window_integer_sums(charges[:, k], min(w, max(self.slots, 1)))
            spend += as_integers(self.reserved, exponent)[()]
            if self.listed is not None:
                self._worst_user, self._listed_top = self._listed_sweep(self.listed, int(self.windows[0]), exponent)
                spend[:, 0] += self._listed_top
            bounds = np.array([as_integers(b, exponent)[()] if np.isfinite(b) else float(b) for b in self.bounds],
                              dtype=object)
            self._exact = spend, bounds, exponent
        return self._exact

    def window_spend(self) -> np.ndarray:
        """``(slots, groups)``: each group's spend over its own window ending at every slot, rounded
        up (group 0's includes the most any listed user paid on top in that window)."""
        if self._spend is None:
            spend, _, exponent = self.exact_spend()
            self._spend = integers_up(spend, exponent)
        return self._spend

    def overspent(self) -> np.ndarray:
        """``(slots, groups)``: whether each window spends more than its group's bound, exactly."""
        spend, bounds, _ = self.exact_spend()
        return np.asarray(spend > bounds[None, :], dtype=bool)

    def _listed_sweep(self, listed: list[list[tuple[np.ndarray, float]]], w: int, exponent: int
                      ) -> tuple[np.ndarray, np.ndarray]:
        """The user with the most listed charges in the window ending at each slot, and that amount.

        One sweep over the slots keeps each user's listed charges of the current window
        (:class:`UserCharges`: a charge enters at its slot and leaves ``w`` slots later), so a
        window's worst user is found without a loop over users, and exactly.
        """
        window = UserCharges(self.population)
        charged = np.zeros(self.population, dtype=bool)
        worst = np.zeros(len(listed), dtype=np.int64)
        top = np.zeros(len(listed), dtype=object)
        unit = Fraction(2) ** exponent
        for row, charges in enumerate(listed):
            for users, budget in charges:
                window.charge(users, budget)
                charged[users] = True
            for users, budget in listed[row - w] if row >= w else ():
                window.charge(users, budget, -1)
            user, amount = window.fullest()
            worst[row], top[row] = user, int(amount / unit)
        self.listed_users = int(charged.sum())
        return worst, top

    def _at(self, group: int, end: int) -> WindowSpend:
        w = int(self.windows[group])
        top, worst = self._listed_top, self._worst_user
        user = int(worst[end]) if group == 0 and top is not None and worst is not None and top[end] > 0 else None
        return WindowSpend(float(self.window_spend()[end, group]), float(self.bounds[group]), group,
                           max(0, end - w + 1), end, user)

    def first_overspend(self) -> WindowSpend | None:
        """The costliest window of the first group (in order) that spends over its bound, or None."""
        spend, _, _ = self.exact_spend()
        over = self.overspent()
        for k in range(spend.shape[1]):
            if over[:, k].any():
                return self._at(k, int(np.argmax(spend[:, k])))
        return None

    def tightest(self) -> WindowSpend | None:
        """The window with the largest spend over its bound, compared exactly (None without slots)."""
        spend, bounds, _ = self.exact_spend()
        if not spend.size:
            return None
        ends = [int(np.argmax(spend[:, k])) for k in range(spend.shape[1])]
        ratios = [Fraction(spend[end, k]) / Fraction(bounds[k]) if isinstance(bounds[k], int) else Fraction(0)
                  for k, end in enumerate(ends)]
        group = max(range(len(ends)), key=ratios.__getitem__)  # the first of equal ratios
        return self._at(group, ends[group])


def _relative_error(terms: int) -> float:
    """How far a float sum of ``terms`` products of a count and a budget may lie from the exact sum,
    relatively: one rounding of ``2^-53`` per product and per addition, doubled for safety."""
    return 2 * terms * 2.0**-53


class UserCharges:
    """Every user's charges over a sliding window, kept exactly, for ledgers that list their users.

    A charge falls on listed users (a position in a vector of ``population`` users; one listed
    twice pays twice) and a charge taken back (``times=-1``) leaves the window. The account keeps,
    for each distinct budget in the window, how many times every user paid it: whole numbers, so
    adding and taking back never drifts, and a user's spend is an exact sum. :meth:`fullest` finds
    the user who paid the most and :meth:`within` says which users can pay one more budget without
    passing a bound, both exactly and without a loop over users.

    Examples
    --------
    >>> charges = UserCharges(population=4)
    >>> charges.charge(np.array([0, 1]), 0.1); charges.charge(np.array([1, 2]), 0.2)
    >>> user, spend = charges.fullest()
    >>> user, spend == Fraction(0.1) + Fraction(0.2)
    (1, True)
    >>> charges.within(np.array([0, 1, 2]), 0.2, 0.5).tolist()  # 0.1 + 0.2 + 0.2 > 0.5: user 1 cannot pay
    [True, False, True]
    >>> charges.charge(np.array([1, 2]), 0.2, -1); charges.fullest()[0]
    0
    """

    def __init__(self, population: int) -> None:
        self.population = int(population)
        self._budgets: list[float | None] = []  # the budget each row counts (None: a free row)
        self._row_of: dict[float, int] = {}
        self._counts = np.zeros((0, self.population), dtype=np.int64)
        self._paid: list[int] = []  # charges each row holds, to free rows whose budget left the window

    def charge(self, users: np.ndarray, budget: float, times: int = 1) -> None:
        """``users`` pay ``budget`` (``times=-1``: a charge of theirs leaves the window)."""
        users = np.asarray(users, dtype=np.int64)
        budget = float(budget)
        if budget == 0 or not users.size:
            return
        row = self._row(budget)
        np.add.at(self._counts[row], users, times)
        self._paid[row] += times * int(users.size)
        if not self._paid[row]:
            del self._row_of[budget]
            self._budgets[row] = None

    def _row(self, budget: float) -> int:
        if budget in self._row_of:
            return self._row_of[budget]
        row = self._budgets.index(None) if None in self._budgets else len(self._budgets)
        if row == len(self._budgets):
            self._budgets.append(None)
            self._paid.append(0)
            self._counts = np.vstack([self._counts, np.zeros((1, self.population), dtype=np.int64)])
        self._budgets[row], self._row_of[budget] = budget, row
        return row

    def _active(self) -> tuple[np.ndarray, list[Fraction], np.ndarray]:
        """The rows of budgets in the window: counts, exact budgets, and budgets as floats."""
        rows = [row for row, budget in enumerate(self._budgets) if budget is not None]
        budgets = [float(self._budgets[row]) for row in rows]  # type: ignore[arg-type]
        counts = self._counts if len(rows) == len(self._budgets) else self._counts[rows]  # no copy when all are
        return counts, [Fraction(b) for b in budgets], np.array(budgets)

    def _exact(self, counts: np.ndarray, budgets: list[Fraction]) -> list[Fraction]:
        """The exact spend of every column of ``counts`` (users), computed once per distinct column."""
        distinct, inverse = np.unique(counts.T, axis=0, return_inverse=True)
        sums = [sum((int(n) * b for n, b in zip(column, budgets)), Fraction(0)) for column in distinct]
        return [sums[i] for i in np.ravel(inverse)]

    def fullest(self) -> tuple[int, Fraction]:
        """The user who paid the most in the window (the first of equals) and that spend, exactly;
        ``(0, 0)`` when nobody paid."""
        counts, budgets, floats = self._active()
        if not budgets:
            return 0, Fraction(0)
        if len(budgets) == 1:  # one budget in the window: the user charged most often
            user = int(np.argmax(counts[0]))
            return user, int(counts[0, user]) * budgets[0]
        approximate = floats @ counts
        top = approximate.max()
        candidates = np.flatnonzero(approximate >= top - 2 * _relative_error(len(budgets)) * top)
        spends = self._exact(counts[:, candidates], budgets)
        best = max(range(len(spends)), key=lambda i: (spends[i], -i))
        return int(candidates[best]), spends[best]

    def spend(self, users: np.ndarray) -> list[Fraction]:
        """The window spend of each of ``users``, exactly.

        >>> charges = UserCharges(population=3)
        >>> charges.charge(np.array([0, 2]), 0.25); charges.charge(np.array([2]), 0.5)
        >>> charges.spend(np.array([2, 1])) == [Fraction(3, 4), 0]
        True
        """
        users = np.asarray(users, dtype=np.int64)
        counts, budgets, _ = self._active()
        if not budgets or not users.size:
            return [Fraction(0)] * int(users.size)
        return self._exact(counts[:, users], budgets)

    def within(self, users: np.ndarray, budget: float, bound: float) -> np.ndarray:
        """Which of ``users`` can pay ``budget`` more and stay within ``bound``, exactly."""
        users = np.asarray(users, dtype=np.int64)
        room = Fraction(bound) - Fraction(budget)
        counts, budgets, floats = self._active()
        if room < 0 or not budgets:
            return np.full(users.size, room >= 0)
        asked = counts[:, users]
        if len(budgets) == 1:  # n charges of b fit in the room iff n <= floor(room / b)
            return asked[0] <= min(room // budgets[0], 2**62)
        approximate = floats @ asked
        slack = 4 * _relative_error(len(budgets)) * approximate
        below, above = approximate + slack <= round_down(room), approximate - slack > round_up(room)
        fits = below.copy()
        unsure = np.flatnonzero(~below & ~above)
        if unsure.size:
            fits[unsure] = [spend <= room for spend in self._exact(asked[:, unsure], budgets)]
        return fits
