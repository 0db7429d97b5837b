"""The base of the stream processors: plain classes, independent of Faust.

Each processor turns (its state for a key, one input message) into a new state, a list of
output messages and the :class:`~wevent.stream.agents.events.Events` it saw (:class:`Processed`). The
worker's Faust agents (:func:`~wevent.stream.runtime.worker.stateful_agent`) only load and store the
state in a table, send the outputs and export the events as metrics; the logic here is unit-testable
without a broker or a metrics library.
Every table value is a dataclass (:class:`TableValue`) that packs to the dict layout the
changelogs hold.

Exactly-once effect on state over an at-least-once transport:

* The assembler and M1 record in their state the offset of the last input they applied per
  (topic, partition) and skip an input at or below it. Their agents deliver the outputs of an
  input *before* writing the new state, so a crash leaves either the old state (the input is
  replayed and its outputs re-sent) or the new one (whose outputs were already delivered).
* M2 writes its ledger *before* its release leaves, as the architecture requires, so it cannot
  skip by offset (a replayed input would then never be released). It is idempotent by slot
  instead: an input for a slot already released re-emits the stored release.
* The offsets in the states, not the group's committed offsets, say where a restarted worker
  reads each source partition from (:meth:`Processor.resume_offset`): just past the lowest
  offset its states applied, or, for M2, at its last applied input.

Outputs are deterministic (derived randomness), so every re-emission is identical to the first.

State is bounded whatever the input: what grows with a backlog (open slots, pending partials,
kept releases, early reports) lives in keys of one slot or message each (:class:`SideKeys`),
written before the key that records the offsets, and no value or message exceeds
:data:`MAX_MESSAGE_BYTES`.

Anyone who can write to the broker could otherwise stall or steer a stream, so every message a
worker acts on is authenticated (:class:`ServerKeys`), and so is every record it publishes: outputs
are sealed as they leave :meth:`Processor.process`, and each ``route`` refuses an input without a
valid seal, or an authentic-looking one no worker could have sent, before it reaches any state.

Processors return what happened
-------------------------------

**Processors return what happened.** The assembler, M1, M2 and the collector are plain classes,
one file each in `pipeline/stream/agents/` (`assemble.py`, `measure.py`, `publish.py`,
`collect.py`) over `base.py`, with each model's logic beside them (`central.py`,
`personalized.py`, `local.py`). `Processor.process` turns one input into its sealed outputs, its
state updates in the order to store them (side keys, then the head key with its offsets, then
deletions), and its `Events` (`pipeline/stream/agents/events.py`: reports accepted and rejected by
reason, dead letters, forged messages, closed slots, each release's gauges). The worker exports
them with `wevent.stream.runtime.prometheus.export`, the one mapping to metrics, which the device
fleet (its refusals and forged requests, returned the same way by `DeviceFleet.respond` and
`SignedRequests.check`) and the test harness use too; processors, their logic and the codecs
never import prometheus_client. Every table value is a dataclass whose `pack()`/`unpack()` keep
the changelogs' layout. States and messages have one format version: a version reads the layout
it writes and no older one. A state or message of an older layout (a field missing) is refused
with one line (`LayoutError`): the input is dead-lettered as `unreadable_state` (a message: as
`malformed`) and changes nothing. To move a stream to a new layout, drain it (let it release
every slot it holds) and start a new one.

**Bounded state.** No input grows a table value or a message past a stated bound: every value
and message a worker writes stays under 900,000 bytes (Kafka's default limit is 1 MiB). A stream
whose release, slot state or mechanism state could be larger is refused at start with one line;
an input whose state or outputs would be larger anyway is dead-lettered as `too_large` and writes
nothing, so a failed write can never crash-loop the worker. What grows with a backlog lives in
keys of one slot each (the assembler's open slots, M1's waiting partials, M2's last releases,
the collector's early reports), and a message rewrites only the keys it touches, so a backlog
costs memory, not work per message. A report may be at most `max_slots_ahead` slots past the
closed ones (default 100, per stream) plus the lateness (`too_far_ahead`); M1 keeps partials up
to 20,000 slots ahead; a collector holds at most 256 messages of early reports. A full-speed
replay of the bundled T-Drive sample (1,439 one-minute slots, d = 100, BA) sends in 2-3 s and all
releases arrive in 72-83 s, equal to `wevent simulate`'s; the rate is 15-23 slots/s over the
first 200 releases and 28-29 over the last 200.
"""

