"""Per-model glue between a stream's configuration and the privacy core.

The processors stay model-agnostic: they ask a :class:`StreamLogic` to build the mechanism,
compute M1's dissimilarity for a slot, run M2, and describe the slot for the audit topic.
"""

from __future__ import annotations

import numpy as np

from ...core import packing
from ...core.accounting import WindowSpend
from ...core.base import Mechanism, StepResult, restore
from ...core.central import Dissimilarity
from ...core.accounting import Budget
from ...core.randomness import DerivedRandomness
from ..config import StreamConfig
from ..wire.messages import MeasuredMessage, ReadyMessage
from ..wire.records import AuditRecord, ReleaseRecord
from .events import Released

__all__ = ["StreamLogic"]


class StreamLogic:
    """What the processors need to know about one stream's model.

    Users fall in *groups* that are charged alike at every slot: one group in the central model,
    one per requirement type in the personalized model. A slot's input is a (groups, d) count
    matrix. M2 accounts through the mechanism's own sliding ledger
    (:meth:`~wevent.core.base.Mechanism.sliding_ledger`), which knows how the model charges
    users and bounds every group's window by the host's share of the stream's
    :class:`~wevent.core.accounting.Budget`, or by ``eps_k``; the logic only says what a
    window's spend shows operators and the public record.
    """

    groups = 1

    def __init__(self, stream: StreamConfig, randomness: DerivedRandomness) -> None:
        self.stream = stream
        self.randomness = randomness
        self._template: Mechanism = self.new_mechanism()  # validates parameters up front; what the state is compared with

    def group_of_users(self) -> np.ndarray | None:
        """Row of each user in the count matrix (None: a single row)."""
        return None

    def budget_gauges(self, tightest: WindowSpend) -> tuple[float, float, float]:
        """What the window ending at a release shows operators, for the group closest to its bound
        (``tightest``, the host's window): the host's spend, the share a query index reserves, and
        the total the two must stay within (the stream's :class:`~wevent.core.accounting.Budget`)."""
        budget = self._budget()
        return tightest.spend, budget.reserved, budget.total

    def released(self, mechanism: Mechanism, result: StepResult, tightest: WindowSpend, now: float,
                 closed_at: float) -> Released:
        """What operators see of a release at wall time ``now`` of a slot closed at ``closed_at``;
        ``tightest`` is the window ending there closest to its bound (the sliding ledger's)."""
        spent, reserved, total = self.budget_gauges(tightest)
        return Released(self.stream.name, result.slot, result.strategy.value, now, max(0.0, now - closed_at),
                        spent, reserved, total)

    def record(self, mechanism: Mechanism, result: StepResult, group_window_spend: np.ndarray,
               slot_start: float = 0.0, slot_end: float = 0.0) -> ReleaseRecord:
        """The release line; ``group_window_spend[k]``: group k's spend over its own window ending here."""
        return ReleaseRecord.from_step(self.stream.name, mechanism, result, float(group_window_spend.max()),
                                       slot_start, slot_end)

    def _budget(self) -> Budget:
        """The stream's window budget: central and local streams have one (the personalized logic,
        whose users each have their own, never asks)."""
        budget = self.stream.budget
        assert budget is not None, f"stream {self.stream.name!r} has no window budget"
        return budget

    def new_mechanism(self) -> Mechanism:
        raise NotImplementedError

    def restore(self, blob: bytes, parts) -> Mechanism:
        """The mechanism whose state's head is ``blob`` and whose ``parts`` (a mapping from key to
        bytes) hold its large values (:func:`~wevent.core.packing.pack_split`)."""
        return restore(blob, self.randomness, parts=parts)

    def parameters_changed(self, mechanism: Mechanism) -> str | None:
        """Why the configured mechanism differs from the one in the state (None if they agree).

        Continuing a stream under other parameters would mix two mechanisms in one ledger, and
        re-deriving a slot's noise at another scale would give away its data: a stream's
        parameters are fixed for its lifetime (a new configuration needs a new stream name).
        """
        template = self._template
        configured, stored = packing.to_json(template.params()), packing.to_json(mechanism.params())
        if configured == stored and type(mechanism) is type(template):
            return None
        return f"the config says {configured}, the stream's state holds {stored}"

    def measure_state(self) -> dict:
        """M1's own state at the start, where its measure follows the releases (empty otherwise)."""
        return {}

    def follow(self, measure_state: dict, slot: int, release: np.ndarray) -> dict:
        """M1's own state once it learned release ``slot`` (M1 learns every release, in order)."""
        return measure_state

    def measure(self, slot: int, counts: np.ndarray, last_release: np.ndarray,
                measure_state: dict) -> Dissimilarity | None:
        """M1: the private dissimilarity of slot ``slot`` (None when the mechanism has none)."""
        raise NotImplementedError

    def slot_ready(self, slot: int, closed_at: float, counts: np.ndarray, last_release: np.ndarray,
                   measure_state: dict) -> MeasuredMessage | ReadyMessage:
        """What M1 sends M2 once slot ``slot`` closed everywhere and release ``slot - 1`` is known:
        the slot's counts with their private dissimilarity."""
        return MeasuredMessage(self.stream.name, slot, closed_at, counts,
                               self.measure(slot, counts, last_release, measure_state))

    def publish(self, mechanism: Mechanism, counts: np.ndarray, dissimilarity: Dissimilarity | None) -> StepResult:
        raise NotImplementedError

    def audit(self, mechanism: Mechanism, result: StepResult) -> AuditRecord:
        return AuditRecord(
            stream=self.stream.name,
            slot=result.slot,
            mechanism=mechanism.name,
            epsilon=self._budget().total,
            window=mechanism.window,
            eps1=float(result.eps1),
            eps2=float(result.eps2),
            reserved=self._budget().reserved,
        )
