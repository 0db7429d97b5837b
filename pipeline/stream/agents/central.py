"""The central model's logic: every central mechanism on M1 and M2 (:class:`CentralLogic`).

A central mechanism splits a slot as the core does (:class:`~wevent.core.central.CentralMechanism`):
``measure`` (M1, the private dissimilarity) and ``publish`` (M2, the decision and the release).

* BD, BA and DSAT_w: M1 is the shared dissimilarity measure, one private number per slot; M2
  decides with it against its threshold and publishes.
* BD and BA with grouping: M1 measures one private dissimilarity per group of bins, a vector that
  :class:`~wevent.stream.wire.messages.MeasuredMessage` carries to M2, which tests every group.
  The groups follow the releases (the bins are regrouped every period by their releases' RMS), so
  M1 keeps the partition itself in its state and moves it with every release it learns
  (:meth:`CentralLogic.follow`), as M2's mechanism moves its own: the two agree since both apply
  the same public releases, in order.
* Uniform, Sample, FAST_w, RescueDP, PeGaSus and AdaPub have no dissimilarity phase: M1 measures
  nothing and passes the slot's counts on, and M2 runs the whole slot (sampling, Kalman
  filtering, grouping in time, smoothing: every decision reads public releases or spends the
  slot's own budget in M2). Their state, raw counts of open groups included (PeGaSus, AdaPub: the
  trusted aggregator's), lives in M2's.
"""

from __future__ import annotations

import copy
from typing import Protocol, cast, runtime_checkable

import numpy as np

from ...core.central import CentralMechanism, Dissimilarity
from ...core.randomness import DerivedRandomness
from ...core.registry import mechanisms
from ..config import ConfigError, StreamConfig
from .logic import StreamLogic

__all__ = ["CentralLogic", "FollowingMeasure"]


@runtime_checkable
class FollowingMeasure(Protocol):
    """An M1 whose measure depends on the releases so far (the grouped mechanisms' partition of the bins)."""

    def measure(self, slot: int, counts: np.ndarray, last_release: np.ndarray,
                randomness: DerivedRandomness) -> Dissimilarity: ...

    def observe(self, slot: int, release: np.ndarray) -> None: ...

    def state(self) -> dict: ...

    def load(self, state: dict) -> None: ...


class CentralLogic(StreamLogic):
    """Every central mechanism: M1 is its dissimilarity measure (none for those without one)."""

    def __init__(self, stream: StreamConfig, randomness: DerivedRandomness) -> None:
        super().__init__(stream, randomness)

    _template: CentralMechanism

    def new_mechanism(self) -> CentralMechanism:
        s = self.stream
        mechanism = cast(type[CentralMechanism], mechanisms()[s.mechanism])  # the config took a central one
        budget = self._budget()
        try:  # a Mode B/C query index takes its budget out of every window first (composition)
            return mechanism(budget.host, budget.window, s.domain, randomness=self.randomness, **s.mechanism_options)
        except TypeError as exc:
            raise ConfigError(f"stream {s.name!r}: invalid options for {s.mechanism}: {exc}") from None

    def _input(self, counts: np.ndarray) -> np.ndarray:
        return counts.reshape(-1).astype(float)  # one group: the histogram c_t

    def _following(self, measure_state: dict) -> FollowingMeasure | None:
        """The mechanism's M1 in ``measure_state``, where it follows the releases (None otherwise)."""
        m1 = self._template.dissimilarity_measure
        if not isinstance(m1, FollowingMeasure):
            return None
        m1 = copy.copy(m1)  # the template's stays as it starts
        m1.load(measure_state)
        return m1

    def measure_state(self) -> dict:
        m1 = self._template.dissimilarity_measure
        return m1.state() if isinstance(m1, FollowingMeasure) else {}

    def follow(self, measure_state, slot, release):
        m1 = self._following(measure_state)
        if m1 is None:
            return measure_state
        m1.observe(slot, np.asarray(release, dtype=float))
        return m1.state()

    def measure(self, slot, counts, last_release, measure_state):
        m1 = self._following(measure_state) or self._template.dissimilarity_measure
        if m1 is None:
            return None
        return m1.measure(slot, self._input(counts), np.asarray(last_release, dtype=float), self.randomness)

    def publish(self, mechanism, counts, dissimilarity):
        return mechanism.publish(self._input(counts), dissimilarity)
