"""LP-RescueDP, population-division RescueDP (LDP-IDS, Algorithm 5 of the SIGMOD version)."""

from __future__ import annotations

import math
from typing import Any

from ..base import Strategy
from ..options import Option
from ..randomness import DerivedRandomness
from ..validation import check_positive_int
from ._base import DecisionOverride, Populated
from .device_reports import Devices
from .population import PopulationLedger
from .protocol import Request
from .rescue import KalmanSampling

__all__ = ["LPRescueDP"]


class LPRescueDP(KalmanSampling, Populated):
    """LP-RescueDP: adaptive sampling with a Kalman filter and a PID-controlled interval.

    No dissimilarity: the method samples on an adaptive schedule. At a sampling slot it asks
    ``n_t = min(floor(p |U_A|), n_max)`` available users with ``p = min(phi ln(I + 1), p_max)``,
    where ``I`` is the interval that scheduled the slot; their estimate ``z`` corrects a per-bin
    Kalman filter (random-walk model: the prior is the last release, ``P += Q`` every slot;
    ``R = V(eps, n_t)``, ``K = P / (P + R)``, release ``x + K (z - x)``). From the second sample
    on, a PID controller on the change of the release, ``E = mean_k |r_t[k] - r_l[k]|``, moves
    the interval: ``delta = Kp E + Ki mean(last pi_i E) + Kd (E - E_prev) / (t - l)``,
    ``I = max(1, I + theta (1 - (delta / sqrt(R))^2))``; the next sample is at ``t + floor(I)``.
    Slots in between repeat the last release (NOT_SAMPLED).

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
    sample_share : float, default 0.2
        ``phi``, the sampling share's scale, > 0.
    max_share : float, default 0.6
        ``p_max``, the largest share of the available users a sample takes, in (0, 1].
    max_users : int, optional
        ``n_max``, the most users a sample asks; ``floor(N/5)`` if omitted.
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
        ``slot -> bool | None``, a test hook that replaces the publish rule where not None.

    Spend
    -----
    ``eps`` per report; users asked at slot t are unavailable until slot ``t + w``, so each
    user reports at most once per window: ``eps`` per window.

    Notes
    -----
    Where Algorithm 5 is open to reading: the feedback error is the mean absolute change (a
    scalar); the interval update divides by ``sqrt(V)`` (the paper prints ``Var[c_t]``);
    ``R = V(eps, n_t)``; ``n_t < 1`` means no sample (retry at the next slot, as when nobody
    answers); the first sample is at t = 1 and does not update the interval. The defaults of
    ``Kp, Ki, Kd, pi_i, theta, phi, p_max`` are RescueDP's published values; ``n_max``, ``Q``
    and ``P0`` are ours.

    Examples
    --------
    >>> import numpy as np
    >>> from wevent.core.local.device_reports import Devices
    >>> m = LPRescueDP(1.0, 4, 2, population=1000, devices=Devices.from_seed(0))
    >>> first = m.step(np.zeros(1000, dtype=int))
    >>> first.n2 == min(int(0.2 * np.log(2) * 1000), 1000 // 5), first.strategy.value
    (True, 'publish')

    References
    ----------
    X. Ren, L. Shi, W. Yu, S. Yang, C. Zhao, Z. Xu. LDP-IDS: Local Differential Privacy for
    Infinite Data Streams. SIGMOD 2022 (the SIGMOD version), and its extended arXiv version
    (the arXiv version): Algorithm 5 of the SIGMOD version, an extension of population division.
    """

    name = "lp-rescuedp"
    OPTIONS = {
        "sample_share": Option.number("phi, the sampling share's scale", 0, example=0.3, open_low=True),
        "max_share": Option.number("p_max, the largest share of the available users a sample takes", 0, 1,
                                   example=0.5, open_low=True),
        "max_users": Option.integer("n_max, the most users a sample asks", 1, 2**32, example=10,
                                    derived="floor(N/5)"),
    }

    def __init__(
        self,
        epsilon: float,
        window: int,
        domain_size: int,
        population: int,
        *,
        sample_share: float = 0.2,
        max_share: float = 0.6,
        max_users: int | None = None,
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
        self.max_users = check_positive_int(self.population // 5 if max_users is None else max_users, "n_max")
        self.ledger = PopulationLedger(self.population, self.window)

    def _sample(self, slot: int, share: float) -> Request | Strategy:
        users = min(math.floor(share * self.ledger.available), self.max_users)
        return self._ask(slot, users) if users >= 1 else Strategy.NOT_SAMPLED

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "max_users": self.max_users}
