"""The stream processors of ARCHITECTURE.md §3 as plain classes, independent of Faust.

Each processor turns (its state for a key, one input message) into a new state and a list of
output messages. The Faust agents in ``topologies/`` only load and store the state in a table and
send the outputs; the logic here is unit-testable without a broker.

Exactly-once effect on state over an at-least-once transport:

* The assembler and M1 record in their state the offset of the last input they applied per
  (topic, partition) and skip an input at or below it. Their agents deliver the outputs of an
  input *before* writing the new state, so a crash leaves either the old state (the input is
  replayed and its outputs re-sent) or the new one (whose outputs were already delivered).
* M2 writes its ledger *before* its release leaves, as the architecture requires, so it cannot
  skip by offset (a replayed input would then never be released). It is idempotent by slot
  instead: an input for a slot already released re-emits the stored release.

Outputs are deterministic (derived randomness), so every re-emission is identical to the first.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..core import state as packing
from . import metrics
from .codecs import (
    DeadLetter,
    DecodeError,
    Envelope,
    ReleaseRecord,
    ReportBatch,
    Watermark,
    decode_report_message,
)
from .config import AppConfig
from .logic import StreamLogic, logic_for

__all__ = ["Out", "Processor", "Assembler", "DissimilarityProcessor", "PublicationProcessor", "Processors"]

log = logging.getLogger(__name__)

MAX_SLOTS_AHEAD = 10_000  # reports or watermarks further ahead of the closed slots are rejected
DEADLETTER_SAMPLE = 1_000  # rejected reports copied into one dead letter


@dataclass(frozen=True)
class Out:
    """One message to send: ``value`` to ``topic`` with ``key``."""

    topic: str
    value: bytes
    key: str | None = None


def dead_letter(reason: str, topic: str, detail: str, stream: str | None = None, payload: Any = None) -> Out:
    metrics.dead_letters.labels(reason).inc()
    return Out("deadletter", DeadLetter(reason, topic, detail, stream, payload).to_bytes())


class Processor:
    """Base: route a raw message to a state key, skip replays, apply, return the new state."""

    #: M2 persists its ledger before its release leaves; the others deliver outputs before state.
    persist_before_send = False

    def __init__(self, config: AppConfig, logics: dict[str, StreamLogic]) -> None:
        self.config = config
        self.logics = logics

    def route(self, raw: bytes, topic: str, partition: int) -> tuple[str | None, Any, list[Out]]:
        """Decode ``raw``: (state key or None, decoded message, outputs such as dead letters)."""
        raise NotImplementedError

    def initial(self, key: str) -> dict:
        raise NotImplementedError

    def apply(self, state: dict, message: Any, topic: str, partition: int, now: float) -> list[Out]:
        raise NotImplementedError

    def process(self, raw: bytes, topic: str, partition: int, offset: int,
                load: Callable[[str], bytes | None], now: float) -> tuple[list[Out], dict[str, bytes]]:
        """One input message: returns (outputs, {state key: packed new state})."""
        key, message, outputs = self.route(raw, topic, partition)
        if key is None:
            return outputs, {}
        stored = load(key)
        state = packing.unpack(stored) if stored else self.initial(key)
        mark = f"{topic}:{partition}"
        if not self.persist_before_send:
            if state["offsets"].get(mark, -1) >= offset:
                return [], {}  # applied before a crash, and its outputs were delivered before that
            state["offsets"][mark] = int(offset)
        outputs += self.apply(state, message, topic, partition, now)
        return outputs, {key: packing.pack(state)}


# ---------------------------------------------------------------------------------------------
# Assembler: reports -> per-partition slot partials
# ---------------------------------------------------------------------------------------------
REJECT_REASONS = ("unknown_user", "out_of_domain", "before_start", "late", "too_far_ahead", "duplicate")


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
    if seen.dtype == np.uint8:
        np.bitwise_or.at(seen, users >> 3, (128 >> (users & 7)).astype(np.uint8))
        return seen
    return np.union1d(seen, users)


class Assembler(Processor):
    """Validates reports, keeps one report per user per slot, and closes slots on watermarks.

    State key: ``stream/partition`` (the assembler of a stream runs on every ``reports`` partition).
    A slot closes when the partition's watermark passes its end plus the allowed lateness; the
    assembler then emits the slot's partial histogram (zeros if nothing arrived) to ``slots``.
    """

    def route(self, raw, topic, partition):
        try:
            message = decode_report_message(raw)
        except DecodeError as exc:
            metrics.reports_rejected.labels("", "malformed").inc()
            return None, None, [dead_letter("malformed", topic, str(exc), payload=raw[:4096].hex())]
        stream = self.config.stream(message.stream)
        if stream is None:
            n = 1 if isinstance(message, Watermark) else int(message.users.size)
            metrics.reports_rejected.labels("", "unknown_stream").inc(n)
            return None, None, [dead_letter("unknown_stream", topic, f"no stream named {message.stream!r}", message.stream)]
        return f"{stream.name}/{partition}", message, []

    def initial(self, key):
        return {"offsets": {}, "watermark": float("-inf"), "closed": 0, "open": {}}

    def apply(self, state, message, topic, partition, now):
        stream = self.config.stream(message.stream)
        if isinstance(message, Watermark):
            return self._advance(state, stream, message.time, partition, now)
        return self._accept(state, stream, message, topic)

    def _accept(self, state, stream, batch: ReportBatch, topic) -> list[Out]:
        logic = self.logics[stream.name]
        users, values = batch.users, batch.values
        slots = stream.slot_of_ms(batch.times_ms)
        reason = np.zeros(users.size, dtype=np.int8)  # 0 = accepted, else 1 + index in REJECT_REASONS
        reason[(users < 0) | (users >= stream.users)] = 1
        reason[(reason == 0) & ((values < 0) | (values >= stream.domain))] = 2
        reason[(reason == 0) & (slots <= 0)] = 3
        reason[(reason == 0) & (slots <= state["closed"])] = 4
        reason[(reason == 0) & (slots > state["closed"] + MAX_SLOTS_AHEAD)] = 5
        groups = logic.group_of_users()
        for slot in np.unique(slots[reason == 0]):
            idx = np.flatnonzero((reason == 0) & (slots == slot))
            entry = state["open"].setdefault(str(int(slot)), self._empty_slot(stream, logic))
            idx = self._drop_duplicates(idx, users, entry["seen"], reason)
            u = users[idx]
            entry["seen"] = seen_add(entry["seen"], u, stream.users)
            rows = groups[u] if groups is not None else np.zeros(u.size, dtype=np.int64)
            flat = np.bincount(rows * stream.domain + values[idx], minlength=entry["counts"].size)
            entry["counts"] += flat.reshape(entry["counts"].shape)
        accepted = int(np.count_nonzero(reason == 0))
        metrics.reports_accepted.labels(stream.name).inc(accepted)
        outputs = []
        for code, name in enumerate(REJECT_REASONS, start=1):
            rejected = np.flatnonzero(reason == code)
            if rejected.size:
                metrics.reports_rejected.labels(stream.name, name).inc(rejected.size)
                sample = rejected[:DEADLETTER_SAMPLE]
                payload = {"count": int(rejected.size), "users": users[sample].tolist(),
                           "values": values[sample].tolist(), "times_ms": batch.times_ms[sample].tolist()}
                outputs.append(dead_letter(name, topic, f"{rejected.size} report(s) rejected: {name}", stream.name, payload))
        return outputs

    @staticmethod
    def _drop_duplicates(idx: np.ndarray, users: np.ndarray, seen: np.ndarray, reason: np.ndarray) -> np.ndarray:
        """Keep the first report of each user not already seen in this slot; mark the rest duplicate."""
        u = users[idx]
        already = seen_contains(seen, u)
        _, first = np.unique(u, return_index=True)
        keep = np.zeros(idx.size, dtype=bool)
        keep[first] = True
        keep &= ~already
        reason[idx[~keep]] = 1 + REJECT_REASONS.index("duplicate")
        return idx[keep]

    @staticmethod
    def _empty_slot(stream, logic) -> dict:
        return {"counts": np.zeros((logic.groups, stream.domain), dtype=np.int64), "seen": np.zeros(0, dtype=np.int64)}

    def _advance(self, state, stream, time: float, partition: int, now: float) -> list[Out]:
        if time <= state["watermark"]:
            return []
        through = stream.closable_through(time)
        if through - state["closed"] > MAX_SLOTS_AHEAD:
            return [dead_letter("too_far_ahead", "reports", f"watermark {time} is {through - state['closed']} slots ahead",
                                stream.name)]
        state["watermark"] = float(time)
        logic = self.logics[stream.name]
        outputs = []
        for slot in range(state["closed"] + 1, through + 1):
            entry = state["open"].pop(str(slot), None) or self._empty_slot(stream, logic)
            partial = Envelope("partial", {"stream": stream.name, "slot": slot, "partition": partition,
                                           "counts": entry["counts"], "closed_at": now})
            outputs.append(Out("slots", partial.encode(), stream.name))
            metrics.slots_closed.labels(stream.name).inc()
        state["closed"] = max(state["closed"], through)
        return outputs


# ---------------------------------------------------------------------------------------------
# M1: partials + last release -> private dissimilarity
# ---------------------------------------------------------------------------------------------
class DissimilarityProcessor(Processor):
    """Merges the partials of a slot and computes its private dissimilarity (M1).

    Reads ``slots`` (partials) and ``releases`` (to learn the last release). Slot t is measured
    only when every assembler partition closed it and release t-1 is known, so that the
    dissimilarity is computed against exactly the release M2 published.
    """

    def route(self, raw, topic, partition):
        try:
            if topic == "releases":
                record = ReleaseRecord.from_json(raw)
                stream_name, message = record.stream, record
            else:
                message = Envelope.decode(raw)
                stream_name = message["stream"]
        except (DecodeError, json.JSONDecodeError, TypeError, KeyError) as exc:
            return None, None, [dead_letter("malformed", topic, str(exc))]
        if stream_name not in self.logics:
            return None, None, [dead_letter("unknown_stream", topic, f"no stream named {stream_name!r}", stream_name)]
        return stream_name, message, []

    def initial(self, key):
        stream = self.config.stream(key)
        return {"offsets": {}, "next": 1, "last_slot": 0, "last_release": np.zeros(stream.domain),
                "partials": {}, "closed_at": {}}

    def apply(self, state, message, topic, partition, now):
        name = message.stream if topic == "releases" else message["stream"]
        if topic == "releases":
            if message.slot > state["last_slot"]:
                state["last_slot"] = message.slot
                state["last_release"] = np.asarray(message.release, dtype=float)
        else:
            slot = int(message["slot"])
            if slot >= state["next"]:
                key = str(slot)
                state["partials"].setdefault(key, {})[str(message["partition"])] = message["counts"]
                state["closed_at"][key] = max(state["closed_at"].get(key, 0.0), float(message["closed_at"]))
        return self._advance(state, name)

    def _advance(self, state, name) -> list[Out]:
        slot = state["next"]
        key = str(slot)
        partials = state["partials"].get(key, {})
        if len(partials) < self.config.report_partitions or state["last_slot"] != slot - 1:
            return []
        counts = sum(np.asarray(c, dtype=np.int64) for c in partials.values())
        measured = self.logics[name].measure(slot, counts, state["last_release"])
        envelope = Envelope("measured", {"stream": name, "slot": slot, "counts": counts,
                                         "closed_at": state["closed_at"].pop(key), **measured})
        del state["partials"][key]
        state["next"] = slot + 1
        return [Out("dissimilarity", envelope.encode(), name)]


# ---------------------------------------------------------------------------------------------
# M2: decision, release, ledger
# ---------------------------------------------------------------------------------------------
RECENT_RELEASES = 8  # releases kept for identical re-emission after a crash


class PublicationProcessor(Processor):
    """Decides and publishes (M2); holds the mechanism state and budget ledger of each stream."""

    persist_before_send = True

    def route(self, raw, topic, partition):
        try:
            message = Envelope.decode(raw)
            name = message["stream"]
        except (DecodeError, KeyError) as exc:
            return None, None, [dead_letter("malformed", topic, str(exc))]
        if name not in self.logics:
            return None, None, [dead_letter("unknown_stream", topic, f"no stream named {name!r}", name)]
        return name, message, []

    def initial(self, key):
        logic = self.logics[key]
        return {"offsets": {}, "mechanism": logic.new_mechanism().to_bytes(), "recent": {},
                "spend": np.zeros((0, logic.groups))}

    def apply(self, state, message, topic, partition, now):
        name = message["stream"]
        logic = self.logics[name]
        stream = logic.stream
        mechanism = logic.restore(state["mechanism"])
        slot = int(message["slot"])
        if slot <= mechanism.slot:  # a replayed input: re-emit exactly what was released then
            kept = state["recent"].get(str(slot))
            return [Out(t, v.encode(), name) for t, v in kept.items()] if kept else []
        if slot != mechanism.slot + 1:
            return [dead_letter("gap", topic, f"slot {slot} arrived while waiting for {mechanism.slot + 1}", name)]
        changed = logic.parameters_changed(mechanism)
        if changed:
            log.error("stream %s: mechanism parameters changed; slot %d not released: %s", name, slot, changed)
            return [dead_letter("config_changed", topic, f"slot {slot} not released: {changed}", name)]
        result = logic.publish(mechanism, message["counts"], message.fields)
        # Every group's charges over the slots of its own window (the largest window is kept).
        history = np.vstack([np.asarray(state["spend"], dtype=float).reshape(-1, logic.groups),
                             logic.charges(result)[None, :]])[-int(logic.group_windows.max()):]
        group_spend = np.array([history[-w:, k].sum() for k, w in enumerate(logic.group_windows)])
        record = logic.record(mechanism, result, group_spend, stream.slot_start(slot), stream.slot_end(slot))
        audit = logic.audit(mechanism, result)
        state["mechanism"] = mechanism.to_bytes()
        state["spend"] = history[1:] if len(history) == logic.group_windows.max() else history
        state["recent"][str(slot)] = {"releases": record.to_json(), "audit": audit.to_json()}
        for old in [k for k in state["recent"] if int(k) <= slot - RECENT_RELEASES]:
            del state["recent"][old]
        tightest = int(np.argmax(group_spend / logic.group_epsilons))  # the group closest to its budget
        metrics.releases.labels(name, result.strategy.value).inc()
        metrics.last_released_slot.labels(name).set(slot)
        metrics.release_time.labels(name).set(now)
        metrics.window_spent.labels(name).set(group_spend[tightest])
        metrics.window_budget.labels(name).set(logic.group_epsilons[tightest])
        metrics.slot_close_latency.labels(name).observe(max(0.0, now - float(message["closed_at"])))
        return [Out("releases", record.to_bytes(), name), Out("audit", audit.to_bytes(), name)]


@dataclass
class Processors:
    assembler: Assembler
    dissimilarity: DissimilarityProcessor
    publication: PublicationProcessor

    @classmethod
    def build(cls, config: AppConfig) -> "Processors":
        logics = {s.name: logic_for(config, s) for s in config.streams}
        return cls(Assembler(config, logics), DissimilarityProcessor(config, logics), PublicationProcessor(config, logics))