from __future__ import annotations

import logging
from dataclasses import Field, dataclass, field, fields
from typing import Any, Callable, ClassVar, NamedTuple, Protocol, Self, TypeVar

import numpy as np

from ...core import packing
from ...core.randomness import SecretKey
from ..config import AppConfig
from ..settings import Settings
from ..wire.keys import OffsetMark, stream_of
from ..wire.records import DeadLetter, unread_bytes
from ..wire.seals import (AuthenticationError, MacSeal, SignatureSeal, check_seal, internal_seal, release_seal,
                          request_seal, seal)
from ..wire.topics import AUDIT, DEAD_LETTERS, LDP_REPORTS, LDP_REQUESTS, MEASUREMENTS, RELEASES, SLOTS
from .events import Events
from .logic import StreamLogic

__all__ = ["Out", "Processed", "dead_letter", "malformed", "refuse", "ServerKeys", "TableValue", "HeadState",
           "SideKeys", "Processor", "oversized", "at_longest", "all_offsets", "MAX_MESSAGE_BYTES", "DEADLETTER_SAMPLE"]

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 900_000
"""The largest message or table value a worker writes: under Kafka's 1 MiB default
``message.max.bytes``, with room for the record's key and headers. A stream whose slot state,
release or window of charges could exceed it is refused at start (:meth:`Processors.build`); an
input whose state or outputs would exceed it anyway (a local stream's population-sized state) is
refused and dead-lettered as ``too_large`` and writes nothing, so that no write can fail and
crash-loop the worker: the stream stops, loudly, instead. So is an input whose state (or mechanism
state) is of an older layout, as ``unreadable_state``: the upgrade path is to drain the stream
before the new version and start a new one."""

DEADLETTER_SAMPLE = 1_000  # rejected reports copied into one dead letter (central and personalized streams)


@dataclass(frozen=True)
class Out:
    """One message to send: ``value`` to ``topic`` with ``key``."""

    topic: str
    value: bytes
    key: str | None = None


class Processed(NamedTuple):
    """What one input caused: sealed outputs, the state updates in the order to store them
    (:class:`SideKeys`; None deletes a key), and the events for the worker to export."""

    outputs: list[Out]
    updates: dict[str, bytes | None]
    events: Events


def dead_letter(events: Events, reason: str, topic: str, detail: str, stream: str | None = None,
                payload: Any = None) -> Out:
    events.dead_letters[reason] += 1
    return Out(DEAD_LETTERS, DeadLetter(reason, topic, detail, stream, payload).to_bytes())


def malformed(events: Events, keys: "ServerKeys", topic: str, raw: bytes, detail: str) -> Out:
    """The dead letter of bytes that decode to no stream: their length and keyed digest, never the bytes."""
    events.reports_rejected["", "malformed"] += 1
    return dead_letter(events, "malformed", topic, detail,
                       payload=unread_bytes(raw, keys.server.derive("deadletter-digest")))


def refuse(events: Events, reason: str, topic: str, detail: str, stream: str | None = None) -> Out:
    """A message refused as forged (``unauthenticated``) or impossible (``out_of_range``)."""
    events.forged_messages[topic, reason] += 1
    log.warning("refused a message of %s (%s): %s", topic, reason, detail)
    return dead_letter(events, reason, topic, detail, stream)


