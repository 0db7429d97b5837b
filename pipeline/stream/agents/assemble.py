"""The assembler: reports -> per-partition slot partials."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..wire.format import DecodeError
from ..wire.keys import AssemblerKey, OpenSlotKey
from ..wire.messages import PartialMessage
from ..wire.reports import ReportBatch, Watermark, decode_report_message, report_partition
from ..wire.topics import REPORTS, SLOTS
from .base import DEADLETTER_SAMPLE, HeadState, Out, Processor, SideKeys, TableValue, dead_letter, malformed
from .events import Events
from .seen import seen_add, seen_contains

__all__ = ["REJECT_REASONS", "MAX_PRODUCERS", "AssemblerState", "OpenSlot", "slots_ahead", "live_producers",
           "Assembler"]

# In order of precedence: a report is rejected for the first that applies.
REJECT_REASONS = ("unknown_user", "out_of_domain", "before_start", "late", "too_far_ahead", "wrong_partition",
                  "duplicate")


def _distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted; without a sort when they are all equal (one slot per batch, as a rule)."""
    if values.size and values.min() == values.max():
        return values[:1]
    return np.unique(values)


MAX_PRODUCERS = 100
"""The most live producers an assembler partition keeps a watermark of, per stream. Their
watermarks are in the partition's head, which every input rewrites: at most about 9 KB of it. The
watermark of one more producer is refused (``too_many_producers``) and changes nothing; that
producer's reports are still counted, but its watermarks do not hold the clock back."""


@dataclass
class AssemblerState(HeadState):
    """An assembler partition's clock for one stream: its watermark (the clock), the slots it
    closed (all up to ``closed``), the slots it holds a key of counts for, and the last watermark
    of each live producer (:func:`live_producers`)."""

    watermark: float  # epoch seconds; -inf before the first
    closed: int
    open: list[int]
    producers: dict[str, float]  # producer id ("" for the anonymous one) -> its last watermark


@dataclass(eq=False)
class OpenSlot(TableValue):
    """A slot an assembler partition has not closed: its counts and who was counted."""

    counts: np.ndarray  # (groups, domain)
    seen: np.ndarray  # the users counted, as u // P (:func:`seen_add`)
    applied: int  # the offset of the input that wrote it last


def slots_ahead(stream) -> int:
    """The assembler's horizon for ``stream``: a report may be for at most this many slots past the
    closed ones (``max_slots_ahead``, by default :data:`~wevent.stream.config.DEFAULT_MAX_SLOTS_AHEAD`,
    plus its lateness and its producers' idleness in slots: the most advanced producer runs so far
    ahead of the clock); so many keys at most are open."""
    return (stream.max_slots_ahead + math.ceil(stream.lateness_seconds / stream.slot_seconds)
            + math.ceil(stream.idle_seconds / stream.slot_seconds))


def live_producers(watermarks: dict[str, float], idle_seconds: float) -> dict[str, float]:
    """The producers that hold a partition's clock back, by id: those whose last watermark trails
    the most advanced one by at most ``idle_seconds``, in the order of their ids.

    >>> live_producers({"b": 600.0, "a": 300.0, "c": 50.0}, idle_seconds=300)
    {'a': 300.0, 'b': 600.0}
    """
    frontier = max(watermarks.values())
    return {p: t for p, t in sorted(watermarks.items()) if t >= frontier - idle_seconds}


