"""DSAT_w's publication-rate controller, shared by LP-DSAT_w and LB-DSAT_w."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..base import Strategy
from ..control import RATE_CONTROL_OPTIONS, steer_threshold
from ..options import Option
from ..validation import ParameterError, check_positive, check_positive_int
from ._base import AdaptiveMechanism, Scheduled
from .protocol import LocalDissimilarity, Request
from .schedules import Distribution

__all__ = ["RateControlled", "THRESHOLD_CAP"]

THRESHOLD_CAP = 2.0  # Algorithm 4 keeps T_t in [0, 2]


class RateControlled(Scheduled, AdaptiveMechanism):
    """A fixed-size publication and a threshold ``T_t`` steered towards ``C`` publications per window.

    ``self.schedule`` (a :class:`~.schedules.Distribution`, set with :meth:`_start_controller`)
    holds the publication pool; each publication takes ``self.unit`` of it and asks for
    ``self.publication_amount`` (users or a budget). When the previous ``w - 1`` slots leave less
    than a unit, the slot asks nobody and repeats the last release (NULLIFIED). Otherwise ``T_t``
    moves by ``u = theta |(|rate - C/w| - sigma)| / sigma``, down when the publication rate
    ``count / min(t, w)`` is below ``C / w`` and up otherwise, kept in [0, 2], and the slot
    publishes when ``dis > T_t``.
    """

    OPTIONS = {
        "cutoff": Option.integer("C, the target publications per window", 1, 2**20, example=2, derived="ceil(w/4)"),
        **RATE_CONTROL_OPTIONS,
    }
    schedule: Distribution
    unit: int
    publication_amount: float

    if TYPE_CHECKING:  # from BudgetDivision or PopulationDivision, which follow in the method order
        def _ask(self, slot: int, amount: float) -> Request: ...

    def _check_cutoff(self, cutoff: int | None, rate_denominator: str) -> None:
        self.cutoff = check_positive_int(math.ceil(self.window / 4) if cutoff is None else cutoff, "cutoff C")
        if self.cutoff >= self.window:
            raise ParameterError(f"the cutoff C must be below w = {self.window} publications per window, got {self.cutoff}")
        if rate_denominator not in ("window", "slot"):
            raise ParameterError(f"rate_denominator must be 'window' or 'slot', got {rate_denominator!r}")
        self.rate_denominator = rate_denominator

    def _start_controller(self, pool: int, threshold: float | None, default_threshold: float, tolerance: float,
                          gain: float | None) -> None:
        self.schedule = Distribution(pool, self.window)
        self.initial_threshold = default_threshold if threshold is None else float(threshold)
        self.tolerance = check_positive(tolerance, "tolerance sigma")
        self.gain = self.initial_threshold / 10 if gain is None else float(gain)
        self.threshold = self.initial_threshold

    def _open(self, slot: int) -> Request | None:
        if self.schedule.remaining() < self.unit:
            return None  # nothing left for a publication in this window: ask nobody
        return super()._open(slot)

    def _decide(self, slot: int, dissimilarity: LocalDissimilarity | None) -> Request | Strategy:
        if self._dissimilarity_request is None:
            return Strategy.NULLIFIED
        count = (self.schedule.pool - self.schedule.remaining()) / self.unit  # publications, last w-1 slots
        rate = count / (min(slot, self.window) if self.rate_denominator == "window" else slot)
        target = self.cutoff / self.window
        self.threshold = steer_threshold(self.threshold, rate, target, self.tolerance, self.gain, THRESHOLD_CAP)
        if self._publishes(slot, dissimilarity, self.threshold):
            return self._ask(slot, self.publication_amount)
        return Strategy.APPROXIMATE

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "cutoff": self.cutoff, "threshold": self.initial_threshold,
                "tolerance": self.tolerance, "gain": self.gain, "rate_denominator": self.rate_denominator}

    def _dynamic(self) -> dict[str, Any]:
        return {**super()._dynamic(), "threshold": self.threshold}

    def _load(self, dynamic: dict[str, Any]) -> None:
        super()._load(dynamic)
        self.threshold = float(dynamic["threshold"])
