"""Per-model glue between a stream's configuration and the privacy core.

The processors stay model-agnostic: they ask a :class:`StreamLogic` to build the mechanism,
compute M1's dissimilarity for a slot, run M2, and describe the slot for the audit topic.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..core import packing
from ..core.accounting import WindowSpend
from ..core.base import Mechanism, StepResult
from ..core.validation import ParameterError
from ..core.central import CentralMechanism, Dissimilarity
from ..core.local.protocol import LocalDissimilarity, Request
from ..core.local.user_sets import users_to_text
from ..core.randomness import DerivedRandomness
from ..core.registry import mechanisms
from .wire.records import AuditRecord, ReleaseRecord, local_release_record, personalized_release_record
from .wire.messages import MeasuredMessage, ReadyMessage
from .config import AppConfig, ConfigError, StreamConfig
from .events import Released

__all__ = ["StreamLogic", "CentralLogic", "logic_for"]


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
        self._template = self.new_mechanism()  # validates parameters up front; what the state is compared with

    def group_of_users(self) -> np.ndarray | None:
        """Row of each user in the count matrix (None: a single row)."""
        return None

    def budget_gauges(self, tightest: WindowSpend) -> tuple[float, float, float]:
        """What the window ending at a release shows operators, for the group closest to its bound
        (``tightest``, the host's window): the host's spend, the share a query index reserves, and
        the total the two must stay within (the stream's :class:`~wevent.core.accounting.Budget`)."""
        budget = self.stream.budget
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

    def new_mechanism(self) -> Mechanism:
        raise NotImplementedError

    def restore(self, blob: bytes, parts=None) -> Mechanism:
        """The mechanism in ``blob``: packed bytes, or the head of a split state whose ``parts``
        (a mapping from key to bytes) hold its large values."""
        from ..core.base import restore

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

    def measure(self, slot: int, counts: np.ndarray, last_release: np.ndarray) -> Dissimilarity | None:
        """M1: the private dissimilarity of slot ``slot`` (None when the mechanism has none)."""
        raise NotImplementedError

    def slot_ready(self, slot: int, closed_at: float, counts: np.ndarray,
                   last_release: np.ndarray) -> MeasuredMessage | ReadyMessage:
        """What M1 sends M2 once slot ``slot`` closed everywhere and release ``slot - 1`` is known:
        the slot's counts with their private dissimilarity."""
        return MeasuredMessage(self.stream.name, slot, closed_at, counts, self.measure(slot, counts, last_release))

    def publish(self, mechanism: Mechanism, counts: np.ndarray, dissimilarity: Dissimilarity | None) -> StepResult:
        raise NotImplementedError

    def audit(self, mechanism: Mechanism, result: StepResult) -> AuditRecord:
        return AuditRecord(
            stream=self.stream.name,
            slot=result.slot,
            mechanism=mechanism.name,
            epsilon=self.stream.budget.total,
            window=mechanism.window,
            eps1=float(result.eps1),
            eps2=float(result.eps2),
            reserved=self.stream.budget.reserved,
        )


class CentralLogic(StreamLogic):
    """Uniform, Sample, BD, BA: M1 is the shared dissimilarity measure (absent for Uniform/Sample)."""

    def __init__(self, stream: StreamConfig, randomness: DerivedRandomness) -> None:
        super().__init__(stream, randomness)

    def new_mechanism(self) -> CentralMechanism:
        s = self.stream
        try:  # a Mode B/C query index takes its budget out of every window first (composition)
            return mechanisms()[s.mechanism](s.budget.host, s.window, s.domain, randomness=self.randomness,
                                         **s.mechanism_options)
        except TypeError as exc:
            raise ConfigError(f"stream {s.name!r}: invalid options for {s.mechanism}: {exc}") from None

    def _input(self, counts: np.ndarray) -> np.ndarray:
        return counts.reshape(-1).astype(float)  # one group: the histogram c_t

    def measure(self, slot, counts, last_release):
        m1 = self._template.dissimilarity_measure
        if m1 is None:
            return None
        return m1.measure(slot, self._input(counts), np.asarray(last_release, dtype=float), self.randomness)

    def publish(self, mechanism, counts, dissimilarity):
        return mechanism.publish(self._input(counts), dissimilarity)


class PersonalizedLogic(CentralLogic):
    """PBD, PBA: one group per requirement type (w_k, eps_k); M1 is DC, M2 is OBS + decision + SM.

    The requirements come from ``options.requirements``: a CSV file of ``user,w,epsilon`` lines
    whose users are the stream's user indices, or a table of generation settings
    (``mix``, ``epsilon``, ``window``, ``groups``, ``share``, ``seed``: the strictest pair the mix is tied
    to and its shape; as in Du et al. 2025, Section 5.2).
    """

    def __init__(self, stream: StreamConfig, randomness: DerivedRandomness, requirements) -> None:
        self.requirements = requirements
        self.groups = requirements.types.count
        super().__init__(stream, randomness)

    def new_mechanism(self):
        s = self.stream
        try:
            return mechanisms()[s.mechanism].for_requirements(self.requirements, s.domain, randomness=self.randomness,
                                                          **s.mechanism_options)
        except TypeError as exc:
            raise ConfigError(f"stream {s.name!r}: invalid options for {s.mechanism}: {exc}") from None

    def group_of_users(self):
        return self.requirements.user_types

    def budget_gauges(self, tightest):
        return tightest.spend, 0.0, tightest.bound  # the type closest to its own eps_k, nothing reserved

    def _input(self, counts):
        return np.asarray(counts, dtype=np.int64)  # (types, d): SM thins each type's histogram

    def record(self, mechanism, result, group_window_spend, slot_start=0.0, slot_end=0.0):
        return personalized_release_record(self.stream.name, mechanism, result, group_window_spend, slot_start,
                                           slot_end)

    def audit(self, mechanism, result):
        types = mechanism.types
        return AuditRecord(
            stream=self.stream.name, slot=result.slot, mechanism=mechanism.name, epsilon=mechanism.epsilon,
            window=mechanism.window, eps1=float(result.eps1), eps2=float(result.eps2),
            types=[[int(w), float(e), int(n)] for w, e, n in zip(types.windows, types.epsilons, types.sizes)],
            charges=result.type_charges.tolist(),
        )


class LocalLogic(StreamLogic):
    """The local model: M2 hosts the mechanism's request/response protocol, M1 measures phase 1.

    No raw value reaches the server: the assembler only keeps the slot clock (watermarks), devices
    answer ``ldp.requests`` with perturbed reports, the collector sums them into the oracle's
    support, M1 turns a phase-1 support into the dissimilarity (:func:`dissimilarity_of`), and M2
    decides and publishes. ``options.block_size`` is the devices' and ``options.deadline_seconds``
    the collector's (not the mechanism's).
    """

    def __init__(self, stream: StreamConfig, randomness: DerivedRandomness) -> None:
        super().__init__(stream, randomness)

    def new_mechanism(self):
        s = self.stream
        try:
            return mechanisms()[s.mechanism](s.epsilon, s.window, s.domain, s.users, oracle=s.oracle,
                                         randomness=self.randomness, **s.mechanism_options)
        except TypeError as exc:
            raise ConfigError(f"stream {s.name!r}: invalid options for {s.mechanism}: {exc}") from None

    def slot_ready(self, slot, closed_at, counts, last_release):
        return ReadyMessage(self.stream.name, slot, closed_at)  # the server has no data: M2 opens the slot's rounds

    @property
    def deadline_seconds(self) -> float:
        """How long the collector waits for the users asked in one phase."""
        return self.stream.deadline_seconds

    def measure_support(self, request: Request, support, n: int, last_release) -> LocalDissimilarity:
        """M1: the dissimilarity of a phase-1 support."""
        from ..core.local._base import dissimilarity_of

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


def device_block_size(stream: StreamConfig) -> int:
    """Users per device block of a local-model stream (the devices need no server key to know it)."""
    return stream.block_size


def load_requirements(stream: StreamConfig):
    from ..core.personalized import Requirements, generate

    spec = stream.requirements  # a CSV path or generation settings, typed by the config
    where = f"stream {stream.name!r}"
    try:
        if isinstance(spec, str):
            requirements = Requirements.load_csv(spec)
        else:
            settings = dict(spec)
            requirements = generate(settings.pop("mix", "groups"), stream.users, **settings)
        return requirements.for_users([str(u) for u in range(stream.users)])
    except ParameterError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def logic_for(config: AppConfig, stream: StreamConfig) -> StreamLogic:
    randomness = DerivedRandomness(config.noise_key(), stream.name)
    model = mechanisms()[stream.mechanism].model
    if model != stream.model:
        raise ConfigError(f"stream {stream.name!r}: {stream.mechanism} is not a {stream.model}-model mechanism: "
                          f"it belongs to the {model} model")
    if model == "local":
        return LocalLogic(stream, randomness)
    if model == "personalized":
        return PersonalizedLogic(stream, randomness, load_requirements(stream))
    return CentralLogic(stream, randomness)
