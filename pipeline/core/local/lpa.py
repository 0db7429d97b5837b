"""LPA, LDP population absorption (LDP-IDS, Algorithm 3 of the SIGMOD version)."""

from __future__ import annotations

from ..randomness import DerivedRandomness
from ..validation import ParameterError
from ._base import Absorbing, DecisionOverride, PopulationDivision
from .device_reports import Devices
from .schedules import Absorption

__all__ = ["LPA"]


class LPA(Absorbing, PopulationDivision):
    """LPA, LDP population absorption: BA's units, counted in users.

    Every slot owns one unit of ``n_u = floor(P / w)`` users (``floor(N/(2w))`` by default). M1
    asks ``n1`` available users at every slot, nullified ones included. After a publication of
    ``k`` units the next ``k - 1`` slots are NULLIFIED; otherwise a publication would absorb the
    units skipped since, up to ``w``, ask ``N_pp = k n_u`` available users and have error
    ``err = V(eps, N_pp)``; it happens iff ``dis > err``. The unit ledger is LBA's
    (:class:`~wevent.core.local.schedules.Absorption`), in integer units.

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
    ``eps`` per report and at most one report per user in any window (publications of a window
    hold at most ``w n_u <= P`` users): ``eps`` per window. Population division needs
    ``N >= 2w``.

    Examples
    --------
    >>> import numpy as np
    >>> from wevent.core.local.device_reports import Devices
    >>> script = {1: True, 3: False, 4: True, 6: True}
    >>> m = LPA(1.0, 3, 2, population=60, devices=Devices.from_seed(0), decision_override=script.get)
    >>> results = m.run(np.zeros((6, 60), dtype=int))
    >>> [r.strategy.value[0].upper() for r in results], [r.n2 for r in results], results[0].n1
    (['P', 'N', 'A', 'P', 'N', 'P'], [20, 0, 0, 20, 0, 10], 10)

    References
    ----------
    X. Ren, L. Shi, W. Yu, S. Yang, C. Zhao, Z. Xu. LDP-IDS: Local Differential Privacy for
    Infinite Data Streams. SIGMOD 2022 (the SIGMOD version), and its extended arXiv version
    (the arXiv version): Section 5.2.3 and Algorithm 3 of the SIGMOD version, Algorithm 4 of the arXiv version.
    """

    name = "lpa"

    def __init__(
        self,
        epsilon: float,
        window: int,
        domain_size: int,
        population: int,
        *,
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
        self.unit = self.pool // self.window
        if self.unit < 1:
            raise ParameterError(f"the publication pool of {self.pool} users leaves no unit for w = {self.window}")
        self.schedule = Absorption(self.window)
