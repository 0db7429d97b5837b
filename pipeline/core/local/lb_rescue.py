"""LB-RescueDP, budget-division RescueDP (LDP-IDS, Section 6.2 of the SIGMOD version)."""

from __future__ import annotations

from ..base import Strategy
from ..exact import grid, share
from ..options import Option
from ..randomness import DerivedRandomness, Phase
from ._base import DecisionOverride, Scheduled
from .device_reports import Devices
from .protocol import Request
from .rescue import KalmanSampling
from .schedules import Distribution

__all__ = ["LBRescueDP"]


class LBRescueDP(KalmanSampling, Scheduled):
    """LB-RescueDP: RescueDP's adaptive sampling and Kalman filter, every user reporting at a sample.

    The budget-division twin of :class:`~.lp_rescue.LPRescueDP`: a sample asks every user with
    ``eps_t = p * eps_rm`` (rounded down onto epsilon's grid, :func:`~wevent.core.exact.share`),
    ``p = min(phi ln(I + 1), p_max)`` of the window's remaining budget
    ``eps_rm = eps - (budgets of the previous w - 1 slots)``, RescueDP's logarithmic allocation.
    The estimate ``z`` corrects a per-bin Kalman filter with ``R = V(eps_t, N)``, and the PID
    controller moves the sampling interval ``I``, exactly as in LP-RescueDP. Slots in between
    repeat the last release (NOT_SAMPLED).

    Parameters
    ----------
    epsilon : float
        Every user's budget over any window of ``window`` consecutive slots, > 0.
    window : int
        ``w``, the window length in slots, >= 1.
    domain_size : int
        ``d``, the values a user can hold (1 for means with ``oracle="hm"``).
    population : int
        ``N``, the users, numbered ``0 .. N-1``; all of them report at every sample.
    sample_share : float, default 0.2
        ``phi``, the budget share's scale, > 0.
    max_share : float, default 0.6
        ``p_max``, the largest share of the remaining budget a sample takes, in (0, 1].
    kp, ki, kd : float, default 0.9, 0.1, 0.0
        The PID controller's proportional gain; the PID controller's integral gain; the PID
        controller's derivative gain (every bin has its controller).
    integral_window : int, default 3
        ``pi_i``, the feedback errors the integral term averages.
    interval_gain : float, default 10.0
        ``theta``, the interval's gain.
    process_noise : float, default 1e-5
        ``Q``, the Kalman filter's process noise per slot.
    initial_covariance : float, default 1.0
        ``P0``, the Kalman filter's initial covariance, > 0.
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
        Accepted for the common signature; the method has no publish rule to replace.

    Spend
    -----
    A sample spends at most ``p_max`` of what the previous ``w - 1`` slots left of ``eps``, so
    the budgets of any ``w`` consecutive slots add up to at most ``eps`` per user.

    Notes
    -----
    The paper names the method and leaves it unwritten; we take RescueDP's own budget allocation
    (a share of the window's remaining budget) where LP-RescueDP takes a share of the available
    users, and keep every other rule of LP-RescueDP. A sample whose share would be zero (nothing
    left in the window) is skipped and retried at the next slot.

    Examples
    --------
    >>> import numpy as np
    >>> from wevent.core.local.device_reports import Devices
    >>> m = LBRescueDP(1.0, 4, 2, population=1000, devices=Devices.from_seed(0))
    >>> first = m.step(np.zeros(1000, dtype=int))
    >>> bool(np.isclose(first.eps2, 0.2 * np.log(2))), first.n2, first.strategy.value
    (True, 1000, 'publish')

    References
    ----------
    X. Ren, L. Shi, W. Yu, S. Yang, C. Zhao, Z. Xu. LDP-IDS: Local Differential Privacy for
    Infinite Data Streams. SIGMOD 2022: Section 6.2 (LB-RescueDP, the budget-division variant of
    Algorithm 5). Q. Wang, Y. Zhang, X. Lu, Z. Wang, Z. Qin, K. Ren. RescueDP: Real-time
    Spatio-temporal Crowd-sourced Data Publishing with Differential Privacy. INFOCOM 2016
    (the adaptive budget allocation).
    """

    name = "lb-rescuedp"
    OPTIONS = {
        "sample_share": Option.number("phi, the budget share's scale", 0, example=0.3, open_low=True),
        "max_share": Option.number("p_max, the largest share of the remaining budget a sample takes", 0, 1,
                                   example=0.5, open_low=True),
    }
    instructs = (False, False)  # every user reports at a sample: nobody is picked out
    schedule: Distribution

    def __init__(
        self,
        epsilon: float,
        window: int,
        domain_size: int,
        population: int,
        *,
        sample_share: float = 0.2,
        max_share: float = 0.6,
        kp: float = 0.9,
        ki: float = 0.1,
        kd: float = 0.0,
        integral_window: int = 3,
        interval_gain: float = 10.0,
        process_noise: float = 1e-5,
        initial_covariance: float = 1.0,
        oracle: str = "ada",
        var_mode: str = "exact_avg",
        bound: float | None = None,
        absent: bool = False,
        randomness: DerivedRandomness | None = None,
        devices: Devices | None = None,
        decision_override: DecisionOverride | None = None,
    ) -> None:
        super().__init__(epsilon, window, domain_size, population, sample_share=sample_share, max_share=max_share,
                         kp=kp, ki=ki, kd=kd, integral_window=integral_window, interval_gain=interval_gain,
                         process_noise=process_noise, initial_covariance=initial_covariance, oracle=oracle,
                         var_mode=var_mode, bound=bound, absent=absent, randomness=randomness, devices=devices,
                         decision_override=decision_override)
        self.schedule = Distribution(self.epsilon, self.window)

    def _sample(self, slot: int, fraction: float) -> Request | Strategy:
        budget = share(self.schedule.remaining(), fraction, grid(self.epsilon))
        if not budget > 0:
            return Strategy.NOT_SAMPLED
        return self._request(slot, Phase.PUBLICATION, budget, None)

    def _closed(self, slot: int, publication: Request | None) -> None:
        self.schedule.record(slot, publication.epsilon if publication is not None else 0.0)
        super()._closed(slot, publication)
