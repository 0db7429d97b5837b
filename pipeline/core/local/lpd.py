"""LPD, LDP population distribution (LDP-IDS, Algorithm 2 of the SIGMOD version)."""

from __future__ import annotations

from typing import Any

from ..base import Strategy
from ..options import Option
from ..randomness import DerivedRandomness
from ..validation import check_positive_int
from ._base import DecisionOverride, PopulationDivision, Scheduled
from .device_reports import Devices
from .protocol import LocalDissimilarity, Request
from .schedules import Distribution

__all__ = ["LPD"]


class LPD(Scheduled, PopulationDivision):
    """LPD, LDP population distribution: BD's halving, applied to users instead of budget.

    Every slot, ``n1 = floor(beta N / w)`` available users report M1 with ``eps`` and the
    server computes ``dis``. With ``N_rm`` the publication pool ``P`` minus the users of the
    publications of the previous ``w - 1`` slots, a publication would ask
    ``N_pp = floor(N_rm / 2)`` available users and have error ``err = V(eps, N_pp)``; it
    happens iff ``dis > err`` and ``N_pp >= u_min``. Users asked at slot t are available again
    at the end of slot ``t + w - 1``; samples are uniform without replacement and
    data-independent.

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
    u_min : int, default 1
        The fewest users a publication may ask.
    beta : float, default 0.5
        The share of the budget (budget division) or of the users (population division) given
        to M1, strictly between 0 and 1.
    force_first : bool, default False
        Publish slot 1 whatever ``dis``. Off by default: ``r_0 = 0`` and slot 1 is decided by
        the normal rule, as in the papers.
    pool : {"floor", "rest"}, default "floor"
        The publication pool: ``P = floor((1 - beta) N)`` as the papers' appendix sets it, or
        ``"rest"``, ``N - w n1``, every user M1 leaves.
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
    ``eps`` per report and at most one report per user in any window (``|U_A|`` after M1 is at
    least ``N - w n1 - S >= P - S >= N_pp``, so sampling never runs short): ``eps`` per window.
    Population division needs ``N >= 2w``.

    Examples
    --------
    Always publishing takes ``floor(N_rm/2)``: ``P/2, P/4, ...`` users, then recycled ones:

    >>> import numpy as np
    >>> from wevent.core.local.device_reports import Devices
    >>> m = LPD(1.0, 4, 2, population=400, devices=Devices.from_seed(0), decision_override=lambda t: True)
    >>> [r.n2 for r in m.run(np.zeros((5, 400), dtype=int))]
    [100, 50, 25, 12, 56]

    References
    ----------
    X. Ren, L. Shi, W. Yu, S. Yang, C. Zhao, Z. Xu. LDP-IDS: Local Differential Privacy for
    Infinite Data Streams. SIGMOD 2022 (the SIGMOD version), and its extended arXiv version
    (the arXiv version): Section 5.2.2 and Algorithm 2 of the SIGMOD version, Algorithm 3 of the arXiv version.
    """

    name = "lpd"
    OPTIONS = {"u_min": Option.integer("the fewest users a publication may ask", 1, 2**32, example=2)}
    schedule: Distribution

    def __init__(
        self,
        epsilon: float,
        window: int,
        domain_size: int,
        population: int,
        *,
        u_min: int = 1,
        beta: float = 0.5,
        force_first: bool = False,
        pool: str = "floor",
        oracle: str = "ada",
        var_mode: str = "exact_avg",
        bound: float | None = None,
        absent: bool = False,
        randomness: DerivedRandomness | None = None,
        devices: Devices | None = None,
        decision_override: DecisionOverride | None = None,
    ) -> None:
        super().__init__(epsilon, window, domain_size, population, beta=beta, force_first=force_first, pool=pool,
                         oracle=oracle, var_mode=var_mode, bound=bound, absent=absent, randomness=randomness,
                         devices=devices, decision_override=decision_override)
        self.u_min = check_positive_int(u_min, "u_min")
        self.schedule = Distribution(self.pool, self.window)

    def _decide(self, slot: int, dissimilarity: LocalDissimilarity | None) -> Request | Strategy:
        users = self.schedule.remaining() // 2
        if self._publishes(slot, dissimilarity, self._error(users)) and users >= self.u_min:
            return self._ask(slot, users)
        return Strategy.APPROXIMATE

    def _closed(self, slot: int, publication: Request | None) -> None:
        self.schedule.record(slot, publication.size if publication is not None else 0)
        super()._closed(slot, publication)

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "u_min": self.u_min}

