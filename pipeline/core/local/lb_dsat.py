"""LB-DSAT_w, budget-division DSAT_w (LDP-IDS, Section 6.2 of the SIGMOD version)."""

from __future__ import annotations

from ..exact import divide
from ..options import Option
from ..randomness import DerivedRandomness
from ._base import BudgetDivision, DecisionOverride
from .device_reports import Devices
from .dsat import THRESHOLD_CAP, RateControlled
from .protocol import Request

__all__ = ["LBDSAT"]


class LBDSAT(RateControlled, BudgetDivision):
    """LB-DSAT_w: LP-DSAT_w's rate-controlled threshold with the budget split over slots.

    M1 asks every user at every slot with ``eps_1 = beta eps / w``, as in LBD. A publication asks
    every user with a fixed ``eps_2 = (1 - beta) eps / C`` (``C`` the target number of
    publications per window), so at most ``C`` publications fit in any window. The threshold
    ``T_t`` the dissimilarity must exceed follows the publication rate exactly as in
    :class:`~.lp_dsat.LPDSAT`; when the publications of the last ``w - 1`` slots have used all
    ``C``, the slot asks nobody (not even M1) and repeats the last release (NULLIFIED).

    Parameters
    ----------
    epsilon : float
        Every user's budget over any window of ``window`` consecutive slots, > 0.
    window : int
        ``w``, the window length in slots, >= 2 (``C`` must be below it).
    domain_size : int
        ``d``, the values a user can hold (1 for means with ``oracle="hm"``).
    population : int
        ``N``, the users, numbered ``0 .. N-1``; all of them report in both phases.
    cutoff : int, optional
        ``C``, the target publications per window, below ``w``; ``ceil(w/4)`` if omitted.
    threshold : float, optional
        ``T``, the initial threshold; ``V(eps_2, N)`` if omitted.
    tolerance : float, default 0.05
        ``sigma``, the rate error the controller tolerates, > 0.
    gain : float, optional
        ``theta``, the controller's gain; ``T / 10`` if omitted.
    rate_denominator : {"window", "slot"}, default "window"
        Divide the publication count by ``min(t, w)`` or, as printed, by ``t``.
    beta : float, default 0.5
        The share of the window budget given to M1, strictly between 0 and 1.
    force_first : bool, default False
        Publish slot 1 whatever ``dis``.
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
    At most ``w`` M1 reports at ``beta eps / w`` and ``C`` publications at ``(1 - beta) eps / C``
    per user in any window: ``eps`` per window.

    Notes
    -----
    The paper names the method and leaves it unwritten; we read it off Algorithm 4 with budgets
    in place of users: a publication's budget is the pool ``(1 - beta) eps`` over ``C``, as its
    users there are ``n_2 / C``, and the pool is counted in whole publications so that no
    floating-point remainder decides whether one more fits. Every reading of Algorithm 4 that
    LP-DSAT_w states holds here too.

    Examples
    --------
    >>> import numpy as np
    >>> from wevent.core.local.device_reports import Devices
    >>> m = LBDSAT(1.0, 4, 2, population=400, devices=Devices.from_seed(0), decision_override=lambda t: True)
    >>> results = m.run(np.zeros((6, 400), dtype=int))
    >>> m.cutoff, m.eps2, [r.n1 for r in results], [r.strategy.value[0] for r in results]
    (1, 0.5, [400, 0, 0, 0, 400, 0], ['p', 'n', 'n', 'n', 'p', 'n'])

    References
    ----------
    X. Ren, L. Shi, W. Yu, S. Yang, C. Zhao, Z. Xu. LDP-IDS: Local Differential Privacy for
    Infinite Data Streams. SIGMOD 2022: Section 6.2 (LB-DSAT_w) and Algorithm 4 (LP-DSAT_w).
    """

    name = "lb-dsat"
    OPTIONS = {
        "beta": Option.number("the share of the window budget given to M1", 0, 1, example=0.4, open_low=True,
                              open_high=True),
        "threshold": Option.number("T, the initial threshold", 0, THRESHOLD_CAP, example=0.5, derived="V(eps_2, N)"),
    }

    def __init__(
        self,
        epsilon: float,
        window: int,
        domain_size: int,
        population: int,
        *,
        cutoff: int | None = None,
        threshold: float | None = None,
        tolerance: float = 0.05,
        gain: float | None = None,
        rate_denominator: str = "window",
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
        self._check_cutoff(cutoff, rate_denominator)
        self.eps2 = self.publication_amount = divide(self.pool, self.cutoff, self.grid)
        self.unit = 1
        self._start_controller(self.cutoff, threshold, self._error(self.eps2), tolerance, gain)

    def _closed(self, slot: int, publication: Request | None) -> None:
        self.schedule.record(slot, self.unit if publication is not None else 0)
        super()._closed(slot, publication)
