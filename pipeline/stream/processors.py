"""The stream processors as plain classes, independent of Faust.

Each processor turns (its state for a key, one input message) into a new state, a list of
output messages and the :class:`~wevent.stream.events.Events` it saw (:class:`Processed`). The
Faust agents in ``topologies/`` only load and store the state in a table, send the outputs and
export the events as metrics; the logic here is unit-testable without a broker or a metrics library.
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
worker acts on is authenticated (:class:`ServerKeys`): outputs are sealed as they leave
:meth:`Processor.process`, and each ``route`` refuses an input without a valid seal, or an
authentic-looking one no worker could have sent, before it reaches any state.
"""

from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, NamedTuple, Protocol, Self, TypeVar

import numpy as np

from ..core import packing
from ..core.base import StepResult
from ..core.local.protocol import Request
from .wire.seals import (REPORT_KEY_ENV, AuthenticationError, MacSeal, SignatureSeal, check_seal, internal_seal,
                         report_seal, request_seal, seal, unseal)
from .wire.records import DeadLetter, ReleaseRecord, unread_bytes
from .wire.format import DecodeError
from .wire.messages import (DissimilarityMessage, MeasuredMessage, PartialMessage, ReadyMessage, ReportsMessage,
                            RequestMessage, SupportMessage, TickMessage, decode_message)
from .wire.reports import ReportBatch, Watermark, decode_report_message, report_partition
from .config import DEVICE_KEY_ENV, AppConfig, ConfigError
from .events import Events
from .wire.keys import (AssemblerKey, EarlyReportsKey, MalformedKey, MechanismPartKey, OffsetMark, OpenSlotKey,
                        PartialKey, ReleaseKey, RoundKey, RoundRequestKey, StepKey, StepOutputKey, stream_of)
from .logic import StreamLogic, logic_for
from .wire.topics import AUDIT, DEAD_LETTERS, LDP_REPORTS, LDP_REQUESTS, MEASUREMENTS, RELEASES, REPORTS, SLOTS

__all__ = ["Out", "Processed", "ServerKeys", "Processor", "Assembler", "DissimilarityProcessor", "PublicationProcessor",
           "Collector", "Processors"]

log = logging.getLogger(__name__)

MAX_SLOTS_PENDING = 20_000
"""How far ahead of the slot it measures next M1 keeps partials. A backlog (a producer far ahead,
the assembler closing slots faster than releases come back) waits in one key per (slot,
partition), so it costs memory, at most this many slots' partials, but no work per message. Two
weeks of one-minute slots: a whole dataset replayed at full speed fits. A partial beyond is
refused as ``out_of_range`` (the stream then stops at that slot, loudly)."""

MAX_MESSAGE_BYTES = 900_000
"""The largest message or table value a worker writes: under Kafka's 1 MiB default
``message.max.bytes``, with room for the record's key and headers. A stream whose slot state,
release or window of charges could exceed it is refused at start (:meth:`Processors.build`); an
input whose state or outputs would exceed it anyway (a local stream's population-sized state) is
refused and dead-lettered as ``too_large`` and writes nothing, so that no write can fail and
crash-loop the worker: the stream stops, loudly, instead."""

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


def malformed(events: Events, config: AppConfig, topic: str, raw: bytes, detail: str) -> Out:
    """The dead letter of bytes that decode to no stream: their length and keyed digest, never the bytes."""
    events.reports_rejected["", "malformed"] += 1
    return dead_letter(events, "malformed", topic, detail,
                       payload=unread_bytes(raw, config.noise_key().derive("deadletter-digest")))


def refuse(events: Events, reason: str, topic: str, detail: str, stream: str | None = None) -> Out:
    """A message refused as forged (``unauthenticated``) or impossible (``out_of_range``)."""
    events.forged_messages[topic, reason] += 1
    log.warning("refused a message of %s (%s): %s", topic, reason, detail)
    return dead_letter(events, reason, topic, detail, stream)


@dataclass(frozen=True)
class ServerKeys:
    """What the workers seal and check messages with; every worker derives the same keys.

    ``internal`` (a MAC under a sub-key of the server's secret) seals ``slots``, ``dissimilarity``
    and ``releases``; ``requests`` signs ``ldp.requests``; ``reports`` is the devices' public key,
    which checks ``ldp.reports`` (None without a local-model stream). It comes from
    ``WEVENT_DEVICE_PUBLIC_KEY``; without it, from the devices' own key (``WEVENT_DEVICE_KEY`` or
    the config's ``seed``), where the devices are simulated beside the server.
    """

    internal: MacSeal
    requests: SignatureSeal
    reports: SignatureSeal | None

    @classmethod
    def from_config(cls, config: AppConfig) -> "ServerKeys":
        server = config.noise_key()
        reports = None
        if any(s.model == "local" for s in config.streams):
            text = os.environ.get(REPORT_KEY_ENV)
            if text:
                try:
                    reports = SignatureSeal.from_public_hex(text)
                except ValueError as exc:
                    raise ConfigError(f"{REPORT_KEY_ENV}: {exc}") from None
            elif os.environ.get(DEVICE_KEY_ENV) or config.seed is not None:
                reports = report_seal(config.device_key()).public()
            else:
                raise ConfigError(f"no key to check the devices' reports with: set {REPORT_KEY_ENV} to the devices' "
                                  "public key (`wevent keys` prints it)")
        return cls(internal_seal(server), request_seal(server), reports)

    def for_topic(self, topic: str) -> MacSeal | SignatureSeal | None:
        """The seal of a topic's messages (None: not sealed)."""
        return {SLOTS: self.internal, MEASUREMENTS: self.internal, RELEASES: self.internal,
                LDP_REQUESTS: self.requests, LDP_REPORTS: self.reports}.get(topic)

    def sealed(self, out: Out) -> Out:
        """``out`` with its topic's tag (outputs of workers are keyed by their stream)."""
        by = self.for_topic(out.topic)
        return out if by is None else Out(out.topic, seal(out.topic, out.key, out.value, by), out.key)

    def refusal(self, events: Events, topic: str, stream: str, body: bytes, tag: bytes | None) -> list[Out]:
        """[] when ``tag`` is the valid seal of ``body`` on (topic, stream); else the refusal."""
        try:
            check_seal(self.for_topic(topic), topic, stream, body, tag)
        except AuthenticationError as exc:
            return [refuse(events, "unauthenticated", topic, str(exc), stream)]
        return []


