"""LBA, LDP budget absorption (LDP-IDS, Algorithm 2 of the arXiv version)."""

from __future__ import annotations

from ..exact import divide
from ..randomness import DerivedRandomness
from ._base import Absorbing, BudgetDivision, DecisionOverride
from .device_reports import Devices
from .schedules import Absorption

__all__ = ["LBA"]


class LBA(Absorbing, BudgetDivision):
    """LBA, LDP budget absorption: BA's units, in the local model.

    Every slot owns one publication unit ``u = (1-beta) eps / w`` (``eps/(2w)`` by default, rounded
    down onto epsilon's grid, :func:`~wevent.core.exact.divide`). M1
    runs at every slot, nullified ones included. After a publication of ``k`` units the next
    ``k - 1`` slots are NULLIFIED; otherwise a publication would absorb the units skipped since,
    up to ``w`` (:class:`~wevent.core.local.schedules.Absorption`), use ``eps_2 = k u`` and
    have error ``err = V(eps_2, N)``; it happens iff ``dis > err``.

    Parameters
    ----------
    epsilon : float
        Every user's budget over any window of ``window`` consecutive slots, > 0.
    window : int
        ``w``, the window length in slots, >= 1.
    domain_size : int
        ``d``, the values a user can hold (1 for means with ``oracle="hm"``).
    population : int
        ``N``, the users, numbered ``0 .. N-1``.
    beta : float, default 0.5
        The share of the budget (budget division) or of the users (population division) given
        to M1, strictly between 0 and 1.
    force_first : bool, default False
        Publish slot 1 whatever ``dis``. Off by default: ``r_0 = 0`` and slot 1 is decided by
        the normal rule, as in the papers.
    oracle : {"ada", "grr", "oue", "hm"}, default "ada"
        The devices' perturbation: the adaptive choice between GRR and OUE, one of them, or the
        Hybrid Mechanism for means over ``[0, bound]``.
    var_mode : str, default "exact_avg"
        The form of ``V(eps, n)``: the exact average over the bins by default.
    bound : float, optional
        The top of the value range for ``oracle="hm"`` (1 if omitted); ignored otherwise.
    absent : bool, default False
        Whether a user may have no value in a slot. Every asked user answers all the same: the
        devices answer in ``domain_size + 1`` categories, the last meaning "no value" (the caller
        gives such users that value), and releases keep the other ``domain_size`` bins. For
        frequency oracles only: a mean needs every user's value.
    randomness : DerivedRandomness, optional
        Where the server's draws come from (a fresh random key if omitted).
    devices : Devices, optional
        The simulated devices :meth:`step` asks (the pipeline asks real ones instead).
    decision_override : callable, optional
        ``slot -> bool | None``, a test hook that replaces the publish rule where not None.

    Spend
    -----
    Per user, ``eps_1 = beta eps / w`` at every slot plus at most ``w`` units in any window: at
    most ``eps`` (:attr:`window_spend_bound`).

    Notes
    -----
    M1 runs at nullified slots too, which is what the arXiv version's communication formulas
    count. Units are integers, which keeps the nullified ranges exact, and the algorithm's initial
    ``eps_{l,2} = 0`` is read literally as zero units at ``l = 0``: nothing is nullified at the
    start, and slot 1 may absorb two units, within the bound since slot 0 spent nothing.

    Examples
    --------
    A worked ledger (w = 3; P at t = 1, A at 3, P at 4 and 6; u = eps/6):

    >>> import numpy as np
    >>> from wevent.core.local.device_reports import Devices
    >>> script = {1: True, 3: False, 4: True, 6: True}
    >>> m = LBA(1.0, 3, 2, population=50, devices=Devices.from_seed(0), decision_override=script.get)
    >>> results = m.run(np.zeros((6, 50), dtype=int))
    >>> [r.strategy.value[0].upper() for r in results], [round(r.eps2 * 6, 9) for r in results]
    (['P', 'N', 'A', 'P', 'N', 'P'], [2.0, 0.0, 0.0, 2.0, 0.0, 1.0])

    References
    ----------
    X. Ren, L. Shi, W. Yu, S. Yang, C. Zhao, Z. Xu. LDP-IDS: Local Differential Privacy for
    Infinite Data Streams. SIGMOD 2022 (the SIGMOD version), and its extended arXiv version
    (the arXiv version): Section 4.2.3 of the SIGMOD version, Algorithm 2 of the arXiv version.
    """

    name = "lba"

    def __init__(
        self,
        epsilon: float,
        window: int,
        domain_size: int,
        population: int,
        *,
        beta: float = 0.5,
        force_first: bool = False,
        oracle: str = "ada",
        var_mode: str = "exact_avg",
        bound: float | None = None,
        absent: bool = False,
        randomness: DerivedRandomness | None = None,
        devices: Devices | None = None,
        decision_override: DecisionOverride | None = None,
    ) -> None:
        super().__init__(epsilon, window, domain_size, population, beta=beta, force_first=force_first, oracle=oracle,
                         var_mode=var_mode, bound=bound, absent=absent, randomness=randomness, devices=devices,
                         decision_override=decision_override)
        self.unit = divide(self.pool, self.window, self.grid)
        self.schedule = Absorption(self.window)

    @property
    def window_spend_bound(self) -> float:
        return self.window * self.eps1 + self.window * self.unit
