"""M1: partials + last release -> private dissimilarity."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import cast

import numpy as np

from ..wire.format import DecodeError
from ..wire.keys import PartialKey
from ..wire.messages import DissimilarityMessage, InternalMessage, PartialMessage, SupportMessage, decode_message
from ..wire.records import ReleaseRecord
from ..wire.seals import unseal
from ..wire.topics import MEASUREMENTS, RELEASES, SLOTS
from .base import (LONGEST_INTEGER, HeadState, Out, Processor, SideKeys, TableValue, all_offsets, at_longest,
                   dead_letter, refuse)
from .local import LocalLogic

__all__ = ["MAX_SLOTS_PENDING", "DissimilarityState", "PendingPartial", "DissimilarityProcessor"]

MAX_SLOTS_PENDING = 20_000
"""How far ahead of the slot it measures next M1 keeps partials. A backlog (a producer far ahead,
the assembler closing slots faster than releases come back) waits in one key per (slot,
partition), so it costs memory, at most this many slots' partials, but no work per message. Two
weeks of one-minute slots: a whole dataset replayed at full speed fits. A partial beyond is
refused as ``out_of_range`` (the stream then stops at that slot, loudly)."""


@dataclass(eq=False)
class DissimilarityState(HeadState):
    """M1's state of one stream: the slot it measures next, the last release it knows and, where the
    mechanism's measure follows the releases (BD and BA with grouping: the partition of the bins),
    the measure's own state (:meth:`StreamLogic.follow`; empty otherwise)."""

    next: int
    last_slot: int
    last_release: np.ndarray
    measure: dict


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

    State key: ``stream`` (the next slot to measure, the last release, the measure's own state);
    each partial waits in a key of its own, ``stream/slot/partition``, so that a backlog of closed
    slots costs no work per message. Partials reach at most :data:`MAX_SLOTS_PENDING` slots ahead.
    """

    reads = (ReleaseRecord, PartialMessage, SupportMessage)
    state_type = DissimilarityState

    def route(self, raw, topic, partition, events):
        body, tag = unseal(raw)
        try:
            message: ReleaseRecord | InternalMessage
            if topic == RELEASES:
                message = ReleaseRecord.from_json(body)
                stream_name = message.stream
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
        return DissimilarityState(1, 0, np.zeros(self.config.known_stream(key).domain), self.logics[key].measure_state())

    def max_state_bytes(self, stream) -> int:
        """The size of the stream's state at its largest: every number at its longest, the measure's own
        state included (its arrays keep their shapes: the grouped mechanisms' partition has a number per bin)."""
        state = self.initial(stream.name)
        return len(DissimilarityState(LONGEST_INTEGER, LONGEST_INTEGER, state.last_release,
                                      at_longest(state.measure),
                                      offsets=all_offsets(self.config, (SLOTS, RELEASES))).pack())

    def apply(self, state, message, topic, partition, now, side, events):
        name = message.stream
        impossible = self._impossible(state, message, topic)
        if impossible:
            return [refuse(events, "out_of_range", topic, impossible, name)]
        if topic == RELEASES:
            if message.slot > state.last_slot:  # the next release (M2 releases slot t after M1 measured it)
                state.last_slot = message.slot
                state.last_release = np.asarray(message.release, dtype=float)
                state.measure = self.logics[name].follow(state.measure, message.slot, state.last_release)
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
        dis = cast(LocalLogic, self.logics[name]).measure_support(  # supports come from local-model streams only
            message.request, message.support, message.n, state.last_release)
        return [Out(MEASUREMENTS, DissimilarityMessage(name, message.slot, dis).encode(), name)]

    def _advance(self, state, name, side: SideKeys) -> list[Out]:
        slot = state.next
        if state.last_slot != slot - 1:
            return []
        keys = [PartialKey(name, slot, p).encode() for p in range(self.config.report_partitions)]
        partials = [partial for key in keys if (partial := side.get(key, PendingPartial)) is not None]
        if len(partials) < len(keys):
            return []
        counts = np.sum([np.asarray(partial.counts, dtype=np.int64) for partial in partials], axis=0)
        closed_at = max(partial.closed_at for partial in partials)
        ready = self.logics[name].slot_ready(slot, closed_at, counts, state.last_release, state.measure)
        for key in keys:
            side.delete(key)
        state.next = slot + 1
        return [Out(MEASUREMENTS, ready.encode(), name)]