class TableValue:
    """A value of a processor's table: a dataclass whose fields, in order, are the keys of the dict
    it is packed as (:mod:`wevent.core.packing`). :meth:`pack` writes, and :meth:`unpack` reads, the
    layout the processors stored, so that a changelog written before restores."""

    def to_fields(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_fields(cls, stored: dict[str, Any]) -> Self:
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


class MechanismParts:
    """The parts of M2's mechanism state (:func:`~wevent.core.packing.pack_split`), each in the side
    key ``<stream>/part/<digest>``, as the mapping :func:`~wevent.core.base.restore` reads."""

    def __init__(self, side: SideKeys, stream: str) -> None:
        self._side, self._stream = side, stream

    def __getitem__(self, digest: str) -> bytes:
        part = self._side.get(MechanismPartKey(self._stream, digest).encode(), MechanismPart)
        if part is None:
            raise KeyError(digest)
        return part.data


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
        stored = load(key)
        state = self.state_type.unpack(stored) if stored else self.initial(key)
        mark = OffsetMark(topic, partition).encode()
        if not self.persist_before_send and state.offsets.get(mark, -1) >= offset:
            return Processed([], {}, events)  # applied before a crash, and its outputs were delivered before that
        # M2 applies a replayed input again (re-emitting what it caused), so it only records it
        state.offsets[mark] = max(int(offset), state.offsets.get(mark, -1))
        side = SideKeys(load, int(offset))
        outputs += self.apply(state, message, topic, partition, now, side, events)
        updates = side.updates(key, state)
        sealed = [self.keys.sealed(out) for out in outputs]
        too_large = oversized(updates, sealed)
        if too_large:
            log.error("refused an input of %s[%d]@%d: %s", topic, partition, offset, too_large)
            refused = Events()  # the input changed nothing: none of what it would have caused counts
            return Processed([dead_letter(refused, "too_large", topic, too_large, stream_of(key))], {}, refused)
        return Processed(sealed, updates, events)

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


def oversized(updates: dict[str, bytes | None], outputs: list[Out]) -> str | None:
    """Why a state or output is larger than :data:`MAX_MESSAGE_BYTES` (None if none is)."""
    sizes = [(f"state {k!r}", len(v)) for k, v in updates.items() if v is not None]
    sizes += [(f"message to {out.topic}", len(out.value)) for out in outputs]
    what, size = max(sizes, key=lambda item: item[1], default=("", 0))
    return f"{what} would be {size} bytes, above the bound of {MAX_MESSAGE_BYTES}" if size > MAX_MESSAGE_BYTES else None


# ---------------------------------------------------------------------------------------------
# Assembler: reports -> per-partition slot partials
# ---------------------------------------------------------------------------------------------
# In order of precedence: a report is rejected for the first that applies.
REJECT_REASONS = ("unknown_user", "out_of_domain", "before_start", "late", "too_far_ahead", "wrong_partition",
                  "duplicate")


def seen_contains(seen: np.ndarray, users: np.ndarray) -> np.ndarray:
    """Which ``users`` a slot has already counted. ``seen`` is a sorted int64 array of user ids
    while few users reported, and a bitset (uint8, one bit per user) once that is smaller: the
    assembler rewrites it after every message, so its size is the changelog's cost per message."""
    if seen.dtype == np.uint8:
        return (seen[users >> 3] & (128 >> (users & 7))) != 0
    if seen.size == 0:
        return np.zeros(users.size, dtype=bool)
    return seen[np.minimum(np.searchsorted(seen, users), seen.size - 1)] == users


def seen_add(seen: np.ndarray, users: np.ndarray, population: int) -> np.ndarray:
    if seen.dtype != np.uint8 and (seen.size + users.size) * 8 > population // 8:
        bits = np.zeros((population + 7) // 8, dtype=np.uint8)  # denser than a bitset: switch for good
        seen = seen_add(bits, seen, population)
    if seen.dtype == np.uint8:  # through one bit per byte: several users may share a byte
        bits = np.unpackbits(seen)
        bits[users] = 1
        return np.packbits(bits)
    # a merge, not np.union1d: its hashing unique costs more than sorting two sorted runs
    merged = np.sort(np.concatenate([seen, users]), kind="stable")
    first = np.ones(merged.size, dtype=bool)
    first[1:] = merged[1:] != merged[:-1]
    return merged[first]


def _distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted; without a sort when they are all equal (one slot per batch, as a rule)."""
    if values.size and values.min() == values.max():
        return values[:1]
    return np.unique(values)


@dataclass
class AssemblerState(HeadState):
    """An assembler partition's clock for one stream: its watermark, the slots it closed (all up to
    ``closed``) and the slots it holds a key of counts for."""

    watermark: float  # epoch seconds; -inf before the first
    closed: int
    open: list[int]


@dataclass(eq=False)
class OpenSlot(TableValue):
    """A slot an assembler partition has not closed: its counts and who was counted."""

    counts: np.ndarray  # (groups, domain)
    seen: np.ndarray  # the users counted, as u // P (:func:`seen_add`)
    applied: int  # the offset of the input that wrote it last


def slots_ahead(stream) -> int:
    """The assembler's horizon for ``stream``: a report may be for at most this many slots past the
    closed ones (its lateness in slots plus ``max_slots_ahead``, by default
    :data:`~wevent.stream.config.DEFAULT_MAX_SLOTS_AHEAD`); so many keys at most are open."""
    return stream.max_slots_ahead + math.ceil(stream.lateness_seconds / stream.slot_seconds)


class Assembler(Processor):
    """Validates reports, keeps one report per user per slot, and closes slots on watermarks.

    State key: ``stream/partition`` (the assembler of a stream runs on every ``reports`` partition),
    the partition's clock and the numbers of its open slots; each open slot's histogram and seen
    users are a key of their own, ``stream/partition/slot``, bounded by one slot. A report may be
    for at most :func:`slots_ahead` slots past the closed ones, which bounds the open slots.
    It counts only the users its partition owns (:func:`~wevent.stream.wire.reports.report_partition`),
    so that no user is counted twice in a slot across partitions. A slot closes when the
    partition's watermark passes its end plus the allowed lateness; the assembler then emits the
    slot's partial histogram (zeros if nothing arrived) to ``slots``. A watermark that would close
    more than ``max_watermark_jump_slots`` slots at once is refused and leaves the clock where it was.
    """

    state_type = AssemblerState

    def route(self, raw, topic, partition, events):
        try:
            message = decode_report_message(raw)
        except DecodeError as exc:
            return None, None, [malformed(events, self.config, topic, raw, str(exc))]
        stream = self.config.stream(message.stream)
        if stream is None:
            reports = 1 if isinstance(message, Watermark) else int(message.users.size)
            events.reports_rejected["", "unknown_stream"] += reports
            return None, None, [dead_letter(events, "unknown_stream", topic, f"no stream named {message.stream!r}",
                                            message.stream)]
        return AssemblerKey(stream.name, partition).encode(), message, []

    def initial(self, key):
        return AssemblerState(float("-inf"), 0, [])

    def state_keys(self, topic, partition, key_partition):
        return [AssemblerKey(s.name, partition).encode() for s in self.config.streams] if topic == REPORTS else []

    def apply(self, state, message, topic, partition, now, side, events):
        stream = self.config.stream(message.stream)
        if isinstance(message, Watermark):
            return self._advance(state, stream, message.time, partition, now, side, events)
        if stream.model == "local":  # raw values must never reach the server: refuse, copy nothing
            events.reports_rejected[stream.name, "raw_value_for_local_stream"] += int(message.users.size)
            return [dead_letter(events, "raw_value_for_local_stream", topic, f"{message.users.size} raw report(s) for "
                                f"local-model stream {stream.name!r} dropped unread: devices answer ldp.requests "
                                "instead", stream.name)]
        return self._accept(state, stream, message, topic, partition, side, events)

    def _accept(self, state: AssemblerState, stream, batch: ReportBatch, topic, partition: int, side: SideKeys,
                events: Events) -> list[Out]:
        logic = self.logics[stream.name]
        users, values = batch.users, batch.values
        slots = stream.slot_of_ms(batch.times_ms)
        reason = np.zeros(users.size, dtype=np.int8)  # 0 = accepted, else 1 + index in REJECT_REASONS
        failed = ((users < 0) | (users >= stream.users), (values < 0) | (values >= stream.domain), slots <= 0,
                  slots <= state.closed, slots > state.closed + slots_ahead(stream),
                  report_partition(users, self.config.report_partitions) != partition)
        for code, fails in enumerate(failed, start=1):
            reason[(reason == 0) & fails] = code
        groups = logic.group_of_users()
        owned = self._owned_users(stream, partition)
        for slot in _distinct(slots[reason == 0]):
            idx = np.flatnonzero((reason == 0) & (slots == slot))
            key = OpenSlotKey(stream.name, partition, slot).encode()
            entry = side.get(key, OpenSlot) or self._empty_slot(stream, logic)
            if int(slot) not in state.open:
                state.open = sorted([*state.open, int(slot)])
            if entry.applied == side.offset:  # written by this very input before a crash cut its state short
                reason[idx] = -1  # counted then; neither accepted nor rejected again
                continue
            idx = self._drop_duplicates(idx, users, entry.seen, reason, self.config.report_partitions)
            u = users[idx]
            entry.seen = seen_add(entry.seen, u // self.config.report_partitions, owned)
            rows = groups[u] if groups is not None else np.zeros(u.size, dtype=np.int64)
            flat = np.bincount(rows * stream.domain + values[idx], minlength=entry.counts.size)
            entry.counts += flat.reshape(entry.counts.shape)
            entry.applied = side.offset
            side.put(key, entry)
        events.reports_accepted[stream.name] += int(np.count_nonzero(reason == 0))
        outputs = []
        for code, name in enumerate(REJECT_REASONS, start=1):
            rejected = np.flatnonzero(reason == code)
            if rejected.size:
                events.reports_rejected[stream.name, name] += int(rejected.size)
                sample = rejected[:DEADLETTER_SAMPLE]
                payload = {"count": int(rejected.size), "users": users[sample].tolist(),
                           "values": values[sample].tolist(), "times_ms": batch.times_ms[sample].tolist()}
                outputs.append(dead_letter(events, name, topic, f"{rejected.size} report(s) rejected: {name}",
                                           stream.name, payload))
        return outputs

    def _owned_users(self, stream, partition: int) -> int:
        """How many user indices a partition owns (users ``u`` with ``u % P == partition``, seen as ``u // P``)."""
        return -(-(stream.users - partition) // self.config.report_partitions)

    def max_slot_bytes(self, stream) -> int:
        """The largest a ``stream/partition/slot`` value can be: every owned user seen, all counts set."""
        logic = self.logics[stream.name]
        seen_everyone = np.zeros((self._owned_users(stream, 0) + 7) // 8, np.uint8)
        full = replace(self._empty_slot(stream, logic), seen=seen_everyone, applied=2**63 - 1)
        return len(full.pack())

    @staticmethod
    def _drop_duplicates(idx: np.ndarray, users: np.ndarray, seen: np.ndarray, reason: np.ndarray,
                         partitions: int) -> np.ndarray:
        """Keep the first report of each user not already seen in this slot; mark the rest duplicate."""
        u = users[idx]
        keep = ~seen_contains(seen, u // partitions)
        if not (u[1:] > u[:-1]).all():  # increasing users (as producers send them) cannot repeat
            first = np.zeros(idx.size, dtype=bool)
            first[np.unique(u, return_index=True)[1]] = True
            keep &= first
        reason[idx[~keep]] = 1 + REJECT_REASONS.index("duplicate")
        return idx[keep]

    @staticmethod
    def _empty_slot(stream, logic) -> OpenSlot:
        return OpenSlot(np.zeros((logic.groups, stream.domain), dtype=np.int64), np.zeros(0, dtype=np.int64), -1)

    def _advance(self, state: AssemblerState, stream, time: float, partition: int, now: float, side: SideKeys,
                 events: Events) -> list[Out]:
        if time <= state.watermark:
            return []
        through = stream.closable_through(time)
        limit = stream.max_watermark_jump_slots
        if through - state.closed > limit:
            events.reports_rejected[stream.name, "watermark_too_far_ahead"] += 1
            return [dead_letter(events, "watermark_too_far_ahead", REPORTS,
                                f"watermark {time:.3f} on partition {partition} would close slots {state.closed + 1}.."
                                f"{through} at once; at most {limit} (max_watermark_jump_slots)", stream.name)]
        state.watermark = float(time)
        logic = self.logics[stream.name]
        outputs = []
        is_open = set(state.open)
        for slot in range(state.closed + 1, through + 1):
            key = OpenSlotKey(stream.name, partition, slot).encode()
            entry = (side.get(key, OpenSlot) if slot in is_open else None) or self._empty_slot(stream, logic)
            if slot in is_open:
                side.delete(key)
            partial = PartialMessage(stream.name, slot, partition, entry.counts, now)
            outputs.append(Out(SLOTS, partial.encode(), stream.name))
            events.slots_closed[stream.name] += 1
        state.closed = max(state.closed, through)
        state.open = [slot for slot in state.open if slot > state.closed]
        return outputs


# ---------------------------------------------------------------------------------------------
# M1: partials + last release -> private dissimilarity
# ---------------------------------------------------------------------------------------------
@dataclass(eq=False)
class DissimilarityState(HeadState):
    """M1's state of one stream: the slot it measures next and the last release it knows."""

    next: int
    last_slot: int
    last_release: np.ndarray


@dataclass(eq=False)
class PendingPartial(TableValue):
    """A partition's partial of a slot M1 has not measured yet."""

    counts: np.ndarray  # (groups, domain)
    closed_at: float


class DissimilarityProcessor(Processor):
    """Merges the partials of a slot and computes its private dissimilarity (M1).

    Reads ``slots`` (partials) and ``releases`` (to learn the last release). Slot t is measured
    only when every assembler partition closed it and release t-1 is known, so that the
    dissimilarity is computed against exactly the release M2 published.

    State key: ``stream`` (the next slot to measure, the last release); each partial waits in a
    key of its own, ``stream/slot/partition``, so that a backlog of closed slots costs no work per
    message. Partials reach at most :data:`MAX_SLOTS_PENDING` slots ahead.
    """

    reads = (ReleaseRecord, PartialMessage, SupportMessage)
    state_type = DissimilarityState

    def route(self, raw, topic, partition, events):
        body, tag = unseal(raw)
        try:
            if topic == RELEASES:
                record = ReleaseRecord.from_json(body)
                stream_name, message = record.stream, record
            else:
                message = decode_message(body)
                stream_name = message.stream
        except (DecodeError, json.JSONDecodeError, UnicodeDecodeError, TypeError, KeyError) as exc:
            return None, None, [dead_letter(events, "malformed", topic, str(exc))]
        if stream_name not in self.logics:
            return None, None, [dead_letter(events, "unknown_stream", topic, f"no stream named {stream_name!r}",
                                            stream_name)]
        refused = (self.keys.refusal(events, topic, stream_name, body, tag)
                   or self.wrong_kind(events, message, topic, stream_name))
        return (None, None, refused) if refused else (stream_name, message, [])

    def state_keys(self, topic, partition, key_partition):
        return [s.name for s in self.config.streams if key_partition(s.name) == partition]

    def initial(self, key):
        return DissimilarityState(1, 0, np.zeros(self.config.stream(key).domain))

    def apply(self, state, message, topic, partition, now, side, events):
        name = message.stream
        impossible = self._impossible(state, message, topic)
        if impossible:
            return [refuse(events, "out_of_range", topic, impossible, name)]
        if topic == RELEASES:
            if message.slot > state.last_slot:
                state.last_slot = message.slot
                state.last_release = np.asarray(message.release, dtype=float)
        elif isinstance(message, SupportMessage):  # local model: the phase-1 reports of the open slot
            return self._measure_support(state, name, message)
        elif message.slot >= state.next:
            side.put(PartialKey(name, message.slot, message.partition).encode(),
                     PendingPartial(message.counts, message.closed_at))
        return self._advance(state, name, side)

    def _impossible(self, state, message, topic) -> str | None:
        """Why an authentic-looking message cannot come from a worker (None if it can)."""
        if topic == RELEASES:  # M2 releases slot t only after M1 measured it, and M1 then moved on
            if not 1 <= message.slot < state.next:
                return f"release of slot {message.slot} while slots 1..{state.next - 1} were measured"
        elif isinstance(message, PartialMessage):
            slot, partition = message.slot, message.partition
            if not 1 <= slot <= state.next + MAX_SLOTS_PENDING or not 0 <= partition < self.config.report_partitions:
                return f"partial of slot {slot} from partition {partition} while slot {state.next} is open"
        return None

    def _measure_support(self, state, name, message: SupportMessage) -> list[Out]:
        if message.slot != state.last_slot + 1:  # measured against release slot-1 only
            return []
        dis = self.logics[name].measure_support(message.request, message.support, message.n, state.last_release)
        return [Out(MEASUREMENTS, DissimilarityMessage(name, message.slot, dis).encode(), name)]

    def _advance(self, state, name, side: SideKeys) -> list[Out]:
        slot = state.next
        if state.last_slot != slot - 1:
            return []
        keys = [PartialKey(name, slot, p).encode() for p in range(self.config.report_partitions)]
        partials = [side.get(key, PendingPartial) for key in keys]
        if any(partial is None for partial in partials):
            return []
        counts = sum(np.asarray(partial.counts, dtype=np.int64) for partial in partials)
        closed_at = max(partial.closed_at for partial in partials)
        ready = self.logics[name].slot_ready(slot, closed_at, counts, state.last_release)
        for key in keys:
            side.delete(key)
        state.next = slot + 1
        return [Out(MEASUREMENTS, ready.encode(), name)]


# ---------------------------------------------------------------------------------------------
# M2: decision, release, ledger
# ---------------------------------------------------------------------------------------------
RECENT_RELEASES = 8  # releases kept for identical re-emission after a crash


@dataclass(eq=False)
class PublicationState(HeadState):
    """M2's state of one stream: its mechanism, its ledger, and which outputs it keeps."""

    mechanism: bytes  # the head of the mechanism's state; its large parts are side keys (MechanismPart)
    recent: list[int]  # slots whose release is kept (ReleaseKey)
    steps: list[str]  # local-model steps applied, whose output is kept (StepKey, StepOutputKey)
    spend: np.ndarray  # the mechanism's sliding ledger (Mechanism.sliding_ledger): the last window's charges
    closed_at: float  # when the slot in progress closed


@dataclass
class MechanismPart(TableValue):
    """A large value of M2's mechanism state, under its digest (:func:`~wevent.core.packing.pack_split`)."""

    data: bytes

    def to_fields(self):
        return {"bytes": self.data}

    @classmethod
    def from_fields(cls, stored):
        return cls(stored["bytes"])


@dataclass
class KeptOutputs(TableValue):
    """What M2 sent for a slot or step, by topic, to send again identically when its input is replayed."""

    by_topic: dict[str, bytes]

    def to_fields(self):
        return dict(self.by_topic)

    @classmethod
    def from_fields(cls, stored):
        return cls(dict(stored))


class PublicationProcessor(Processor):
    """Decides and publishes (M2); holds the mechanism state and budget ledger of each stream.

    State key: ``stream`` (the mechanism, the window's charges, which outputs are kept); the
    outputs of the last :data:`RECENT_RELEASES` slots, re-emitted identically when their input is
    replayed, are keys of their own (``stream/release/slot``, ``stream/step/slot:kind:phase``), so
    that no value holds more than one slot's release.
    """

    persist_before_send = True
    reads = (MeasuredMessage, ReadyMessage, DissimilarityMessage, SupportMessage)
    state_type = PublicationState

    def state_keys(self, topic, partition, key_partition):
        return [s.name for s in self.config.streams if key_partition(s.name) == partition]

    def route(self, raw, topic, partition, events):
        body, tag = unseal(raw)
        try:
            message = decode_message(body)
            name = message.stream
        except DecodeError as exc:
            return None, None, [dead_letter(events, "malformed", topic, str(exc))]
        if name not in self.logics:
            return None, None, [dead_letter(events, "unknown_stream", topic, f"no stream named {name!r}", name)]
        refused = self.keys.refusal(events, topic, name, body, tag) or self.wrong_kind(events, message, topic, name)
        return (None, None, refused) if refused else (name, message, [])

    def initial(self, key):
        mechanism = self.logics[key].new_mechanism()
        return PublicationState(mechanism.to_bytes(), [], [], mechanism.sliding_ledger().state(), 0.0)

    def max_release_bytes(self, stream) -> int:
        """The largest release record of ``stream``: every value, and every number, at its longest."""
        longest = -2.2250738585072014e-308
        record = ReleaseRecord(stream.name, 2**31, [longest] * stream.domain, "approximation", stream.mechanism,
                               longest, 2**31, longest, longest, longest, longest, longest, longest, longest)
        return len(record.to_bytes())

    def max_head_bytes(self, stream) -> int:
        """The size of the stream's state once its window's charges are full, with the mechanism as it
        starts (a local mechanism's ledger holds a number per user: its population counts here)."""
        ledger = self.logics[stream.name].new_mechanism().sliding_ledger()
        full = np.zeros((ledger.keep, ledger.columns))
        recent, steps = [2**31] * RECENT_RELEASES, [StepKey(2**31, "dissimilarity", 2).encode()] * (3 * RECENT_RELEASES)
        return len(replace(self.initial(stream.name), spend=full, recent=recent, steps=steps).pack())

    def apply(self, state, message, topic, partition, now, side, events):
        name = message.stream
        logic = self.logics[name]
        mechanism = logic.restore(state.mechanism, MechanismParts(side, name))
        slot = message.slot
        if slot < 1:  # authentic-looking, but no worker measures such a slot (nor could a key name it)
            return [refuse(events, "out_of_range", topic, f"{message.kind} of slot {slot}", name)]
        measured = isinstance(message, MeasuredMessage)
        step = StepKey(slot, message.kind, message.phase if isinstance(message, SupportMessage) else 0)
        if slot <= mechanism.slot or step.encode() in state.steps:  # a replayed input: re-emit what it caused
            kept_key = ReleaseKey(name, slot) if measured else StepOutputKey(name, step)
            kept = side.get(kept_key.encode(), KeptOutputs)
            return [Out(t, v, name) for t, v in kept.by_topic.items()] if kept else []
        if slot != mechanism.slot + 1:
            return [dead_letter(events, "gap", topic, f"slot {slot} arrived while waiting for {mechanism.slot + 1}",
                                name)]
        changed = logic.parameters_changed(mechanism)
        if changed:
            log.error("stream %s: mechanism parameters changed; slot %d not released: %s", name, slot, changed)
            return [dead_letter(events, "config_changed", topic, f"slot {slot} not released: {changed}", name)]
        if measured:  # central and personalized: one step per slot
            outcome = logic.publish(mechanism, message.counts, message.dissimilarity)
            state.closed_at = message.closed_at
        else:
            outcome = self._local_step(state, mechanism, message)
            if outcome is None:
                return []
        if isinstance(outcome, StepResult):
            outputs = self._release(state, logic, mechanism, outcome, now, side, events)
        else:  # the local model asks the devices: a request for this slot's next phase
            outputs = {LDP_REQUESTS: RequestMessage(name, outcome).encode()}
        self._store_mechanism(state, name, mechanism, side)
        if not measured:
            state.steps = self._keep(side, [*state.steps, step.encode()],
                                     lambda k: StepOutputKey(name, StepKey.decode(k)), outputs, slot)
        return [Out(t, v, name) for t, v in outputs.items()]

    @staticmethod
    def _store_mechanism(state: PublicationState, name: str, mechanism, side: SideKeys) -> None:
        """The mechanism's state as a head in ``state`` and its large values (a local stream's
        population sets, up to N/8 bytes each) in side keys named by their digest: a part is
        written once, when it appears, and deleted when the head no longer names it."""
        head, parts = mechanism.to_parts()
        before = packing.references(state.mechanism)
        for digest in parts.keys() - before:
            side.put(MechanismPartKey(name, digest).encode(), MechanismPart(parts[digest]))
        for digest in sorted(before - parts.keys()):
            side.delete(MechanismPartKey(name, digest).encode())
        state.mechanism = head

    @staticmethod
    def _local_step(state: PublicationState, mechanism, message):
        """Advance a local mechanism's protocol by the message it waits for (None for anything else)."""
        expected = {"ready": "open_slot", "dissimilarity": "measure", "support": "publish"}[message.kind]
        if mechanism.expecting != expected:
            return None
        if isinstance(message, ReadyMessage):
            state.closed_at = message.closed_at
            request = mechanism.open_slot()
            return request if request is not None else mechanism.decide()
        if isinstance(message, DissimilarityMessage):
            return mechanism.decide(message.dissimilarity)
        return mechanism.publish(message.support, message.n)

    @staticmethod
    def _keep(side: SideKeys, kept: list, key_of: Callable[[Any], ReleaseKey | StepOutputKey],
              outputs: dict[str, bytes], slot: int) -> list:
        """Store ``outputs`` under the key of the newest of ``kept`` (the state's short forms of the
        keys, which ``key_of`` expands); forget those of slots :data:`RECENT_RELEASES` ago."""
        side.put(key_of(kept[-1]).encode(), KeptOutputs(outputs))
        old = [k for k in kept if key_of(k).slot <= slot - RECENT_RELEASES]
        for k in old:
            side.delete(key_of(k).encode())
        return [k for k in kept if k not in old]

    def _release(self, state: PublicationState, logic, mechanism, result: StepResult, now: float, side: SideKeys,
                 events: Events) -> dict[str, bytes]:
        """The release and audit record of a finished slot; keeps the window accounting."""
        name, slot = logic.stream.name, result.slot
        ledger = mechanism.sliding_ledger(state.spend)
        group_spend = ledger.record(result)  # every group's spend over its own window ending here
        state.spend = ledger.state()
        record = logic.record(mechanism, result, group_spend, logic.stream.slot_start(slot), logic.stream.slot_end(slot))
        audit = logic.audit(mechanism, result)
        outputs = {RELEASES: record.to_bytes(), AUDIT: audit.to_bytes()}
        state.recent = self._keep(side, [*state.recent, slot], lambda k: ReleaseKey(name, k), outputs, slot)
        events.releases.append(logic.released(mechanism, result, ledger.tightest(), now, float(state.closed_at)))
        return outputs


# ---------------------------------------------------------------------------------------------
# Collector (local model): perturbed reports -> the oracle's support, per (slot, phase)
# ---------------------------------------------------------------------------------------------
CLOSED_ROUNDS_KEPT = 16  # closed rounds remembered, so that a late report is told apart from an unrequested one

MAX_EARLY_MESSAGES = 256
"""Report messages a collector holds for requests it has not read yet. A device answers only
after it read the request, so honest early reports are those of the request the collector is
about to read: one round's messages. Each waits in a key of its own; more are refused as
``unrequested`` rather than held."""


def valid_reports(request: Request, reports: np.ndarray, n: int) -> np.ndarray:
    """Which of ``n`` reports the request's oracle could have produced (shape and range)."""
    d, oracle = request.domain_size, request.oracle
    reports = np.asarray(reports)
    if oracle == "grr":
        if reports.shape != (n,) or reports.dtype.kind not in "iu":
            return np.zeros(n, dtype=bool)
        return (reports >= 0) & (reports < d)
    if oracle == "oue":
        width = -(-d // 8)
        return np.full(n, reports.dtype == np.uint8 and reports.shape == (n, width))
    if reports.shape != (n,) or reports.dtype.kind != "f":  # hm: outputs in [-C_d, C_d]
        return np.zeros(n, dtype=bool)
    e = np.exp(request.epsilon)
    return np.isfinite(reports) & (np.abs(reports) <= (e + 1) / (e - 1) * (1 + 1e-12))


def asked_positions(request: Request, users: np.ndarray) -> np.ndarray:
    """Each user's position among the users ``request`` asks (meaningless for a user not asked).

    A round keeps who answered as a set of positions: a bit per asked user at most, where a set of
    ids could take a bit per user of the population (1.25 MB at ten million users, over the bound
    of a table value, rewritten with every message of reports)."""
    if request.users is None:
        return users
    return np.minimum(np.searchsorted(request.users, users), max(request.size - 1, 0))


def answered_ids(answered: np.ndarray, population: int) -> np.ndarray:
    """The ids in a seen set of user ids (sorted ids, or a bitset of the population)."""
    if answered.dtype == np.uint8:
        return np.flatnonzero(np.unpackbits(answered, count=population))
    return answered


@dataclass(eq=False)
class Round(TableValue):
    """A collector's open round: how many users its request asks, who of them answered, the sum of
    their reports' support, and until when it waits."""

    asked: int
    answered_at: np.ndarray  # positions among the asked users (:func:`asked_positions`, :func:`seen_add`)
    support: np.ndarray | None  # None until a report counts
    n: int  # users who answered
    deadline: float
    inline_request: Request | None = None  # held by rounds of the first layouts; else in its own key

    def to_fields(self):
        stored = {"asked": self.asked, "answered_at": self.answered_at, "support": self.support, "n": self.n,
                  "deadline": self.deadline}
        return stored if self.inline_request is None else stored | {"request": self.inline_request.to_dict()}

    @classmethod
    def from_fields(cls, stored):
        inline = Request.from_dict(stored["request"]) if "request" in stored else None
        if "answered" in stored:  # the first layout: its answered users by id, its request inline
            answered_at = seen_add(np.zeros(0, dtype=np.int64), asked_positions(
                inline, answered_ids(stored["answered"], inline.population)), inline.size)
        else:
            answered_at = stored["answered_at"]
        return cls(stored["asked"], answered_at, stored["support"], stored["n"], stored["deadline"], inline)


@dataclass
class RoundRequest(TableValue):
    """A round's request, in a key of its own: written once, read with every message of reports."""

    request: Request

    def to_fields(self):
        return self.request.to_dict()

    @classmethod
    def from_fields(cls, stored):
        return cls(Request.from_dict(stored))


@dataclass(eq=False)
class CollectorState(HeadState):
    """A collector's state of one stream: its open rounds by :class:`RoundKey`, the rounds it closed
    last, and the reports waiting for their request."""

    rounds: dict[str, Round]
    closed: list[str]  # the last CLOSED_ROUNDS_KEPT rounds closed
    early: dict[str, list[list]]  # round -> [arrival time, EarlyReportsKey] of each message waiting

    def to_fields(self):
        return super().to_fields() | {"rounds": {key: round_.to_fields() for key, round_ in self.rounds.items()}}

    @classmethod
    def from_fields(cls, stored):
        return super().from_fields(stored | {"rounds": {key: Round.from_fields(round_)
                                                        for key, round_ in stored["rounds"].items()}})


def request_key(stream: str, round_key: str) -> str:
    """The collector's key of a round's request (``round_key`` as a round's state holds it)."""
    return RoundRequestKey(stream, RoundKey.decode(round_key)).encode()


def round_request(round_: Round, stream: str, round_key: str, side: SideKeys) -> Request:
    """A round's request: in a key of its own (inline in a round the first layouts stored)."""
    if round_.inline_request is not None:
        return round_.inline_request
    return side.get(request_key(stream, round_key), RoundRequest).request


class Collector(Processor):
    """Sums the perturbed reports of each (slot, phase) round into the oracle's support.

    Reads ``ldp.requests`` (M2's requests: which users are asked) and ``ldp.reports`` (the devices'
    answers, and ticks). A round closes when every asked user answered or its deadline passed
    (the users who did not answer are counted); its support goes to M1 (phase 1, on ``slots``) or
    M2 (phase 2, on ``dissimilarity``). A report from a user who was not asked, a second report, a
    report for a closed round, or one no oracle could produce is counted and dead-lettered.

    State key: ``stream``: its open rounds (M2 opens one at a time, each holding at most a bit per
    asked user: who answered, by position in the request) and the index of early reports. A round's
    request is written once, in ``stream/request/slot:phase``; a message of reports that overtook
    its request waits in a key of its own, ``stream/early/slot:phase/offset``, at most
    :data:`MAX_EARLY_MESSAGES` of them.
    """

    reads = (RequestMessage, ReportsMessage, TickMessage)
    state_type = CollectorState

    def route(self, raw, topic, partition, events):
        body, tag = unseal(raw)
        try:
            message = decode_message(body)
            name = message.stream
        except DecodeError as exc:
            return None, None, [malformed(events, self.config, topic, raw, str(exc))]
        except ValueError:  # the codec failed deeper (text, array buffers); its message may quote the bytes
            return None, None, [malformed(events, self.config, topic, raw, "malformed internal message")]
        stream = self.config.stream(name)
        if stream is None or stream.model != "local":
            events.reports_rejected["", "unknown_stream"] += 1
            return None, None, [dead_letter(events, "unknown_stream", topic, f"no local-model stream named {name!r}",
                                            name)]
        if isinstance(message, TickMessage):  # carries nothing but "look at the clock": the worker's own clock
            return name, message, []
        refused = self.keys.refusal(events, topic, name, body, tag)
        if refused and topic == LDP_REPORTS and isinstance(message, ReportsMessage):
            events.reports_rejected[name, "unauthenticated"] += int(message.users.size)
        refused = refused or self.wrong_kind(events, message, topic, name)
        return (None, None, refused) if refused else (name, message, [])

    def initial(self, key):
        return CollectorState({}, [], {})

    def state_keys(self, topic, partition, key_partition):
        return [s.name for s in self.config.streams if s.model == "local" and key_partition(s.name) == partition]

    def apply(self, state, message, topic, partition, now, side, events):
        name = message.stream
        outputs = []
        if isinstance(message, RequestMessage):
            request = message.request
            key = RoundKey(request.slot, int(request.phase)).encode()
            if key not in state.rounds and key not in state.closed:
                # written once: each message of reports rewrites the round
                side.put(request_key(name, key), RoundRequest(request))
                state.rounds[key] = Round(request.size, np.zeros(0, dtype=np.int64), None, 0,
                                          now + self.logics[name].deadline_seconds)
                for _, early in state.early.pop(key, []):  # reports that overtook their request
                    outputs += self._accept(state, name, side.get(early, ReportsMessage), topic, now, side, events)
                    side.delete(early)
        elif isinstance(message, ReportsMessage):
            outputs += self._accept(state, name, message, topic, now, side, events)
        return (outputs + self._close_due(state, name, now, side, events)
                + self._expire_early(state, name, now, topic, side, events))

    def _accept(self, state: CollectorState, name, reports: ReportsMessage, topic, now: float, side: SideKeys,
                events: Events) -> list[Out]:
        users = np.asarray(reports.users, dtype=np.int64)
        try:
            round_key = RoundKey(reports.slot, reports.phase)
        except MalformedKey as exc:
            return self._reject(events, name, "malformed", topic, users, str(exc))
        key = round_key.encode()
        round_ = state.rounds.get(key)
        if round_ is None:
            if key in state.closed:
                return self._reject(events, name, "late", topic, users, f"round {key} is closed")
            # The two topics are read without order between them: a device's reports may arrive
            # before the request they answer. They wait for it, then count, or expire as unrequested.
            if sum(map(len, state.early.values())) >= MAX_EARLY_MESSAGES:
                return self._reject(events, name, "unrequested", topic, users, f"no request for round {key}, and "
                                    f"{MAX_EARLY_MESSAGES} messages wait for theirs already")
            early = EarlyReportsKey(name, round_key, side.offset).encode()
            side.put(early, reports)
            state.early.setdefault(key, []).append([now, early])
            return []
        request = round_request(round_, name, key, side)
        if users.size != len(reports.reports):
            return self._reject(events, name, "malformed", topic, users, "users and reports differ in number")
        ok = valid_reports(request, reports.reports, users.size)
        asked = request.asks(users)
        first = np.zeros(users.size, dtype=bool)
        first[np.unique(users, return_index=True)[1]] = True
        at = asked_positions(request, users)
        fresh = first & ~seen_contains(round_.answered_at, at)
        outputs = []
        for mask, reason in ((~ok, "out_of_domain"), (ok & ~asked, "unrequested"), (ok & asked & ~fresh, "duplicate")):
            if mask.any():
                outputs += self._reject(events, name, reason, topic, users[mask], f"round {key}")
        keep = ok & asked & fresh
        if keep.any():
            support = request.make_oracle().support(reports.reports[keep])
            round_.support = support if round_.support is None else round_.support + support
            round_.answered_at = seen_add(round_.answered_at, at[keep], request.size)
            round_.n += int(keep.sum())
            events.reports_accepted[name] += int(keep.sum())
        return outputs

    def _expire_early(self, state: CollectorState, name, now: float, topic, side: SideKeys,
                      events: Events) -> list[Out]:
        """Reports that waited a whole deadline for a request that never came were not requested."""
        outputs = []
        grace = self.logics[name].deadline_seconds
        for key in list(state.early):
            waiting = [e for e in state.early[key] if e[0] + grace > now]
            for _, expired in (e for e in state.early[key] if e[0] + grace <= now):
                outputs += self._reject(events, name, "unrequested", topic,
                                        np.asarray(side.get(expired, ReportsMessage).users, dtype=np.int64),
                                        f"no request for round {key} within {grace:g} s")
                side.delete(expired)
            if waiting:
                state.early[key] = waiting
            else:
                del state.early[key]
        return outputs

    @staticmethod
    def _reject(events: Events, name, reason, topic, users, detail) -> list[Out]:
        events.reports_rejected[name, reason] += int(users.size)
        return [dead_letter(events, reason, topic, f"{users.size} report(s) rejected: {detail}", name,
                            {"count": int(users.size), "users": users[:DEADLETTER_SAMPLE].tolist()})]

    def _close_due(self, state: CollectorState, name, now: float, side: SideKeys, events: Events) -> list[Out]:
        outputs = []
        for round_key in sorted(RoundKey.decode(k) for k in state.rounds):
            key = round_key.encode()
            round_ = state.rounds[key]
            if round_.n < round_.asked and now < round_.deadline:
                continue
            del state.rounds[key]
            state.closed = [*state.closed, key][-CLOSED_ROUNDS_KEPT:]
            missing = round_.asked - round_.n
            if missing:
                events.missing_reports[name] += missing
            request = round_request(round_, name, key, side)
            side.delete(request_key(name, key))
            support = round_.support if round_.support is not None else np.zeros(
                1 if request.oracle == "hm" else request.domain_size)
            message = SupportMessage(name, round_key.slot, round_key.phase, support, round_.n, missing, request)
            outputs.append(Out(SLOTS if round_key.phase == 1 else MEASUREMENTS, message.encode(), name))
        return outputs


@dataclass
class Processors:
    assembler: Assembler
    dissimilarity: DissimilarityProcessor
    publication: PublicationProcessor
    collector: Collector

    @classmethod
    def build(cls, config: AppConfig) -> "Processors":
        logics = {s.name: logic_for(config, s) for s in config.streams}
        keys = ServerKeys.from_config(config)
        built = cls(*(kind(config, logics, keys) for kind in (Assembler, DissimilarityProcessor, PublicationProcessor,
                                                               Collector)))
        for stream in config.streams:
            largest = {"its release": built.publication.max_release_bytes(stream),
                       "its mechanism's state and window of charges": built.publication.max_head_bytes(stream)}
            if stream.model != "local":
                largest["one slot's state (a count per value and group, a bit per user of a reports partition)"] = \
                    built.assembler.max_slot_bytes(stream)
            what, size = max(largest.items(), key=lambda item: item[1])
            if size > MAX_MESSAGE_BYTES:
                raise ConfigError(f"stream {stream.name!r}: {what} can reach {size} bytes, above the "
                                  f"{MAX_MESSAGE_BYTES} bytes of a message: use a smaller domain, window or population"
                                  f"{', or more report_partitions' if what.startswith('one slot') else ''}")
        return built