@dataclass(frozen=True)
class ServerKeys:
    """What the workers seal and check messages with; every worker derives the same keys.

    ``server`` is the server's secret (the keys of its noise and of dead letters' digests);
    ``internal`` (a MAC under a sub-key of it) seals ``slots`` and ``dissimilarity``;
    ``releases`` signs ``releases`` and ``audit``, which M1 and every subscriber check with its
    public half; ``requests`` signs ``ldp.requests``; ``reports`` is the devices' public key, which
    checks ``ldp.reports`` (None without a local-model stream: :meth:`Settings.report_checker
    <wevent.stream.settings.Settings.report_checker>` says where it comes from).
    """

    server: SecretKey = field(repr=False)
    internal: MacSeal = field(repr=False)
    releases: SignatureSeal
    requests: SignatureSeal
    reports: SignatureSeal | None

    @classmethod
    def from_settings(cls, config: AppConfig, settings: Settings) -> "ServerKeys":
        """The keys of ``config``'s workers: the server's key and the devices' public key as ``settings`` give
        them. A release public key in ``settings`` must be this server's: subscribers given another
        would drop every release (:meth:`Settings.check_release_key
        <wevent.stream.settings.Settings.check_release_key>`)."""
        server = settings.noise_key(config)
        releases = release_seal(server)
        settings.check_release_key(releases)
        return cls(server, internal_seal(server), releases, request_seal(server), settings.report_checker(config))

    def for_topic(self, topic: str) -> MacSeal | SignatureSeal | None:
        """The seal of a topic's messages (None: not sealed)."""
        seals: dict[str, MacSeal | SignatureSeal | None] = {
            SLOTS: self.internal, MEASUREMENTS: self.internal, RELEASES: self.releases, AUDIT: self.releases,
            LDP_REQUESTS: self.requests, LDP_REPORTS: self.reports}
        return seals.get(topic)

    def seal_of(self, topic: str) -> MacSeal | SignatureSeal:
        """The seal of a sealed topic's messages (asking for an unsealed topic's is a programming error)."""
        by = self.for_topic(topic)
        if by is None:
            raise LookupError(f"{topic} carries no seal here")
        return by

    def sealed(self, out: Out) -> Out:
        """``out`` with its topic's tag (outputs of workers are keyed by their stream)."""
        by = self.for_topic(out.topic)
        if by is None:
            return out
        assert out.key is not None, f"an output to {out.topic} has no key"
        return Out(out.topic, seal(out.topic, out.key, out.value, by), out.key)

    def refusal(self, events: Events, topic: str, stream: str, body: bytes, tag: bytes | None) -> list[Out]:
        """[] when ``tag`` is the valid seal of ``body`` on (topic, stream); else the refusal."""
        try:
            check_seal(self.seal_of(topic), topic, stream, body, tag)
        except AuthenticationError as exc:
            return [refuse(events, "unauthenticated", topic, str(exc), stream)]
        return []


class TableValue:
    """A value of a processor's table: a dataclass whose fields, in order, are the keys of the dict
    it is packed as (:mod:`wevent.core.packing`). :meth:`pack` writes, and :meth:`unpack` reads, the
    one layout of this version (:data:`~wevent.stream.wire.format.FORMAT_VERSION`): a value without
    one of its fields is of an older layout, refused (:class:`~wevent.core.packing.LayoutError`)."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # each kind is a dataclass

    def to_fields(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_fields(cls, stored: dict[str, Any]) -> Self:
        missing = [f.name for f in fields(cls) if f.name not in stored]
        if missing:
            raise packing.LayoutError(f"a {cls.__name__}", missing)
        return cls(**{f.name: stored[f.name] for f in fields(cls)})

    def pack(self) -> bytes:
        return packing.pack(self.to_fields())

    @classmethod
    def unpack(cls, data: bytes) -> Self:
        return cls.from_fields(packing.unpack(data))


@dataclass
class HeadState(TableValue):
    """A processor's value under its key (its head): first, what it applied of each source."""

    offsets: dict[str, int] = field(default_factory=dict, kw_only=True)  # OffsetMark -> last offset applied

    @staticmethod
    def offsets_in(data: bytes) -> dict[str, int]:
        """The offsets of a packed head, whatever else it holds."""
        return packing.unpack(data)["offsets"]


class Stored(Protocol):
    """What a side key holds: a :class:`TableValue`, or a message kept as its fields."""

    def to_fields(self) -> dict[str, Any]: ...

    @classmethod
    def from_fields(cls, stored: dict[str, Any]) -> Self: ...


