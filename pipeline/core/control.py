"""Feedback controllers of the adaptive-sampling mechanisms: PID, Kalman filter, rate-steered threshold.

FAST (Fan & Xiong), RescueDP (Wang et al.) and DSAT (Li et al.) decide when to sample from what
they published before: a PID controller turns the change of the releases into an error that
moves a sampling interval, a Kalman filter smooths every sample against the last release, and
DSAT's controller moves a threshold towards a target publication rate. They read public
releases only, so they spend no budget. The central mechanisms and their local-model
counterparts share these classes.

Both stateful controllers are vectorised over *channels* (one per bin where every bin samples on
its own schedule, a single one where all bins share a schedule); ``channels`` arguments select
the ones a slot updates.

>>> pid = PIDController(kp=0.9, ki=0.1, kd=0.0, integral_window=3)
>>> [round(float(pid.update([0], [e], [1])[0]), 3) for e in (1.0, 2.0, 0.0)]
[1.0, 1.95, 0.1]
>>> kalman = KalmanFilter(process_noise=1.0, initial_covariance=1.0)
>>> kalman.predict()
>>> kalman.correct(np.array([0.0]), np.array([4.0]), 2.0).tolist(), kalman.covariance.tolist()
([2.0], [1.0])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .options import Option
from .validation import ParameterError, check_positive, check_positive_int

__all__ = ["PIDController", "KalmanFilter", "rescue_interval", "steer_threshold", "PID_OPTIONS", "KALMAN_OPTIONS",
           "INTERVAL_OPTIONS", "RATE_CONTROL_OPTIONS"]


class PIDController:
    """A PID controller on a feedback error, one per channel.

    ``update`` takes the newest error ``E_n`` of some channels and the slots since their previous
    error, and returns ``delta = Kp E_n + Ki mean(E_{n-pi+1..n}) + Kd (E_n - E_{n-1}) / (t_n - t_{n-1})``
    (the derivative is 0 at a channel's first error). Every channel keeps its last
    ``max(pi, 2)`` errors, oldest first, with a count of how many are real.

    Parameters
    ----------
    kp, ki, kd : float
        The proportional, integral and derivative gains.
    integral_window : int
        ``pi``, the errors the integral term averages, >= 1.
    channels : int, default 1
        Independent controllers updated together.
    """

    def __init__(self, kp: float, ki: float, kd: float, integral_window: int, channels: int = 1) -> None:
        self.kp, self.ki, self.kd = float(kp), float(ki), float(kd)
        self.integral_window = check_positive_int(integral_window, "integral window pi_i")
        self.history = np.zeros((check_positive_int(channels, "channels"), max(self.integral_window, 2)))
        self.counts = np.zeros(channels, dtype=np.int64)

    def update(self, channels, errors, elapsed) -> np.ndarray:
        """Record ``errors`` of ``channels`` (``elapsed`` slots after their last) and return their ``delta``."""
        channels = np.asarray(channels, dtype=np.int64)
        errors = np.asarray(errors, dtype=float)
        counts = self.counts[channels]
        previous = self.history[channels, -1]
        change = np.where(counts > 0, (errors - previous) / np.maximum(np.asarray(elapsed, dtype=float), 1.0), 0.0)
        history = np.roll(self.history[channels], -1, axis=1)
        history[:, -1] = errors
        counts = np.minimum(counts + 1, history.shape[1])
        self.history[channels], self.counts[channels] = history, counts
        terms = np.minimum(counts, self.integral_window)
        recent = np.arange(history.shape[1]) >= history.shape[1] - terms[:, None]  # the last `terms` columns
        integral = (history * recent).sum(axis=1) / terms
        return self.kp * errors + self.ki * integral + self.kd * change

    def errors(self, channel: int = 0) -> list[float]:
        """The errors ``channel`` keeps, oldest first."""
        return self.history[channel, self.history.shape[1] - int(self.counts[channel]):].tolist()

    def reset(self, channels=slice(None)) -> None:
        self.history[channels] = 0.0
        self.counts[channels] = 0

    def state(self) -> dict[str, Any]:
        return {"history": self.history.copy(), "counts": self.counts.copy()}

    def load(self, state: dict[str, Any]) -> None:
        self.history = np.array(state["history"], dtype=float).reshape(self.history.shape)
        self.counts = np.array(state["counts"], dtype=np.int64).reshape(self.counts.shape)

    def load_errors(self, errors, channel: int = 0) -> None:
        """Set ``channel``'s errors (oldest first; only the last ``max(pi, 2)`` are kept)."""
        kept = list(errors)[-self.history.shape[1]:]
        self.history[channel] = 0.0
        if kept:
            self.history[channel, -len(kept):] = kept
        self.counts[channel] = len(kept)


class KalmanFilter:
    """A Kalman filter on a random walk, one covariance per channel: the prior is the last release.

    ``predict`` adds the process noise ``Q`` to the covariance (once per slot); ``correct``
    blends a prior with a measurement of noise variance ``R``: ``K = P / (P + R)``, posterior
    ``prior + K (measurement - prior)``, ``P <- (1 - K) P``. A channel's covariance broadcasts
    over the values it filters (a single channel may filter a whole histogram).

    Parameters
    ----------
    process_noise : float
        ``Q``, >= 0.
    initial_covariance : float
        ``P0``, > 0.
    channels : int, default 1
        Independent covariances.
    """

    def __init__(self, process_noise: float, initial_covariance: float, channels: int = 1) -> None:
        self.process_noise = float(process_noise)
        if not self.process_noise >= 0:
            raise ParameterError(f"the process noise Q must be >= 0, got {process_noise!r}")
        self.initial_covariance = check_positive(initial_covariance, "P0")
        self.covariance = np.full(check_positive_int(channels, "channels"), self.initial_covariance)

    def predict(self, channels=slice(None)) -> None:
        self.covariance[channels] += self.process_noise

    def correct(self, prior, measurement, noise, channels=slice(None)) -> np.ndarray:
        """The posterior of ``channels`` given their ``prior`` and a ``measurement`` of variance ``noise``."""
        covariance = self.covariance[channels]
        gain = covariance / (covariance + noise)
        self.covariance[channels] = covariance * (1.0 - gain)
        return prior + gain * (np.asarray(measurement, dtype=float) - prior)

    def reset(self, channels=slice(None)) -> None:
        self.covariance[channels] = self.initial_covariance


def rescue_interval(interval, delta, noise_scale, gain):
    """RescueDP's next sampling interval: ``max(1, I + theta (1 - (delta / noise_scale)^2))``.

    The interval grows while the PID error ``delta`` stays below the noise a sample would carry
    (a sample would add more noise than the change it catches) and shrinks when it exceeds it.

    >>> float(rescue_interval(2.0, delta=1.0, noise_scale=2.0, gain=10.0))
    9.5
    """
    return np.maximum(1.0, interval + gain * (1.0 - (np.asarray(delta) / noise_scale) ** 2))


def steer_threshold(threshold: float, rate: float, target: float, tolerance: float, gain: float,
                    cap: float) -> float:
    """DSAT's threshold after one step of its proportional rate controller.

    The step is ``u = theta |(|rate - target| - sigma)| / sigma``; the threshold moves down by
    ``u`` while the publication rate is below its target (to publish more) and up otherwise,
    and stays in ``[0, cap]``.

    >>> steer_threshold(1.0, rate=0.1, target=0.25, tolerance=0.05, gain=0.1, cap=2.0)
    0.8
    """
    step = gain * abs(abs(rate - target) - tolerance) / tolerance
    return max(0.0, threshold - step) if rate < target else min(cap, threshold + step)


# The options of the mechanisms that use these controllers (:mod:`wevent.core.options`).
PID_OPTIONS = {
    "kp": Option.number("the PID controller's proportional gain", example=1.0),
    "ki": Option.number("the PID controller's integral gain", example=0.2),
    "kd": Option.number("the PID controller's derivative gain", example=0.1),
    "integral_window": Option.integer("the feedback errors the integral term averages", 1, 2**20, example=2),
}
INTERVAL_OPTIONS = {"interval_gain": Option.number("theta, the interval's gain", example=4.0)}
KALMAN_OPTIONS = {
    "process_noise": Option.number("Q, the Kalman filter's process noise per slot", 0, example=1e-4),
    "initial_covariance": Option.number("P0, the Kalman filter's initial covariance", 0, example=2.0, open_low=True),
}
RATE_CONTROL_OPTIONS = {
    "tolerance": Option.number("sigma, the rate error the controller tolerates", 0, example=0.1, open_low=True),
    "gain": Option.number("theta, the controller's gain", example=0.01, derived="T / 10"),
    "rate_denominator": Option.choice("divide the publication count by min(t, w) or, as printed, by t",
                                      ("window", "slot"), example="slot"),
}