class Assembler(Processor):
    """Validates reports, keeps one report per user per slot, and closes slots on watermarks.

    State key: ``stream/partition`` (the assembler of a stream runs on every ``reports`` partition),
    the partition's clock and the numbers of its open slots; each open slot's histogram and seen
    users are a key of their own, ``stream/partition/slot``, bounded by one slot. A report may be
    for at most :func:`slots_ahead` slots past the closed ones, which bounds the open slots.
    It counts only the users its partition owns (:func:`~wevent.stream.wire.reports.report_partition`),
    so that no user is counted twice in a slot across partitions. A slot closes when the
    partition's watermark passes its end plus the allowed lateness; the assembler then emits the
    slot's partial histogram (zeros if nothing arrived) to ``slots``. A watermark more than
    ``max_watermark_jump_slots`` slots past the closed ones is refused and changes nothing.

    **Many producers.** A partition hears watermarks from several producers, each naming itself
    (:class:`~wevent.stream.wire.reports.Watermark`; the producer without a name is one producer
    too, so a feed of one anonymous producer behaves as it always has). The state keeps each
    producer's last watermark, and the partition's watermark is the least of those of the *live*
    producers (never moving back): a slot closes once every live producer has promised it has
    nothing more for it. A producer is live while its last watermark trails the most advanced
    producer's by at most the stream's ``idle_producer_seconds``
    (:attr:`~wevent.stream.config.StreamConfig.idle_seconds`, :func:`live_producers`); a producer
    that died or stalls stops holding the clock back once the others have gone that far past it, and
    what it sends after its slots closed is late, counted and dead-lettered as any late report.
    A producer that restarts under its id carries on from its last watermark.

    Idleness is measured in event time, by the other producers' progress, and not by any clock:
    the partition's clock is then a function of the partition's messages in their order, so a
    replay (a restarted worker re-reading its input) closes every slot exactly as the first run did,
    however fast it reads. A wall clock (the worker's, or the times producers stamp on their
    messages) would close slots differently on a re-read and could change a release. The price:
    a live producer that falls further behind the others than the idleness, in event time, is
    taken for idle; producers replaying faster than real time must start together and keep within
    it of each other. A producer idle in this sense is dropped from the state (it holds nothing
    back, and its later watermarks count as those of a newcomer), which bounds the state by the
    live producers: at most :data:`MAX_PRODUCERS`. A producer unknown to a partition holds nothing
    back either, which is why a producer's first message to every partition is a watermark (at
    the start of the first slot it sends), before any report: the assembler waits for it from then on.
    """

    state_type = AssemblerState

    def route(self, raw, topic, partition, events):
        try:
            message = decode_report_message(raw)
        except DecodeError as exc:
            return None, None, [malformed(events, self.keys, topic, raw, str(exc))]
        stream = self.config.stream(message.stream)
        if stream is None:
            reports = 1 if isinstance(message, Watermark) else int(message.users.size)
            events.reports_rejected["", "unknown_stream"] += reports
            return None, None, [dead_letter(events, "unknown_stream", topic, f"no stream named {message.stream!r}",
                                            message.stream)]
        return AssemblerKey(stream.name, partition).encode(), message, []

    def initial(self, key):
        return AssemblerState(float("-inf"), 0, [], {})

    def state_keys(self, topic, partition, key_partition):
        return [AssemblerKey(s.name, partition).encode() for s in self.config.streams] if topic == REPORTS else []

    def apply(self, state, message, topic, partition, now, side, events):
        stream = self.config.known_stream(message.stream)
        if isinstance(message, Watermark):
            return self._advance(state, stream, message, partition, now, side, events)
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

    def _advance(self, state: AssemblerState, stream, mark: Watermark, partition: int, now: float, side: SideKeys,
                 events: Events) -> list[Out]:
        producer = mark.producer or ""
        if mark.time <= state.producers.get(producer, float("-inf")):
            return []
        who = f"producer {mark.producer!r}" if mark.producer else "the anonymous producer"
        limit, reaches = stream.max_watermark_jump_slots, stream.closable_through(mark.time)
        if reaches - state.closed > limit:
            events.reports_rejected[stream.name, "watermark_too_far_ahead"] += 1
            return [dead_letter(events, "watermark_too_far_ahead", REPORTS,
                                f"watermark {mark.time:.3f} of {who} on partition {partition} reaches slot {reaches}, "
                                f"more than {limit} slots (max_watermark_jump_slots) past the closed ones (up to "
                                f"{state.closed})", stream.name)]
        producers = live_producers({**state.producers, producer: float(mark.time)}, stream.idle_seconds)
        if len(producers) > MAX_PRODUCERS:
            events.reports_rejected[stream.name, "too_many_producers"] += 1
            return [dead_letter(events, "too_many_producers", REPORTS, f"watermark of {who} on partition {partition} "
                                f"refused: {MAX_PRODUCERS} live producers already hold its clock", stream.name)]
        state.producers = producers
        clock = min(producers.values())
        if clock <= state.watermark:
            return []
        state.watermark = clock
        through = stream.closable_through(clock)
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