Value = TypeVar("Value", bound=Stored)


class SideKeys:
    """The table keys an input reads and writes beside its processor's head key.

    A processor keeps what grows with a backlog (a slot's partial histogram, say) in keys of its
    own, one per slot, so that an input rewrites only the keys it touches and no value holds more
    than one slot. :meth:`Processor.process` returns the written keys *before* the head key, and
    the deleted ones after it: the head is what says which inputs were applied (its offsets) and
    which side keys are live, and a table's writes reach its changelog in order, so a crash leaves
    a prefix of them. Before the head, a side key may hold the effect of an input the head does
    not record; the input is then redelivered and must find that effect there (``offset`` lets a
    value say which input wrote it). After the head, a deletion lost to a crash leaves a key no
    head names any more, never read again.
    """

    def __init__(self, load: Callable[[str], bytes | None], offset: int) -> None:
        self._load = load
        self.offset = offset  # the input's offset, for values that record which input wrote them
        self._values: dict[str, Any] = {}
        self.written: dict[str, Stored] = {}
        self.deleted: dict[str, None] = {}

    def get(self, key: str, kind: type[Value]) -> Value | None:
        """The value of ``key``, read as a ``kind`` (its ``from_fields``), or None."""
        if key not in self._values:
            stored = self._load(key)
            self._values[key] = kind.from_fields(packing.unpack(stored)) if stored else None
        return self._values[key]

    def value(self, key: str, kind: type[Value]) -> Value:
        """The value of ``key``, which the state holds (a missing one is a broken state: KeyError)."""
        value = self.get(key, kind)
        if value is None:
            raise KeyError(key)
        return value

    def put(self, key: str, value: Stored) -> None:
        self._values[key] = self.written[key] = value
        self.deleted.pop(key, None)

    def delete(self, key: str) -> None:
        self._values[key] = None
        self.written.pop(key, None)
        self.deleted[key] = None

    def updates(self, head_key: str, head: HeadState) -> dict[str, bytes | None]:
        """The packed writes of an input, in their order: side keys, then the head, then deletions."""
        return ({key: packing.pack(value.to_fields()) for key, value in self.written.items()}
                | {head_key: head.pack()} | self.deleted)


