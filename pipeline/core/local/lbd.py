"""LBD, LDP budget distribution (LDP-IDS, Algorithm 1 of the arXiv version)."""

from __future__ import annotations

from ..base import Strategy
from ..exact import divide
from ..randomness import DerivedRandomness
from ._base import BudgetDivision, DecisionOverride, Scheduled
from .device_reports import Devices
from .protocol import LocalDissimilarity, Request
from .schedules import Distribution

__all__ = ["LBD"]


class LBD(Scheduled, BudgetDivision):
    """LBD, LDP budget distribution: BD's halving of the remaining budget, in the local model.

    Every slot, all users report M1 with ``eps_1 = beta eps / w`` (``eps/(2w)`` by default) and
    the server computes ``dis``. With ``eps_rm`` the pool ``(1-beta) eps`` minus the
    publication budgets of the previous ``w - 1`` slots, a publication would use
    ``eps_2 = eps_rm / 2`` and have error ``err = V(eps_2, N)``; the slot publishes (all users
    report again with ``eps_2``) iff ``dis > err``, else it repeats the last release.

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
    Per user, ``eps_1`` at every slot plus ``eps_2`` at publications: at most
    ``beta eps + (1-beta) eps (1 - 2^-w) < eps`` in any window (:attr:`window_spend_bound`).

    Notes
    -----
    Section 5.3.3 of the arXiv version prints ``eps_1 = 2 eps / w``, which would spend ``2 eps``
    on M1 alone; ``eps/(2w)``, as Algorithm 1 uses it, is taken.

    Examples
    --------
    A worked ledger (w = 3, scripted decisions P, A, P, P, A, A):

    >>> import numpy as np
    >>> from wevent.core.local.device_reports import Devices
    >>> script = [True, False, True, True, False, False]
    >>> m = LBD(1.0, 3, 2, population=50, devices=Devices.from_seed(0), decision_override=lambda t: script[t - 1])
    >>> [r.eps2 for r in m.run(np.zeros((6, 50), dtype=int))]
    [0.25, 0.0, 0.125, 0.1875, 0.0, 0.0]

    References
    ----------
    X. Ren, L. Shi, W. Yu, S. Yang, C. Zhao, Z. Xu. LDP-IDS: Local Differential Privacy for
    Infinite Data Streams. SIGMOD 2022 (the SIGMOD version), and its extended arXiv version
    (the arXiv version): Section 4.2.3 of the SIGMOD version, Algorithm 1 of the arXiv version.
    """

    name = "lbd"
    schedule: Distribution

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
        self.schedule = Distribution(self.pool, self.window)

    @property
    def window_spend_bound(self) -> float:
        return self.window * self.eps1 + self.pool * (1.0 - 2.0**-self.window)

    def _decide(self, slot: int, dissimilarity: LocalDissimilarity | None) -> Request | Strategy:
        eps2 = divide(self.schedule.remaining(), 2, self.grid)
        if self._publishes(slot, dissimilarity, self._error(eps2)):
            return self._ask(slot, eps2)
        return Strategy.APPROXIMATE

    def _closed(self, slot: int, publication: Request | None) -> None:
        self.schedule.record(slot, publication.epsilon if publication is not None else 0.0)
        super()._closed(slot, publication)

