"""LP-DSAT_w, population-division DSAT_w: [S] Algorithm 4 (spec ldp-ids §4.10, RES-15).

A feedback controller replaces LPD's error test: every publication asks a fixed
``m2 = floor(n2 / C)`` users (``n2 = N - floor(beta N)``, ``C`` the target number of publications
per window), and the threshold ``T_t`` the dissimilarity must reach moves up when the recent
publication rate ``count / min(t, w)`` exceeds ``C / w`` and down when it falls short (a
proportional controller, ``u = theta |(|rate - C/w| - sigma)| / sigma``, ``T_t`` kept in [0, 2]).
When the publications of the last ``w - 1`` slots leave fewer than ``m2`` users of the pool, the
slot asks nobody (not even M1) and repeats the last release (NULLIFIED); the threshold waits.

Resolutions (RES-15): M1 asks ``floor(n1 / w)`` users (not ``floor(n1 / C)``, which could exceed
``n1`` in a window); the rate divides by ``min(t, w)`` (``rate_denominator='slot'`` gives the
printed ``t``); ``T_t`` is updated from ``T_{t-1}``; the exhaustion test is ``n_rm < m2``.
Defaults are ours: ``C = ceil(w/4)``, ``sigma = 0.05``, ``T = V(eps, m2)``, ``theta = T / 10``.
Publishing needs ``dis > T_t`` (the paper's ``>=`` differs only on ties, which have probability 0).

Spend: ``eps`` per report and at most one report per user in any window: M1 asks at most ``n1``
users per window and publications at most ``n2``: ``eps`` per window.

>>> import numpy as np
>>> from pipeline.core.local.devices import Devices
>>> m = LPDSAT(1.0, 4, 2, population=400, devices=Devices.from_seed(0), decision_override=lambda t: True)
>>> results = m.run(np.zeros((6, 400), dtype=int))
>>> m.cutoff, m.publication_users, [r.n1 for r in results], [r.strategy.value[0] for r in results]
(1, 200, [50, 0, 0, 0, 50, 0], ['p', 'n', 'n', 'n', 'p', 'n'])
"""

from __future__ import annotations

import math
from typing import Any

from ..base import Strategy
from ..validation import ParameterError, check_epsilon, check_positive_int
from ._base import PopulationDivision, Scheduled
from .adaptive import make_oracle
from .protocol import LocalDissimilarity, Request
from .schedules import Distribution

__all__ = ["LPDSAT"]

THRESHOLD_CAP = 2.0  # [S] Alg 4 keeps T_t in [0, 2]


class LPDSAT(Scheduled, PopulationDivision):
    name = "lp-dsat"

    def __init__(self, epsilon: float, window: int, domain_size: int, population: int, *, cutoff: int | None = None,
                 threshold: float | None = None, tolerance: float = 0.05, gain: float | None = None,
                 rate_denominator: str = "window", **options) -> None:
        super().__init__(epsilon, window, domain_size, population, **options)
        self.cutoff = check_positive_int(math.ceil(self.window / 4) if cutoff is None else cutoff, "cutoff C")
        if self.cutoff >= self.window:
            raise ParameterError(f"the cutoff C must be below w = {self.window} publications per window, got {self.cutoff}")
        if rate_denominator not in ("window", "slot"):
            raise ParameterError(f"rate_denominator must be 'window' or 'slot', got {rate_denominator!r}")
        self.rate_denominator = rate_denominator
        self.pool = self.population - math.floor(self.beta * self.population)  # n2
        self.publication_users = self.pool // self.cutoff  # m2
        if self.publication_users < 1:
            raise ParameterError(f"n2 = {self.pool} users cannot fill C = {self.cutoff} publications per window")
        oracle = make_oracle(self.oracle, self.epsilon, self.domain_size, bound=self.bound, var_mode=self.var_mode)
        self.initial_threshold = oracle.variance(self.publication_users) if threshold is None else float(threshold)
        self.tolerance = check_epsilon(tolerance, "tolerance sigma")
        self.gain = self.initial_threshold / 10 if gain is None else float(gain)
        self.threshold = self.initial_threshold
        self.schedule = Distribution(self.pool, self.window)

    def _open(self, slot: int) -> Request | None:
        if self.schedule.remaining() < self.publication_users:
            return None  # no population left for a publication in this window: ask nobody
        return super()._open(slot)

    def _decide(self, slot: int, dissimilarity: LocalDissimilarity | None) -> Request | Strategy:
        if self._dissimilarity_request is None:
            return Strategy.NULLIFIED
        count = (self.pool - self.schedule.remaining()) / self.publication_users  # publications, last w-1 slots
        rate = count / (min(slot, self.window) if self.rate_denominator == "window" else slot)
        target = self.cutoff / self.window
        step = self.gain * abs(abs(rate - target) - self.tolerance) / self.tolerance
        self.threshold = max(0.0, self.threshold - step) if rate < target else min(THRESHOLD_CAP, self.threshold + step)
        if self._publishes(slot, dissimilarity, self.threshold):
            return self._ask(slot, self.publication_users)
        return Strategy.APPROXIMATE

    def _closed(self, slot: int, publication: Request | None) -> None:
        self.schedule.record(slot, publication.size if publication is not None else 0)
        super()._closed(slot, publication)

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "cutoff": self.cutoff, "threshold": self.initial_threshold,
                "tolerance": self.tolerance, "gain": self.gain, "rate_denominator": self.rate_denominator}

    def _dynamic(self) -> dict[str, Any]:
        return {**super()._dynamic(), "threshold": self.threshold}

    def _load(self, dynamic: dict[str, Any]) -> None:
        super()._load(dynamic)
        self.threshold = float(dynamic["threshold"])