class Processor:
    """Base: route a raw message to a state key, skip replays, apply, return the new state."""

    #: M2 persists its ledger before its release leaves; the others deliver outputs before state.
    persist_before_send = False
    #: The kinds of message :meth:`apply` takes.
    reads: tuple[type, ...] = ()
    #: What the processor keeps under each of its keys.
    state_type: type[HeadState] = HeadState

    def __init__(self, config: AppConfig, logics: dict[str, StreamLogic], keys: ServerKeys) -> None:
        self.config = config
        self.logics = logics
        self.keys = keys

    def route(self, raw: bytes, topic: str, partition: int, events: Events) -> tuple[str | None, Any, list[Out]]:
        """Decode ``raw``: (state key or None, decoded message, outputs such as dead letters)."""
        raise NotImplementedError

    def wrong_kind(self, events: Events, message: Any, topic: str, stream: str) -> list[Out]:
        """[] for a message of a kind this processor reads; else its dead letter (checked once the
        seal is, so that a forgery is refused as one whatever its kind)."""
        if isinstance(message, self.reads):
            return []
        return [dead_letter(events, "malformed", topic, f"a {message.kind} message on {topic}", stream)]

    def initial(self, key: str) -> HeadState:
        raise NotImplementedError

    def apply(self, state: Any, message: Any, topic: str, partition: int, now: float, side: SideKeys,
              events: Events) -> list[Out]:
        raise NotImplementedError

    def process(self, raw: bytes, topic: str, partition: int, offset: int,
                load: Callable[[str], bytes | None], now: float) -> Processed:
        """One input message: its sealed outputs, {state key: packed new state, or None to delete}
        in the order to store them (:class:`SideKeys`), and what it caused to count."""
        events = Events()
        key, message, outputs = self.route(raw, topic, partition, events)
        if key is None:
            return Processed(outputs, {}, events)
        try:
            stored = load(key)
            state = self.state_type.unpack(stored) if stored else self.initial(key)
            mark = OffsetMark(topic, partition).encode()
            if not self.persist_before_send and state.offsets.get(mark, -1) >= offset:
                return Processed([], {}, events)  # applied before a crash, and its outputs were delivered before that
            # M2 applies a replayed input again (re-emitting what it caused), so it only records it
            state.offsets[mark] = max(int(offset), state.offsets.get(mark, -1))
            side = SideKeys(load, int(offset))
            outputs += self.apply(state, message, topic, partition, now, side, events)
        except packing.LayoutError as exc:  # a state this version does not read: the stream stops here, loudly
            return self._refused(topic, partition, offset, "unreadable_state", str(exc), key)
        updates = side.updates(key, state)
        sealed = [self.keys.sealed(out) for out in outputs]
        too_large = oversized(updates, sealed)
        if too_large:
            return self._refused(topic, partition, offset, "too_large", too_large, key)
        return Processed(sealed, updates, events)

    @staticmethod
    def _refused(topic: str, partition: int, offset: int, reason: str, detail: str, key: str) -> Processed:
        """An input that changes nothing, dead-lettered: none of what it would have caused counts."""
        log.error("refused an input of %s[%d]@%d: %s", topic, partition, offset, detail)
        refused = Events()
        return Processed([dead_letter(refused, reason, topic, detail, stream_of(key))], {}, refused)

    def state_keys(self, topic: str, partition: int, key_partition: Callable[[str], int]) -> list[str]:
        """The state keys that record how far ``topic``'s ``partition`` was applied (none: not
        tracked). ``key_partition`` maps a message key to the partition it is sent to."""
        return []

    def resume_offset(self, topic: str, partition: int, load: Callable[[str], bytes | None],
                      key_partition: Callable[[str], int]) -> int | None:
        """The offset to read ``topic``'s ``partition`` from after a restart: just past the lowest
        offset that every state fed by it records as applied (0 if one has no state yet), or None
        when no state tracks it. The states are the truth: a committed offset can be ahead of them.
        M2 reads its last applied input again: its state was stored before that input's outputs left."""
        keys = self.state_keys(topic, partition, key_partition)
        if not keys:
            return None
        mark = OffsetMark(topic, partition).encode()
        applied = [HeadState.offsets_in(stored).get(mark, -1) if (stored := load(key)) else -1 for key in keys]
        return max(min(applied) + (0 if self.persist_before_send else 1), 0)


LONGEST_FLOAT = -2.2250738585072014e-308  # 24 characters, as long as a float's shortest repr gets
LONGEST_INTEGER = -(2**63)  # an int64's longest


def at_longest(value):
    """``value``, a state as :mod:`~wevent.core.packing` packs it, with every number at its longest
    text (a None one too, and False for a flag): packed, it is at least as large as the state at any
    slot, for a state whose arrays, lists and keys keep their shapes (a central mechanism's)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, dict):
        return {k: at_longest(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [at_longest(v) for v in value]
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return LONGEST_INTEGER
    if value is None or isinstance(value, float):
        return LONGEST_FLOAT
    return value


def all_offsets(config: AppConfig, topics) -> dict[str, int]:
    """A head's offsets at their longest: one for every partition of ``topics`` (what a state records
    of the sources it reads)."""
    return {OffsetMark(topic, p).encode(): 2**63 - 1 for topic in topics for p in range(config.topics()[topic])}


def oversized(updates: dict[str, bytes | None], outputs: list[Out]) -> str | None:
    """Why a state or output is larger than :data:`MAX_MESSAGE_BYTES` (None if none is)."""
    sizes = [(f"state {k!r}", len(v)) for k, v in updates.items() if v is not None]
    sizes += [(f"message to {out.topic}", len(out.value)) for out in outputs]
    what, size = max(sizes, key=lambda item: item[1], default=("", 0))
    return f"{what} would be {size} bytes, above the bound of {MAX_MESSAGE_BYTES}" if size > MAX_MESSAGE_BYTES else None
