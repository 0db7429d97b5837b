"""The local model's logic: M2 hosts the request/response protocol, M1 measures phase 1 (:class:`LocalLogic`)."""

from __future__ import annotations

from dataclasses import replace
from typing import cast

import numpy as np

from ...core.local._base import LocalMechanism, dissimilarity_of
from ...core.local.protocol import LocalDissimilarity, Request
from ...core.local.user_sets import users_to_text
from ...core.randomness import DerivedRandomness
from ...core.registry import mechanisms
from ..config import ConfigError, StreamConfig
from ..wire.messages import ReadyMessage
from ..wire.records import AuditRecord, local_release_record
from .logic import StreamLogic

__all__ = ["LocalLogic", "device_block_size", "answers_absent", "answer_categories"]


class LocalLogic(StreamLogic):
    """The local model: M2 hosts the mechanism's request/response protocol, M1 measures phase 1.

    No raw value reaches the server: the assembler only keeps the slot clock (watermarks), devices
    answer ``ldp.requests`` with perturbed reports, the collector sums them into the oracle's
    support, M1 turns a phase-1 support into the dissimilarity (:func:`dissimilarity_of`), and M2
    decides and publishes. ``options.block_size`` is the devices' and ``options.deadline_seconds``
    the collector's (not the mechanism's).

    Every asked user answers, with or without a value (:func:`answers_absent`): the mechanism's
    devices answer in the stream's ``domain`` values plus an "absent" category, and its releases
    have ``domain`` bins.
    """

    def __init__(self, stream: StreamConfig, randomness: DerivedRandomness) -> None:
        super().__init__(stream, randomness)

    _template: LocalMechanism

    def new_mechanism(self) -> LocalMechanism:
        s = self.stream
        mechanism = cast(type[LocalMechanism], mechanisms()[s.mechanism])  # the config took a local one
        budget = self._budget()
        try:
            return mechanism(budget.total, budget.window, s.domain, s.users, oracle=s.oracle,
                             absent=answers_absent(s.oracle), randomness=self.randomness, **s.mechanism_options)
        except TypeError as exc:
            raise ConfigError(f"stream {s.name!r}: invalid options for {s.mechanism}: {exc}") from None

    def slot_ready(self, slot, closed_at, counts, last_release, measure_state):
        return ReadyMessage(self.stream.name, slot, closed_at)  # the server has no data: M2 opens the slot's rounds

    @property
    def deadline_seconds(self) -> float:
        """How long the collector waits for the users asked in one phase."""
        return self.stream.deadline_seconds

    def measure_support(self, request: Request, support, n: int, last_release) -> LocalDissimilarity:
        """M1: the dissimilarity of a phase-1 support."""
        return dissimilarity_of(request, support, n, np.asarray(last_release, dtype=float), self._template.var_mode)

    def record(self, mechanism, result, group_window_spend, slot_start=0.0, slot_end=0.0):
        return local_release_record(self.stream.name, mechanism, result, float(group_window_spend.max()), slot_start,
                                    slot_end)

    def released(self, mechanism, result, tightest, now, closed_at):
        ledger = getattr(mechanism, "ledger", None)  # population division: who may be asked
        return replace(super().released(mechanism, result, tightest, now, closed_at),
                       communication_bits=result.bits, available_population=None if ledger is None else ledger.available)

    def audit(self, mechanism, result):
        phases = [{"phase": phase, "epsilon": float(e),
                   "users": None if users is None else users_to_text(users, mechanism.population)}
                  for phase, users, e in ((1, result.users1, result.eps1), (2, result.users2, result.eps2)) if e > 0]
        return AuditRecord(stream=self.stream.name, slot=result.slot, mechanism=mechanism.name,
                           epsilon=mechanism.epsilon, window=mechanism.window, eps1=float(result.eps1),
                           eps2=float(result.eps2), phases=phases)


def answers_absent(oracle: str) -> bool:
    """Whether a local stream's devices answer for a user without a value with an "absent" category.

    Frequency streams do, always: a server that asked only the users with a value would learn,
    from who answers and when, exactly who had one, which is raw data; so every asked user
    answers through the oracle and is charged alike, the absent category is the last of
    ``domain + 1``, and the releases drop its estimate. A mean (``hm``) has no category to spare,
    so a mean stream needs every user's value in every slot (its devices refuse to start without).
    """
    return oracle != "hm"


def answer_categories(oracle: str, domain: int) -> int:
    """The categories a local stream's devices answer in (its requests' ``domain_size``)."""
    return domain + int(answers_absent(oracle))


def device_block_size(stream: StreamConfig) -> int:
    """Users per device block of a local-model stream (the devices need no server key to know it)."""
    return stream.block_size
