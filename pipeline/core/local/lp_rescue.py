"""LP-RescueDP, population-division RescueDP: [S] Algorithm 5 (spec ldp-ids §4.11, RES-16).

No dissimilarity: the method samples on an adaptive schedule. At a sampling slot it asks
``n_t = min(floor(p |U_A|), n_max)`` available users with ``p = min(phi ln(I + 1), p_max)``, where
``I`` is the interval that scheduled the slot; their estimate ``z`` corrects a per-bin Kalman filter
(random-walk model: the prior is the last release, ``P += Q`` every slot; ``R = V(eps, n_t)``,
``K = P / (P + R)``, release ``x + K (z - x)``). From the second sample on, a PID controller on the
change of the release, ``E = mean_k |r_t[k] - r_l[k]|``, moves the interval:
``delta = Kp E + Ki mean(last pi_i E) + Kd (E - E_prev) / (t - l)``,
``I = max(1, I + theta (1 - (delta / sqrt(R))^2))``; the next sample is at ``t + floor(I)``.
Slots in between repeat the last release (NOT_SAMPLED).

Resolutions (RES-16): the feedback error is the mean absolute change (a scalar); the interval
update divides by ``sqrt(V)`` (the paper prints ``Var[c_t]``); ``R = V(eps, n_t)``; ``n_t < 1``
means no sample (retry at the next slot, as when nobody answers); the first sample is at t = 1
and does not update the interval. Defaults: ``Kp = 0.9, Ki = 0.1, Kd = 0, pi_i = 3, theta = 10,
phi = 0.2, p_max = 0.6`` (RescueDP's published values), ``n_max = floor(N/5)``, ``Q = 1e-5``, ``P0 = 1``.

Spend: ``eps`` per report; users asked at slot t are unavailable until slot ``t + w``, so each
user reports at most once per window: ``eps`` per window.

>>> import numpy as np
>>> from pipeline.core.local.devices import Devices
>>> m = LPRescueDP(1.0, 4, 2, population=1000, devices=Devices.from_seed(0))
>>> first = m.step(np.zeros(1000, dtype=int))
>>> first.n2 == min(int(0.2 * np.log(2) * 1000), 1000 // 5), first.strategy.value
(True, 'publish')
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..base import Strategy
from ..validation import ParameterError, check_epsilon, check_positive_int
from ._base import LocalMechanism, Populated
from .population import PopulationLedger
from .protocol import LocalDissimilarity, Request

__all__ = ["LPRescueDP"]


class LPRescueDP(Populated, LocalMechanism):
    name = "lp-rescuedp"
    no_release_variance = ("a release is a Kalman correction of the previous one, so its noise is not its own: "
                           "it is correlated with every earlier release's")

    def __init__(self, epsilon: float, window: int, domain_size: int, population: int, *, sample_share: float = 0.2,
                 max_share: float = 0.6, max_users: int | None = None, kp: float = 0.9, ki: float = 0.1,
                 kd: float = 0.0, integral_window: int = 3, interval_gain: float = 10.0,
                 process_noise: float = 1e-5, initial_covariance: float = 1.0, **options) -> None:
        super().__init__(epsilon, window, domain_size, population, **options)
        self.sample_share = check_epsilon(sample_share, "phi")
        self.max_share = check_epsilon(max_share, "p_max")
        if self.max_share > 1:
            raise ParameterError(f"p_max is a share of the available users: at most 1, got {max_share!r}")
        self.max_users = check_positive_int(self.population // 5 if max_users is None else max_users, "n_max")
        self.kp, self.ki, self.kd = float(kp), float(ki), float(kd)
        self.integral_window = check_positive_int(integral_window, "integral window pi_i")
        self.interval_gain = float(interval_gain)
        self.process_noise = float(process_noise)
        self.initial_covariance = check_epsilon(initial_covariance, "P0")
        self.ledger = PopulationLedger(self.population, self.window)
        self.interval = 1.0
        self.next_sample = 1
        self.last_sample = 0  # 0: no sample yet
        self.covariance = self.initial_covariance
        self.errors: list[float] = []  # feedback errors of the last pi_i samples (at least two kept)

    def _decide(self, slot: int, dissimilarity: LocalDissimilarity | None) -> Request | Strategy:
        self.covariance += self.process_noise  # Kalman predict: the prior is the last release
        if slot != self.next_sample:
            return Strategy.NOT_SAMPLED
        share = min(self.sample_share * math.log(self.interval + 1), self.max_share)
        users = min(math.floor(share * self.ledger.available), self.max_users)
        return self._ask(slot, users) if users >= 1 else Strategy.NOT_SAMPLED

    def _fresh_release(self, estimate: np.ndarray, request: Request, n: int) -> np.ndarray:
        noise = self._error(n)
        gain = self.covariance / (self.covariance + noise)
        release = self.last_release + gain * (estimate - self.last_release)
        self.covariance *= 1 - gain
        slot = request.slot
        if self.last_sample:
            error = float(np.mean(np.abs(release - self.last_release)))
            change = (error - self.errors[-1]) / (slot - self.last_sample) if self.errors else 0.0
            self.errors = (self.errors + [error])[-max(self.integral_window, 2):]
            delta = self.kp * error + self.ki * float(np.mean(self.errors[-self.integral_window:])) + self.kd * change
            self.interval = max(1.0, self.interval + self.interval_gain * (1 - (delta / math.sqrt(noise)) ** 2))
        self.last_sample, self.next_sample = slot, slot + math.floor(self.interval)
        return release

    def _closed(self, slot: int, publication: Request | None) -> None:
        if self.next_sample <= slot:  # no sample was made (nobody to ask, or nobody answered): retry
            self.next_sample = slot + 1
        super()._closed(slot, publication)

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "sample_share": self.sample_share, "max_share": self.max_share,
                "max_users": self.max_users, "kp": self.kp, "ki": self.ki, "kd": self.kd,
                "integral_window": self.integral_window, "interval_gain": self.interval_gain,
                "process_noise": self.process_noise, "initial_covariance": self.initial_covariance}

    def _dynamic(self) -> dict[str, Any]:
        return {**super()._dynamic(), "interval": self.interval, "next_sample": self.next_sample,
                "last_sample": self.last_sample, "covariance": self.covariance, "errors": list(self.errors)}

    def _load(self, dynamic: dict[str, Any]) -> None:
        super()._load(dynamic)
        self.interval = float(dynamic["interval"])
        self.next_sample, self.last_sample = int(dynamic["next_sample"]), int(dynamic["last_sample"])
        self.covariance = float(dynamic["covariance"])
        self.errors = [float(e) for e in dynamic["errors"]]
