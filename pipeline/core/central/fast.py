"""FAST_w: FAST's adaptive sampling and filtering on disjoint blocks of w slots (Kellaris et al. 2014, Section 3)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ..base import StepResult, Strategy
from ..control import INTERVAL_OPTIONS, KALMAN_OPTIONS, PID_OPTIONS, KalmanFilter, PIDController
from ..options import Option
from ..randomness import DerivedRandomness
from ..validation import ParameterError, check_positive
from ._base import CentralMechanism, DecisionOverride

__all__ = ["FASTw"]


def _floor(value: Fraction) -> float:
    """The largest float not above ``value``: a budget share that never rounds up."""
    share = float(value)
    while Fraction(share) > value:
        share = math.nextafter(share, 0.0)
    return share


class FASTw(CentralMechanism):
    """FAST_w: FAST run afresh on every block of ``w`` slots, with half the budget each.

    The stream is cut into blocks of ``w`` slots (slots ``bw + 1 .. (b+1)w``); every block is a
    finite stream to FAST with budget ``epsilon / 2`` and at most ``M = max(1, floor(r w))``
    samples, each spending ``eps_s = (epsilon / 2) / M`` (rounded down). A block's first slot is
    a sample whose noisy counts are released as they are; the next ``min(T_i, M) - 1`` slots
    sample too (the PID controller needs ``T_i`` errors). Every slot after the first predicts the
    last release and adds ``Q`` to the Kalman covariance; a sample corrects the prediction with
    its noisy counts, ``K = P / (P + R)``. From then on a slot samples when it is the next
    sampling point and the block has samples left; the sample's feedback error
    ``E = mean_j |x_j - x_j^-| / max(x_j, 1)`` (posterior against prior) feeds the PID
    controller, ``delta = Kp E + Ki mean(last T_i E) + Kd dE / dt``, and the interval becomes
    ``I <- max(1, I + theta (1 - exp((delta - xi) / xi)))``; the next sampling point is
    ``floor(I)`` slots later. Other slots repeat the last release (NOT_SAMPLED).

    There is no dissimilarity: :meth:`measure` (M1) returns None and :meth:`publish` (M2) samples
    or repeats; its state is public (releases, the interval, the filter's covariance).

    Parameters
    ----------
    epsilon : float
        The budget of any window of ``window`` consecutive slots, > 0.
    window : int
        ``w``, the window length in slots and the length of a block, >= 1.
    domain_size : int
        ``d``, the bins of a slot's histogram of counts (sensitivity 1 per user and slot).
    sample_ratio : float, default 0.15
        ``r``: a block holds at most ``M = max(1, floor(r w))`` samples, in (0, 1].
    kp, ki, kd : float, default 0.9, 0.1, 0.0
        The PID controller's proportional gain; the PID controller's integral gain; the PID
        controller's derivative gain.
    integral_window : int, default 5
        ``T_i``, the feedback errors the integral term averages (and the first samples of a block).
    interval_gain : float, default 5.0
        ``theta``, the interval's gain.
    error_target : float, default 0.1
        ``xi``, the feedback error at which the interval stays as it is, > 0.
    process_noise : float, default 1e5
        ``Q``, the Kalman filter's process noise per slot, >= 0.
    measurement_noise : float, default 1e6
        ``R``, the variance the filter assumes of a sample, > 0.
    initial_covariance : float, default 100.0
        ``P0``, the Kalman filter's initial covariance (at the start of every block), > 0.
    randomness : DerivedRandomness, optional
        Where every draw comes from (a fresh random key if omitted).
    clamp_round : bool, default False
        Round fresh releases to non-negative integers (post-processing, no budget).
    noise : {"discrete", "laplace"}, default "discrete"
        Exact two-sided geometric noise on integer queries, or the paper's ``Lap(1/eps)``.
    decision_override : callable, optional
        ``slot -> bool | None``: True samples (while the block has samples left), False does
        not, where not None.

    Spend
    -----
    ``eps_s`` at a sample, 0 elsewhere; a block holds at most ``M`` samples and any window of
    ``w`` slots meets at most two blocks: at most ``2 M eps_s <= epsilon``
    (:attr:`window_spend_bound`).

    Notes
    -----
    FAST samples one count; Kellaris et al. run it on every bin separately. Bins on separate
    schedules spend at different slots, and a user who is in one bin at one slot and in another
    at the next would pay for the samples of both, so here all bins share one schedule, driven
    by their mean feedback error, and a slot's sample covers every bin (which costs ``eps_s``
    once: a user is in one bin per slot). The interval stays a real number (the next point is
    its floor); the integral term averages its errors as FAST's equation does. The defaults of
    ``r``, the gains, ``T_i``, ``theta``, ``xi``, ``Q``, ``R`` and ``P0`` are those the benchmark
    of Schäler et al. gives FAST_w (from the FAST authors' tool; it halves ``r`` to 0.075).

    Examples
    --------
    >>> from wevent.core.randomness import SecretKey, DerivedRandomness
    >>> m = FASTw(1.0, 20, 2, randomness=DerivedRandomness(SecretKey.from_seed(1)))
    >>> m.samples_per_block, m.sample_budget
    (3, 0.16666666666666666)
    >>> [r.strategy.value[0] for r in m.run([[50, 50]] * 5)]
    ['p', 'p', 'p', 'n', 'n']

    References
    ----------
    L. Fan, L. Xiong. An Adaptive Approach to Real-Time Aggregate Monitoring With Differential
    Privacy. IEEE TKDE 26(9), 2014 (and Real-time aggregate monitoring with differential privacy,
    CIKM 2012): Algorithm 3 (sampling with prediction and correction by the Kalman filter),
    Definition 4 (the feedback error), Equation 29 (the PID error) and Equation 32 (the interval
    adjustment), numbered as the benchmark of Schäler et al. annotates them. G. Kellaris, S. Papadopoulos, X. Xiao,
    D. Papadias. Differentially Private Event Sequences over Infinite Streams. PVLDB 7(12), 2014:
    Section 3 (FAST_w, the user-level adaptation with ``epsilon / 2`` per block).
    """

    name = "fast-w"
    OPTIONS = {
        **PID_OPTIONS, **INTERVAL_OPTIONS, **KALMAN_OPTIONS,
        "sample_ratio": Option.number("r: a block holds at most M = max(1, floor(r w)) samples", 0, 1, example=0.2,
                                      open_low=True),
        "error_target": Option.number("xi, the feedback error at which the interval stays as it is", 0, example=0.2,
                                      open_low=True),
        "measurement_noise": Option.number("R, the variance the filter assumes of a sample", 0, example=2e6,
                                           open_low=True),
    }

    def __init__(
        self,
        epsilon: float,
        window: int,
        domain_size: int,
        *,
        sample_ratio: float = 0.15,
        kp: float = 0.9,
        ki: float = 0.1,
        kd: float = 0.0,
        integral_window: int = 5,
        interval_gain: float = 5.0,
        error_target: float = 0.1,
        process_noise: float = 1e5,
        measurement_noise: float = 1e6,
        initial_covariance: float = 100.0,
        randomness: DerivedRandomness | None = None,
        clamp_round: bool = False,
        noise: str = "discrete",
        decision_override: DecisionOverride | None = None,
    ) -> None:
        super().__init__(epsilon, window, domain_size, randomness=randomness, clamp_round=clamp_round, noise=noise,
                         decision_override=decision_override)
        self.sample_ratio = check_positive(sample_ratio, "sample ratio r")
        if self.sample_ratio > 1:
            raise ParameterError(f"the sample ratio r is a share of the block: at most 1, got {sample_ratio!r}")
        self.samples_per_block = max(1, math.floor(self.sample_ratio * self.window))
        self.sample_budget = _floor(Fraction(self.epsilon) / (2 * self.samples_per_block))
        self.pid = PIDController(kp, ki, kd, integral_window)
        self.interval_gain = float(interval_gain)
        self.error_target = check_positive(error_target, "xi")
        self.measurement_noise = check_positive(measurement_noise, "R")
        self.kalman = KalmanFilter(process_noise, initial_covariance)
        self._start_block()

    def _start_block(self) -> None:
        self.samples = 0  # taken in the current block
        self.interval = 1.0
        self.next_sample = self.pid.integral_window  # the block position right after the first samples
        self.last_feedback = 0  # the block position of the last feedback error
        self.pid.reset()
        self.kalman.reset()

    @property
    def window_spend_bound(self) -> float:
        return 2 * self.samples_per_block * self.sample_budget

    def _publish(self, slot: int, counts: np.ndarray, dissimilarity) -> StepResult:
        position = (slot - 1) % self.window
        if position == 0:
            self._start_block()
        else:
            self.kalman.predict()
        burst = self.samples < min(self.pid.integral_window, self.samples_per_block)
        wants = position == 0 or burst or position == self.next_sample
        if self.decision_override is not None:
            forced = self.decision_override(slot)
            wants = wants if forced is None else bool(forced)
        if not wants or self.samples >= self.samples_per_block:
            return self._repeat(slot, Strategy.NOT_SAMPLED)
        measured = self._noisy(slot, counts, self.sample_budget)
        self.samples += 1
        if position == 0:
            self._release(measured)
            return self._result(slot, Strategy.PUBLISH, self.sample_budget)
        prior = self.last_release
        posterior = self.kalman.correct(prior, measured, self.measurement_noise)
        if not burst:
            error = float(np.mean(np.abs(posterior - prior) / np.maximum(posterior, 1.0)))
            delta = float(self.pid.update([0], [error], [position - self.last_feedback])[0])
            self.last_feedback = position
            exponent = min((delta - self.error_target) / self.error_target, 700.0)  # exp stays finite
            self.interval = max(1.0, self.interval + self.interval_gain * (1.0 - math.exp(exponent)))
            self.next_sample = position + math.floor(self.interval)
        self._release(posterior)
        return self._result(slot, Strategy.PUBLISH, self.sample_budget)

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "sample_ratio": self.sample_ratio, "kp": self.pid.kp, "ki": self.pid.ki,
                "kd": self.pid.kd, "integral_window": self.pid.integral_window, "interval_gain": self.interval_gain,
                "error_target": self.error_target, "process_noise": self.kalman.process_noise,
                "measurement_noise": self.measurement_noise, "initial_covariance": self.kalman.initial_covariance}

    def _dynamic(self) -> dict[str, Any]:
        return {**super()._dynamic(), "samples": self.samples, "interval": self.interval,
                "next_sample": self.next_sample, "last_feedback": self.last_feedback, "covariance": float(self.kalman.covariance[0]),
                "pid": self.pid.state()}

    def _load(self, dynamic: dict[str, Any]) -> None:
        super()._load(dynamic)
        self.samples, self.next_sample = int(dynamic["samples"]), int(dynamic["next_sample"])
        self.last_feedback = int(dynamic["last_feedback"])
        self.interval = float(dynamic["interval"])
        self.kalman.covariance[0] = float(dynamic["covariance"])
        self.pid.load(dynamic["pid"])
