"""RescueDP's adaptive sampling and Kalman filter, shared by LP-RescueDP and LB-RescueDP."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..base import Strategy
from ..control import INTERVAL_OPTIONS, KALMAN_OPTIONS, PID_OPTIONS, KalmanFilter, PIDController, rescue_interval
from ..randomness import DerivedRandomness
from ..validation import ParameterError, check_positive
from ._base import DecisionOverride, LocalMechanism
from .device_reports import Devices
from .protocol import LocalDissimilarity, Request

__all__ = ["KalmanSampling"]


class KalmanSampling(LocalMechanism):
    """Samples on a PID-controlled interval and filters every sample with a per-bin Kalman filter.

    A subclass turns the sampling share ``p = min(phi ln(I + 1), p_max)`` into a request
    (:meth:`_sample`): a share of the available users (population division) or of the window's
    remaining budget (budget division). The filter's measurement noise is the oracle's variance
    of the sample, ``R = V(eps_t, n_t)``; see :class:`~.lp_rescue.LPRescueDP` for the update rules.

    Parameters
    ----------
    epsilon, window, domain_size, population
        As for every local mechanism.
    sample_share, max_share, kp, ki, kd, integral_window, interval_gain, process_noise, initial_covariance
        ``phi``, ``p_max``, the PID gains, ``pi_i``, ``theta``, ``Q`` and ``P0``.
    oracle, var_mode, bound, absent, randomness, devices, decision_override
        As for every local mechanism.
    """

    OPTIONS = {**PID_OPTIONS, **INTERVAL_OPTIONS, **KALMAN_OPTIONS}
    no_release_variance = ("a release is a Kalman correction of the previous one, so its noise is not its own: "
                           "it is correlated with every earlier release's")

    def __init__(
        self,
        epsilon: float,
        window: int,
        domain_size: int,
        population: int,
        *,
        sample_share: float,
        max_share: float,
        kp: float,
        ki: float,
        kd: float,
        integral_window: int,
        interval_gain: float,
        process_noise: float,
        initial_covariance: float,
        oracle: str,
        var_mode: str,
        bound: float | None,
        absent: bool,
        randomness: DerivedRandomness | None,
        devices: Devices | None,
        decision_override: DecisionOverride | None,
    ) -> None:
        super().__init__(epsilon, window, domain_size, population, oracle=oracle, var_mode=var_mode, bound=bound,
                         absent=absent, randomness=randomness, devices=devices, decision_override=decision_override)
        self.sample_share = check_positive(sample_share, "phi")
        self.max_share = check_positive(max_share, "p_max")
        if self.max_share > 1:
            raise ParameterError(f"p_max is a share of what is available: at most 1, got {max_share!r}")
        self.pid = PIDController(kp, ki, kd, integral_window)
        self.interval_gain = float(interval_gain)
        self.kalman = KalmanFilter(process_noise, initial_covariance)
        self.interval = 1.0
        self.next_sample = 1
        self.last_sample = 0  # 0: no sample yet

    def _sample(self, slot: int, share: float) -> Request | Strategy:
        """The sample of ``slot`` taking ``share`` of what is available, or NOT_SAMPLED."""
        raise NotImplementedError

    def _decide(self, slot: int, dissimilarity: LocalDissimilarity | None) -> Request | Strategy:
        self.kalman.predict()  # the prior is the last release
        if slot != self.next_sample:
            return Strategy.NOT_SAMPLED
        return self._sample(slot, min(self.sample_share * math.log(self.interval + 1), self.max_share))

    def _fresh_release(self, estimate: np.ndarray, request: Request, n: int) -> np.ndarray:
        noise = request.make_oracle(self.var_mode).variance(n)
        release = self.kalman.correct(self.last_release, estimate, noise)
        slot = request.slot
        if self.last_sample:
            error = float(np.mean(np.abs(release - self.last_release)))
            delta = float(self.pid.update([0], [error], [slot - self.last_sample])[0])
            self.interval = float(rescue_interval(self.interval, delta, math.sqrt(noise), self.interval_gain))
        self.last_sample, self.next_sample = slot, slot + math.floor(self.interval)
        return release

    def _closed(self, slot: int, publication: Request | None) -> None:
        if self.next_sample <= slot:  # no sample was made (nothing to ask, or nobody answered): retry
            self.next_sample = slot + 1
        super()._closed(slot, publication)

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "sample_share": self.sample_share, "max_share": self.max_share,
                "kp": self.pid.kp, "ki": self.pid.ki, "kd": self.pid.kd, "integral_window": self.pid.integral_window,
                "interval_gain": self.interval_gain, "process_noise": self.kalman.process_noise,
                "initial_covariance": self.kalman.initial_covariance}

    def _dynamic(self) -> dict[str, Any]:
        return {**super()._dynamic(), "interval": self.interval, "next_sample": self.next_sample,
                "last_sample": self.last_sample, "covariance": float(self.kalman.covariance[0]),
                "errors": self.pid.errors()}

    def _load(self, dynamic: dict[str, Any]) -> None:
        super()._load(dynamic)
        self.interval = float(dynamic["interval"])
        self.next_sample, self.last_sample = int(dynamic["next_sample"]), int(dynamic["last_sample"])
        self.kalman.covariance[0] = float(dynamic["covariance"])
        self.pid.load_errors([float(e) for e in dynamic["errors"]])
