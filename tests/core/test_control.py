"""The shared feedback controllers: PID formula, Kalman steady state, the rate-steered threshold."""

import math

import numpy as np

from wevent.core.control import KalmanFilter, PIDController, rescue_interval, steer_threshold


def test_pid_follows_its_formula_per_channel():
    pid = PIDController(kp=0.5, ki=0.25, kd=2.0, integral_window=2, channels=3)
    assert pid.update([0, 2], [1.0, 4.0], [1, 1]).tolist() == [0.5 + 0.25, 2.0 + 1.0]  # no derivative yet
    # channel 0: E = 3 after 2 slots: 0.5*3 + 0.25*mean(1, 3) + 2*(3 - 1)/2
    assert pid.update([0], [3.0], [2]).tolist() == [1.5 + 0.5 + 2.0]
    assert pid.errors(0) == [1.0, 3.0] and pid.errors(1) == [] and pid.errors(2) == [4.0]


def test_kalman_covariance_reaches_the_riccati_fixed_point():
    # Predict then correct every slot: P = (P + Q) R / (P + Q + R) has the fixed point
    # P* = (-Q + sqrt(Q^2 + 4 Q R)) / 2, reached geometrically.
    q, r = 3.0, 50.0
    kalman = KalmanFilter(q, 1e4)
    for _ in range(200):
        kalman.predict()
        kalman.correct(np.zeros(1), np.zeros(1), r)
    assert math.isclose(kalman.covariance[0], (-q + math.sqrt(q * q + 4 * q * r)) / 2, rel_tol=1e-12)


def test_kalman_error_on_a_random_walk_has_the_steady_state_variance():
    # x_t = x_{t-1} + N(0, Q), z_t = x_t + N(0, R). In the steady state the posterior error e_t is
    # a Gaussian AR(1) with coefficient a = 1 - K and variance P*: mean(e^2) over T slots has sd
    # sqrt(2 P*^2 (1 + a^2) / ((1 - a^2) T)). 5 sd bounds it.
    q, r, T = 4.0, 100.0, 40_000
    rng = np.random.default_rng(7)
    truth = np.cumsum(rng.normal(0, math.sqrt(q), T))
    measured = truth + rng.normal(0, math.sqrt(r), T)
    kalman, estimate, errors = KalmanFilter(q, 1.0), np.zeros(1), []
    for t in range(T):
        kalman.predict()
        estimate = kalman.correct(estimate, measured[t : t + 1], r)
        errors.append(estimate[0] - truth[t])
    steady = (-q + math.sqrt(q * q + 4 * q * r)) / 2
    a = 1 - (steady + q) / (steady + q + r)
    squares = np.square(errors[1000:])
    sd = math.sqrt(2 * steady**2 * (1 + a * a) / ((1 - a * a) * squares.size))
    assert abs(squares.mean() - steady) <= 5 * sd


def test_interval_and_threshold_steps():
    assert rescue_interval(np.array([1.0, 5.0]), np.array([0.0, 4.0]), 2.0, 10.0).tolist() == [11.0, 1.0]
    assert steer_threshold(1.0, rate=0.5, target=0.25, tolerance=0.05, gain=0.1, cap=1.2) == 1.2
    assert steer_threshold(0.1, rate=0.0, target=0.25, tolerance=0.05, gain=0.1, cap=2.0) == 0.0
