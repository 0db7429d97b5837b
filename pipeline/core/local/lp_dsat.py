"""LP-DSAT_w, population-division DSAT_w (LDP-IDS, Algorithm 4 of the SIGMOD version)."""

from __future__ import annotations

import math

from ..options import Option
from ..randomness import DerivedRandomness
from ..validation import ParameterError
from ._base import DecisionOverride, PopulationDivision
from .device_reports import Devices
from .dsat import THRESHOLD_CAP, RateControlled
from .protocol import Request

__all__ = ["LPDSAT"]


class LPDSAT(RateControlled, PopulationDivision):
    """LP-DSAT_w: a feedback controller on the publication rate replaces LPD's error test.

    Every publication asks a fixed ``m2 = floor(n2 / C)`` users (``n2 = N - floor(beta N)``,
    ``C`` the target number of publications per window), and the threshold ``T_t`` the
    dissimilarity must exceed moves up when the recent publication rate ``count / min(t, w)``
    exceeds ``C / w`` and down when it falls short (a proportional controller,
    ``u = theta |(|rate - C/w| - sigma)| / sigma``, ``T_t`` kept in [0, 2]). When the
    publications of the last ``w - 1`` slots leave fewer than ``m2`` users of the pool, the
    slot asks nobody (not even M1) and repeats the last release (NULLIFIED); the threshold waits.

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
    cutoff : int, optional
        ``C``, the target publications per window, below ``w``; ``ceil(w/4)`` if omitted.
    threshold : float, optional
        ``T``, the initial threshold; ``V(eps, m2)`` if omitted.
    tolerance : float, default 0.05
        ``sigma``, the rate error the controller tolerates, > 0.
    gain : float, optional
        ``theta``, the controller's gain; ``T / 10`` if omitted.
    rate_denominator : {"window", "slot"}, default "window"
        Divide the publication count by ``min(t, w)`` or, as printed, by ``t``.
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
    ``eps`` per report and at most one report per user in any window: M1 asks at most ``n1``
    users per window and publications at most ``n2``: ``eps`` per window.

    Notes
    -----
    Where Algorithm 4 is open to reading: M1 asks ``floor(n1 / w)`` users (``floor(n1 / C)``
    could exceed ``n1`` in a window); the rate divides by ``min(t, w)``, since at most ``w``
    slots of publications are counted; ``T_t`` is updated from ``T_{t-1}`` (printed ``T_t`` on
    both sides); the exhausted-pool test is ``n_rm < m2`` (printed ``n_rm <= 0``, which would
    let a publication ask more users than remain); the controller is proportional only. The
    defaults of ``C``, ``sigma``, ``T`` and ``theta`` are ours: the paper gives none.
    Publishing needs ``dis > T_t`` (the paper's ``>=`` differs only on ties, of probability 0).

    Examples
    --------
    >>> import numpy as np
    >>> from wevent.core.local.device_reports import Devices
    >>> m = LPDSAT(1.0, 4, 2, population=400, devices=Devices.from_seed(0), decision_override=lambda t: True)
    >>> results = m.run(np.zeros((6, 400), dtype=int))
    >>> m.cutoff, m.publication_users, [r.n1 for r in results], [r.strategy.value[0] for r in results]
    (1, 200, [50, 0, 0, 0, 50, 0], ['p', 'n', 'n', 'n', 'p', 'n'])

    References
    ----------
    X. Ren, L. Shi, W. Yu, S. Yang, C. Zhao, Z. Xu. LDP-IDS: Local Differential Privacy for
    Infinite Data Streams. SIGMOD 2022 (the SIGMOD version), and its extended arXiv version
    (the arXiv version): Algorithm 4 of the SIGMOD version, an extension of population division.
    """

    name = "lp-dsat"
    OPTIONS = {
        "threshold": Option.number("T, the initial threshold", 0, THRESHOLD_CAP, example=0.5, derived="V(eps, m2)"),
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
        self._check_cutoff(cutoff, rate_denominator)
        self.pool = self.population - math.floor(self.beta * self.population)  # n2
        self.publication_users = self.unit = self.pool // self.cutoff  # m2
        self.publication_amount = self.publication_users
        if self.publication_users < 1:
            raise ParameterError(f"n2 = {self.pool} users cannot fill C = {self.cutoff} publications per window")
        self._start_controller(self.pool, threshold, self._oracle(self.epsilon, self.var_mode).variance(
            self.publication_users), tolerance, gain)

    def _closed(self, slot: int, publication: Request | None) -> None:
        self.schedule.record(slot, publication.size if publication is not None else 0)
        super()._closed(slot, publication)
