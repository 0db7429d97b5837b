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
user's adds their own charges in the window. :class:`ChargeMatrix` computes both and finds the
first window over its bound: it is what ``wevent audit`` checks the published records with.

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
>>> charges = ChargeMatrix(np.array([[0.25, 0.5], [0.5, 0.5], [0.25, 1.0]]), windows=[2, 3], bounds=[1.0, 1.5])
>>> charges.window_spend().tolist()
[[0.25, 0.5], [0.75, 1.0], [0.75, 2.0]]
>>> charges.first_overspend()
WindowSpend(spend=2.0, bound=1.5, group=1, first=0, last=2, user=None)

A live service charges the same slots one at a time, keeping only the last window:

>>> live = SlidingLedger([2, 3], [1.0, 1.5])
>>> for slot, row in enumerate(charges.shared, start=1):
...     spend = live.record_charges(slot, row)
>>> spend.tolist(), live.tightest() == charges.first_overspend()
([0.75, 2.0], True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from .validation import check_epsilon, check_window

__all__ = ["TOLERANCE", "Budget", "WindowSpend", "WindowAccount", "SlidingLedger", "ChargeMatrix", "window_sums",
           "latest_window_spend", "slide_charges"]

TOLERANCE = 1e-9
"""How far a window may exceed its bound by rounding alone: a window's charges are rounded floats,
so one that sits exactly at its budget can add up a few ulps above it."""


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
        What the host mechanism may spend in a window: ``total - reserved``. Records and metrics
        carry ``total`` and ``reserved`` as they are here, and a window passes when the host's
        spend plus ``reserved`` is at most ``total``, so an overspend of either part shows.

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
    from .decayed import host_epsilon  # the query index's composition rule, where the index lives

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

    def exceeds(self, tolerance: float = TOLERANCE) -> bool:
        return self.spend > self.bound + tolerance


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
    window is summed directly (not as a difference of running totals), so the result has the
    accuracy of a sum of ``w`` terms however long the stream is. The terms are added oldest first,
    as ``sum(list_of_the_window)`` adds them, so a live ledger that sums its last ``w`` charges
    that way gets the very same float (numpy's reductions may reorder a sum).

    >>> window_sums(np.array([1.0, 2.0, 3.0, 4.0]), 2).tolist()
    [1.0, 3.0, 5.0, 7.0]
    """
    values = np.asarray(per_slot, dtype=float)
    slots = values.shape[0]
    padded = np.concatenate([np.zeros((window - 1, *values.shape[1:])), values])
    out = np.zeros(values.shape)
    for age in range(window):  # oldest term first; the zeros before slot 1 add nothing
        out += padded[age : age + slots]
    return out


def latest_window_spend(recent: np.ndarray, windows: Sequence[int] | np.ndarray) -> np.ndarray:
    """Every group's spend over its own window ending at the newest row of ``recent`` (slots, groups).

    Added oldest first, as :func:`window_sums` adds them (``np.cumsum`` accumulates in order), so a
    live service and a simulation of the same stream agree to the bit.

    >>> latest_window_spend(np.array([[0.5, 1.0], [0.25, 2.0], [0.125, 4.0]]), [2, 3]).tolist()
    [0.375, 7.0]
    """
    recent = np.asarray(recent, dtype=float)
    lengths = np.asarray(windows, dtype=np.int64)
    out = np.zeros(lengths.size)
    for w in np.unique(lengths):  # a handful of distinct windows: one accumulation each
        columns = np.flatnonzero(lengths == w)
        block = recent[-int(w):, columns]
        if block.shape[0]:
            out[columns] = np.cumsum(block, axis=0)[-1]
    return out


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
    and returns every group's spend over its own window ending there, summed oldest first as
    :func:`window_sums` sums it, so a service and a simulation of the same stream agree to the bit.
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
        """What ``result``'s slot charged, one number per column: every user ``eps1 + eps2``."""
        return np.array([result.eps1 + result.eps2])

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
        group = int(np.argmax(self._spend / self.bounds))
        return WindowSpend(float(self._spend[group]), float(self.bounds[group]), group,
                           max(0, self._newest - int(self.windows[group]) + 1), self._newest)

    def state(self) -> np.ndarray:
        """The charges of the slots the next window still needs (``(slots, columns)``, oldest first)."""
        return self.recent


class ChargeMatrix:
    """Every slot's charges, by group and by listed user, with every window's spend and check.

    Parameters
    ----------
    shared : numpy.ndarray
        ``(slots, groups)``: what every user of each group paid at each slot.
    windows, bounds : sequence
        Every group's window ``w_k`` and budget ``eps_k``.
    reserved : float
        A share taken from every window of every group besides these charges (a query index's).
    listed : list, optional
        Per slot, the ``(users, epsilon)`` charges that fall on listed users only, as positions in
        a vector of ``population`` users; each adds to group 0's shared charges. A user listed
        twice in one charge pays twice.
    population : int
        The length of the users' vector (the largest position plus one at least).
    """

    def __init__(self, shared, windows, bounds, *, reserved: float = 0.0,
                 listed: list[list[tuple[np.ndarray, float]]] | None = None, population: int = 0) -> None:
        shared = np.asarray(shared, dtype=float)
        self.shared = shared[:, None] if shared.ndim == 1 else shared
        self.windows = np.asarray(windows, dtype=np.int64)
        self.bounds = np.asarray(bounds, dtype=float)
        self.reserved = float(reserved)
        self.listed = listed
        self.population = int(population)
        self._spend: np.ndarray | None = None
        self._worst_user: np.ndarray | None = None  # per slot: the listed user who paid the most in its window
        self._listed_top: np.ndarray | None = None  # ... and how much
        self.listed_users = 0  # how many listed users were charged at all (known once the spend is)

    def window_spend(self) -> np.ndarray:
        """``(slots, groups)``: each group's spend over its own window ending at every slot; group
        0's includes the most any listed user paid on top in that window."""
        if self._spend is None:
            slots = self.shared.shape[0]
            spend = np.empty(self.shared.shape)
            for k, w in enumerate(self.windows.tolist()):  # a window longer than the ledger holds all of it
                spend[:, k] = window_sums(self.shared[:, k], min(w, max(slots, 1))) + self.reserved
            if self.listed is not None:
                self._worst_user, self._listed_top = self._listed_sweep(self.listed, int(self.windows[0]))
                spend[:, 0] += self._listed_top
            self._spend = spend
        return self._spend

    def _listed_sweep(self, listed: list[list[tuple[np.ndarray, float]]], w: int) -> tuple[np.ndarray, np.ndarray]:
        """The user with the most listed charges in the window ending at each slot, and that amount.

        One sweep over the slots keeps each user's listed charges of the current window in a vector
        over the population (a charge enters at its slot and leaves ``w`` slots later), so a
        window's worst user is one ``argmax``: no loop over users, and no long running total whose
        rounding could hide a small overspend.
        """
        window = np.zeros(self.population)
        charged = np.zeros(self.population, dtype=bool)
        worst = np.zeros(len(listed), dtype=np.int64)
        top = np.zeros(len(listed))
        for row, charges in enumerate(listed):
            for users, budget in charges:
                np.add.at(window, users, budget)  # a user listed twice in a charge pays twice
                charged[users] = True
            for users, budget in listed[row - w] if row >= w else ():
                np.add.at(window, users, -budget)
            if self.population:
                worst[row] = int(np.argmax(window))
                top[row] = window[worst[row]]
        self.listed_users = int(charged.sum())
        return worst, top

    def _at(self, group: int, end: int) -> WindowSpend:
        w = int(self.windows[group])
        spend, top, worst = self.window_spend(), self._listed_top, self._worst_user
        user = None
        if group == 0 and top is not None and worst is not None and top[end] > TOLERANCE:
            user = int(worst[end])
        return WindowSpend(float(spend[end, group]), float(self.bounds[group]), group, max(0, end - w + 1), end,
                           user)

    def first_overspend(self, tolerance: float = TOLERANCE) -> WindowSpend | None:
        """The costliest window of the first group (in order) that spends over its bound, or None."""
        spend = self.window_spend()
        for k in range(spend.shape[1]):
            end = int(np.argmax(spend[:, k]))
            if spend[end, k] > self.bounds[k] + tolerance:
                return self._at(k, end)
        return None

    def tightest(self) -> WindowSpend | None:
        """The window with the largest spend over its bound (None without slots)."""
        spend = self.window_spend()
        if not spend.size:
            return None
        ends = np.argmax(spend, axis=0)
        group = int(np.argmax(spend[ends, np.arange(spend.shape[1])] / self.bounds))
        return self._at(group, int(ends[group]))
