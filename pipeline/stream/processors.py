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
* The offsets in the states, not the group's committed offsets, say where a restarted worker
  reads each source partition from (:meth:`Processor.resume_offset`): just past the lowest
  offset its states applied, or, for M2, at its last applied input.

Outputs are deterministic (derived randomness), so every re-emission is identical to the first.

Anyone who can write to the broker could otherwise stall or steer a stream, so every message a
worker acts on is authenticated (:class:`ServerKeys`): outputs are sealed as they leave
:meth:`Processor.process`, and each ``route`` refuses an input without a valid seal, or an
authentic-looking one no worker could have sent, before it reaches any state.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..core import state as packing
from . import metrics
from ..core.base import StepResult
from ..core.local.protocol import LocalDissimilarity
from .codecs import (
    REPORT_KEY_ENV,
    AuthenticationError,
    DeadLetter,
    DecodeError,
    Envelope,
    MacSeal,
    ReleaseRecord,
    ReportBatch,
    SignatureSeal,
    Watermark,
    check_seal,
    decode_report_message,
    internal_seal,
    report_partition,
    report_seal,
    request_seal,
    seal,
    unread_bytes,
    unseal,
)
from .config import DEVICE_KEY_ENV, AppConfig, ConfigError
from .logic import StreamLogic, logic_for

__all__ = ["Out", "ServerKeys", "Processor", "Assembler", "DissimilarityProcessor", "PublicationProcessor", "Collector",
           "Processors"]

log = logging.getLogger(__name__)

MAX_SLOTS_AHEAD = 10_000  # reports further ahead of the closed slots are rejected: it bounds the open slots
DEADLETTER_SAMPLE = 1_000  # rejected reports copied into one dead letter (central and personalized streams)


@dataclass(frozen=True)
class Out:
    """One message to send: ``value`` to ``topic`` with ``key``."""

    topic: str
    value: bytes
    key: str | None = None


def dead_letter(reason: str, topic: str, detail: str, stream: str | None = None, payload: Any = None) -> Out:
    metrics.dead_letters.labels(reason).inc()
    return Out("deadletter", DeadLetter(reason, topic, detail, stream, payload).to_bytes())


def malformed(config: AppConfig, topic: str, raw: bytes, detail: str) -> Out:
    """The dead letter of bytes that decode to no stream: their length and keyed digest, never the bytes."""
    metrics.reports_rejected.labels("", "malformed").inc()
    return dead_letter("malformed", topic, detail, payload=unread_bytes(raw, config.noise_key().derive("deadletter-digest")))


def refuse(reason: str, topic: str, detail: str, stream: str | None = None) -> Out:
    """A message refused as forged (``unauthenticated``) or impossible (``out_of_range``)."""
    metrics.forged_messages.labels(topic, reason).inc()
    log.warning("refused a message of %s (%s): %s", topic, reason, detail)
    return dead_letter(reason, topic, detail, stream)


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
        return {"slots": self.internal, "dissimilarity": self.internal, "releases": self.internal,
                "ldp.requests": self.requests, "ldp.reports": self.reports}.get(topic)

    def sealed(self, out: Out) -> Out:
        """``out`` with its topic's tag (outputs of workers are keyed by their stream)."""
        by = self.for_topic(out.topic)
        return out if by is None else Out(out.topic, seal(out.topic, out.key, out.value, by), out.key)

    def refusal(self, topic: str, stream: str, body: bytes, tag: bytes | None) -> list[Out]:
        """[] when ``tag`` is the valid seal of ``body`` on (topic, stream); else the refusal."""
        try:
            check_seal(self.for_topic(topic), topic, stream, body, tag)
        except AuthenticationError as exc:
            return [refuse("unauthenticated", topic, str(exc), stream)]
        return []


class Processor:
    """Base: route a raw message to a state key, skip replays, apply, return the new state."""

    #: M2 persists its ledger before its release leaves; the others deliver outputs before state.
    persist_before_send = False

    def __init__(self, config: AppConfig, logics: dict[str, StreamLogic], keys: ServerKeys) -> None:
        self.config = config
        self.logics = logics
        self.keys = keys

    def route(self, raw: bytes, topic: str, partition: int) -> tuple[str | None, Any, list[Out]]:
        """Decode ``raw``: (state key or None, decoded message, outputs such as dead letters)."""
        raise NotImplementedError

    def initial(self, key: str) -> dict:
        raise NotImplementedError

    def apply(self, state: dict, message: Any, topic: str, partition: int, now: float) -> list[Out]:
        raise NotImplementedError

    def process(self, raw: bytes, topic: str, partition: int, offset: int,
                load: Callable[[str], bytes | None], now: float) -> tuple[list[Out], dict[str, bytes]]:
        """One input message: returns (sealed outputs, {state key: packed new state})."""
        key, message, outputs = self.route(raw, topic, partition)
        if key is None:
            return outputs, {}
        stored = load(key)
        state = packing.unpack(stored) if stored else self.initial(key)
        mark = f"{topic}:{partition}"
        if not self.persist_before_send and state["offsets"].get(mark, -1) >= offset:
            return [], {}  # applied before a crash, and its outputs were delivered before that
        # M2 applies a replayed input again (re-emitting what it caused), so it only records it
        state["offsets"][mark] = max(int(offset), state["offsets"].get(mark, -1))
        outputs += self.apply(state, message, topic, partition, now)
        return [self.keys.sealed(out) for out in outputs], {key: packing.pack(state)}

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
        mark = f"{topic}:{partition}"
        applied = [packing.unpack(stored)["offsets"].get(mark, -1) if (stored := load(key)) else -1 for key in keys]
        return max(min(applied) + (0 if self.persist_before_send else 1), 0)


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
    if seen.dtype == np.uint8:
        np.bitwise_or.at(seen, users >> 3, (128 >> (users & 7)).astype(np.uint8))
        return seen
    return np.union1d(seen, users)


class Assembler(Processor):
    """Validates reports, keeps one report per user per slot, and closes slots on watermarks.

    State key: ``stream/partition`` (the assembler of a stream runs on every ``reports`` partition).
    It counts only the users its partition owns (:func:`~pipeline.stream.codecs.report_partition`),
    so that no user is counted twice in a slot across partitions. A slot closes when the
    partition's watermark passes its end plus the allowed lateness; the assembler then emits the
    slot's partial histogram (zeros if nothing arrived) to ``slots``. A watermark that would close
    more than ``max_watermark_jump_slots`` slots at once is refused and leaves the clock where it was.
    """

    def route(self, raw, topic, partition):
        try:
            message = decode_report_message(raw)
        except DecodeError as exc:
            return None, None, [malformed(self.config, topic, raw, str(exc))]
        stream = self.config.stream(message.stream)
        if stream is None:
            n = 1 if isinstance(message, Watermark) else int(message.users.size)
            metrics.reports_rejected.labels("", "unknown_stream").inc(n)
            return None, None, [dead_letter("unknown_stream", topic, f"no stream named {message.stream!r}", message.stream)]
        return f"{stream.name}/{partition}", message, []

    def initial(self, key):
        return {"offsets": {}, "watermark": float("-inf"), "closed": 0, "open": {}}

    def state_keys(self, topic, partition, key_partition):
        return [f"{s.name}/{partition}" for s in self.config.streams] if topic == "reports" else []

    def apply(self, state, message, topic, partition, now):
        stream = self.config.stream(message.stream)
        if isinstance(message, Watermark):
            return self._advance(state, stream, message.time, partition, now)
        if stream.model == "local":  # raw values must never reach the server: refuse, copy nothing
            metrics.reports_rejected.labels(stream.name, "raw_value_for_local_stream").inc(message.users.size)
            return [dead_letter("raw_value_for_local_stream", topic, f"{message.users.size} raw report(s) for local-model "
                                f"stream {stream.name!r} dropped unread: devices answer ldp.requests instead", stream.name)]
        return self._accept(state, stream, message, topic, partition)

    def _accept(self, state, stream, batch: ReportBatch, topic, partition: int) -> list[Out]:
        logic = self.logics[stream.name]
        users, values = batch.users, batch.values
        slots = stream.slot_of_ms(batch.times_ms)
        reason = np.zeros(users.size, dtype=np.int8)  # 0 = accepted, else 1 + index in REJECT_REASONS
        failed = ((users < 0) | (users >= stream.users), (values < 0) | (values >= stream.domain), slots <= 0,
                  slots <= state["closed"], slots > state["closed"] + MAX_SLOTS_AHEAD,
                  report_partition(users, self.config.report_partitions) != partition)
        for code, fails in enumerate(failed, start=1):
            reason[(reason == 0) & fails] = code
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
        limit = stream.max_watermark_jump_slots
        if through - state["closed"] > limit:
            metrics.reports_rejected.labels(stream.name, "watermark_too_far_ahead").inc()
            return [dead_letter("watermark_too_far_ahead", "reports",
                                f"watermark {time:.3f} on partition {partition} would close slots {state['closed'] + 1}.."
                                f"{through} at once; at most {limit} (max_watermark_jump_slots)", stream.name)]
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
        body, tag = unseal(raw)
        try:
            if topic == "releases":
                record = ReleaseRecord.from_json(body)
                stream_name, message = record.stream, record
            else:
                message = Envelope.decode(body)
                stream_name = message["stream"]
        except (DecodeError, json.JSONDecodeError, UnicodeDecodeError, TypeError, KeyError) as exc:
            return None, None, [dead_letter("malformed", topic, str(exc))]
        if stream_name not in self.logics:
            return None, None, [dead_letter("unknown_stream", topic, f"no stream named {stream_name!r}", stream_name)]
        refused = self.keys.refusal(topic, stream_name, body, tag)
        return (None, None, refused) if refused else (stream_name, message, [])

    def state_keys(self, topic, partition, key_partition):
        return [s.name for s in self.config.streams if key_partition(s.name) == partition]

    def initial(self, key):
        stream = self.config.stream(key)
        return {"offsets": {}, "next": 1, "last_slot": 0, "last_release": np.zeros(stream.domain),
                "partials": {}, "closed_at": {}}

    def apply(self, state, message, topic, partition, now):
        name = message.stream if topic == "releases" else message["stream"]
        impossible = self._impossible(state, message, topic)
        if impossible:
            return [refuse("out_of_range", topic, impossible, name)]
        if topic == "releases":
            if message.slot > state["last_slot"]:
                state["last_slot"] = message.slot
                state["last_release"] = np.asarray(message.release, dtype=float)
        elif message.kind == "support":  # local model: the phase-1 reports of the open slot
            return self._measure_support(state, name, message)
        else:
            slot = int(message["slot"])
            if slot >= state["next"]:
                key = str(slot)
                state["partials"].setdefault(key, {})[str(message["partition"])] = message["counts"]
                state["closed_at"][key] = max(state["closed_at"].get(key, 0.0), float(message["closed_at"]))
        return self._advance(state, name)

    def _impossible(self, state, message, topic) -> str | None:
        """Why an authentic-looking message cannot come from a worker (None if it can)."""
        if topic == "releases":  # M2 releases slot t only after M1 measured it, and M1 then moved on
            if not 1 <= message.slot < state["next"]:
                return f"release of slot {message.slot} while slots 1..{state['next'] - 1} were measured"
        elif message.kind == "partial":
            slot, partition = int(message["slot"]), int(message["partition"])
            if not 1 <= slot <= state["next"] + MAX_SLOTS_AHEAD or not 0 <= partition < self.config.report_partitions:
                return f"partial of slot {slot} from partition {partition} while slot {state['next']} is open"
        return None

    def _measure_support(self, state, name, message) -> list[Out]:
        slot = int(message["slot"])
        if slot != state["last_slot"] + 1:  # measured against release slot-1 only
            return []
        dis = self.logics[name].measure_support(message["request"], message["support"], message["n"],
                                                state["last_release"])
        return [Out("dissimilarity", Envelope("dissimilarity", {"stream": name, "slot": slot, "dis": dis}).encode(), name)]

    def _advance(self, state, name) -> list[Out]:
        slot = state["next"]
        key = str(slot)
        partials = state["partials"].get(key, {})
        if len(partials) < self.config.report_partitions or state["last_slot"] != slot - 1:
            return []
        counts = sum(np.asarray(c, dtype=np.int64) for c in partials.values())
        kind, fields = self.logics[name].slot_ready(slot, counts, state["last_release"])
        envelope = Envelope(kind, {"stream": name, "slot": slot, "closed_at": state["closed_at"].pop(key), **fields})
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

    def state_keys(self, topic, partition, key_partition):
        return [s.name for s in self.config.streams if key_partition(s.name) == partition]

    def route(self, raw, topic, partition):
        body, tag = unseal(raw)
        try:
            message = Envelope.decode(body)
            name = message["stream"]
        except (DecodeError, KeyError) as exc:
            return None, None, [dead_letter("malformed", topic, str(exc))]
        if name not in self.logics:
            return None, None, [dead_letter("unknown_stream", topic, f"no stream named {name!r}", name)]
        refused = self.keys.refusal(topic, name, body, tag)
        return (None, None, refused) if refused else (name, message, [])

    def initial(self, key):
        logic = self.logics[key]
        return {"offsets": {}, "mechanism": logic.new_mechanism().to_bytes(), "recent": {}, "steps": {},
                "spend": np.zeros((0, logic.charge_columns)), "closed_at": 0.0}

    def apply(self, state, message, topic, partition, now):
        name = message["stream"]
        logic = self.logics[name]
        mechanism = logic.restore(state["mechanism"])
        slot = int(message["slot"])
        step = f"{slot}:{message.kind}:{message.get('phase', 0)}"
        if slot <= mechanism.slot or step in state["steps"]:  # a replayed input: re-emit what it caused
            kept = state["recent"].get(str(slot)) if message.kind == "measured" else state["steps"].get(step)
            return [Out(t, v, name) for t, v in kept.items()] if kept else []
        if slot != mechanism.slot + 1:
            return [dead_letter("gap", topic, f"slot {slot} arrived while waiting for {mechanism.slot + 1}", name)]
        changed = logic.parameters_changed(mechanism)
        if changed:
            log.error("stream %s: mechanism parameters changed; slot %d not released: %s", name, slot, changed)
            return [dead_letter("config_changed", topic, f"slot {slot} not released: {changed}", name)]
        if message.kind == "measured":  # central and personalized: one step per slot
            outcome = logic.publish(mechanism, message["counts"], message.fields)
            state["closed_at"] = float(message["closed_at"])
        else:
            outcome = self._local_step(state, mechanism, message)
            if outcome is None:
                return []
        if isinstance(outcome, StepResult):
            outputs = self._release(state, logic, mechanism, outcome, now)
        else:  # the local model asks the devices: a request for this slot's next phase
            outputs = {"ldp.requests": Envelope("request", {"stream": name, **outcome.to_dict()}).encode()}
        state["mechanism"] = mechanism.to_bytes()
        if message.kind != "measured":
            state["steps"][step] = outputs
            for old in [k for k in state["steps"] if int(k.split(":")[0]) <= slot - RECENT_RELEASES]:
                del state["steps"][old]
        return [Out(t, v, name) for t, v in outputs.items()]

    @staticmethod
    def _local_step(state, mechanism, message):
        """Advance a local mechanism's protocol by the message it waits for (None for anything else)."""
        expected = {"ready": "open_slot", "dissimilarity": "measure", "support": "publish"}[message.kind]
        if mechanism.expecting != expected:
            return None
        if message.kind == "ready":
            state["closed_at"] = float(message["closed_at"])
            request = mechanism.open_slot()
            return request if request is not None else mechanism.decide()
        if message.kind == "dissimilarity":
            return mechanism.decide(LocalDissimilarity(*message["dis"]))
        return mechanism.publish(message["support"], message["n"])

    def _release(self, state, logic, mechanism, result: StepResult, now: float) -> dict[str, bytes]:
        """The release and audit record of a finished slot; keeps the window accounting and metrics."""
        name, slot = logic.stream.name, result.slot
        # The charges of the slots of the longest window, and every group's spend over its own.
        history = np.vstack([np.asarray(state["spend"], dtype=float).reshape(-1, logic.charge_columns),
                             logic.charges(result)[None, :]])[-int(logic.group_windows.max()):]
        group_spend = logic.window_spend(history)
        record = logic.record(mechanism, result, group_spend, logic.stream.slot_start(slot), logic.stream.slot_end(slot))
        audit = logic.audit(mechanism, result)
        state["spend"] = history[1:] if len(history) == logic.group_windows.max() else history
        outputs = {"releases": record.to_bytes(), "audit": audit.to_bytes()}
        state["recent"][str(slot)] = outputs
        for old in [k for k in state["recent"] if int(k) <= slot - RECENT_RELEASES]:
            del state["recent"][old]
        tightest = int(np.argmax(group_spend / logic.group_epsilons))  # the group closest to its budget
        metrics.releases.labels(name, result.strategy.value).inc()
        metrics.last_released_slot.labels(name).set(slot)
        metrics.release_time.labels(name).set(now)
        metrics.window_spent.labels(name).set(group_spend[tightest])
        metrics.window_budget.labels(name).set(logic.group_epsilons[tightest])
        metrics.slot_close_latency.labels(name).observe(max(0.0, now - float(state["closed_at"])))
        logic.observe(mechanism, result)
        return outputs


# ---------------------------------------------------------------------------------------------
# Collector (local model): perturbed reports -> the oracle's support, per (slot, phase)
# ---------------------------------------------------------------------------------------------
CLOSED_ROUNDS_KEPT = 16  # closed rounds remembered, so that a late report is told apart from an unrequested one


def valid_reports(request: dict, reports: np.ndarray, n: int) -> np.ndarray:
    """Which of ``n`` reports the request's oracle could have produced (shape and range)."""
    d, oracle = int(request["domain_size"]), request["oracle"]
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
    e = np.exp(float(request["epsilon"]))
    return np.isfinite(reports) & (np.abs(reports) <= (e + 1) / (e - 1) * (1 + 1e-12))


class Collector(Processor):
    """Sums the perturbed reports of each (slot, phase) round into the oracle's support.

    Reads ``ldp.requests`` (M2's requests: which users are asked) and ``ldp.reports`` (the devices'
    answers, and ticks). A round closes when every asked user answered or its deadline passed
    (the users who did not answer are counted); its support goes to M1 (phase 1, on ``slots``) or
    M2 (phase 2, on ``dissimilarity``). A report from a user who was not asked, a second report, a
    report for a closed round, or one no oracle could produce is counted and dead-lettered.
    """

    def route(self, raw, topic, partition):
        body, tag = unseal(raw)
        try:
            message = Envelope.decode(body)
            name = message["stream"]
        except (DecodeError, KeyError) as exc:
            return None, None, [malformed(self.config, topic, raw, str(exc))]
        except ValueError:  # the codec failed deeper (text, array buffers); its message may quote the bytes
            return None, None, [malformed(self.config, topic, raw, "malformed internal message")]
        stream = self.config.stream(name)
        if stream is None or stream.model != "local":
            metrics.reports_rejected.labels("", "unknown_stream").inc()
            return None, None, [dead_letter("unknown_stream", topic, f"no local-model stream named {name!r}", name)]
        if message.kind == "tick":  # carries nothing but "look at the clock": the worker's own clock
            return name, message, []
        refused = self.keys.refusal(topic, name, body, tag)
        if refused and topic == "ldp.reports":
            metrics.reports_rejected.labels(name, "unauthenticated").inc(np.size(message.get("users", ())))
        return (None, None, refused) if refused else (name, message, [])

    def initial(self, key):
        return {"offsets": {}, "rounds": {}, "closed": [], "early": {}}

    def state_keys(self, topic, partition, key_partition):
        return [s.name for s in self.config.streams if s.model == "local" and key_partition(s.name) == partition]

    def apply(self, state, message, topic, partition, now):
        name = message["stream"]
        outputs = []
        if message.kind == "request":
            key = f"{message['slot']}:{message['phase']}"
            if key not in state["rounds"] and key not in state["closed"]:
                request = {k: v for k, v in message.fields.items() if k != "stream"}
                size = request["population"] if request["users"] is None else len(request["users"])
                state["rounds"][key] = {"request": request, "asked": size, "answered": np.zeros(0, dtype=np.int64),
                                        "support": None, "n": 0,
                                        "deadline": now + self.logics[name].deadline_seconds}
                for early in state["early"].pop(key, []):  # reports that overtook their request
                    outputs += self._accept(state, name, early, topic)
        elif message.kind == "reports":
            outputs += self._accept(state, name, message.fields, topic, now)
        return outputs + self._close_due(state, name, now) + self._expire_early(state, name, now, topic)

    def _accept(self, state, name, fields: dict, topic, now: float | None = None) -> list[Out]:
        key = f"{fields['slot']}:{fields['phase']}"
        users = np.asarray(fields["users"], dtype=np.int64)
        round_ = state["rounds"].get(key)
        if round_ is None:
            if key in state["closed"]:
                return self._reject(name, "late", topic, users, f"round {key} is closed")
            # The two topics are read without order between them: a device's reports may arrive
            # before the request they answer. They wait for it, then count, or expire as unrequested.
            state["early"].setdefault(key, []).append({**fields, "received": now})
            return []
        from ..core.local import Request

        request = Request.from_dict(round_["request"])
        if users.size != len(fields["reports"]):
            return self._reject(name, "malformed", topic, users, "users and reports differ in number")
        ok = valid_reports(round_["request"], fields["reports"], users.size)
        asked = request.asks(users)
        first = np.zeros(users.size, dtype=bool)
        first[np.unique(users, return_index=True)[1]] = True
        fresh = first & ~seen_contains(round_["answered"], users)
        outputs = []
        for mask, reason in ((~ok, "out_of_domain"), (ok & ~asked, "unrequested"), (ok & asked & ~fresh, "duplicate")):
            if mask.any():
                outputs += self._reject(name, reason, topic, users[mask], f"round {key}")
        keep = ok & asked & fresh
        if keep.any():
            support = request.make_oracle().support(np.asarray(fields["reports"])[keep])
            round_["support"] = support if round_["support"] is None else round_["support"] + support
            round_["answered"] = seen_add(round_["answered"], users[keep], request.population)
            round_["n"] += int(keep.sum())
            metrics.reports_accepted.labels(name).inc(int(keep.sum()))
        return outputs

    def _expire_early(self, state, name, now: float, topic) -> list[Out]:
        """Reports that waited a whole deadline for a request that never came were not requested."""
        outputs = []
        grace = self.logics[name].deadline_seconds
        for key in list(state["early"]):
            waiting = [e for e in state["early"][key] if e["received"] + grace > now]
            for expired in (e for e in state["early"][key] if e["received"] + grace <= now):
                outputs += self._reject(name, "unrequested", topic, np.asarray(expired["users"], dtype=np.int64),
                                        f"no request for round {key} within {grace:g} s")
            if waiting:
                state["early"][key] = waiting
            else:
                del state["early"][key]
        return outputs

    @staticmethod
    def _reject(name, reason, topic, users, detail) -> list[Out]:
        metrics.reports_rejected.labels(name, reason).inc(users.size)
        return [dead_letter(reason, topic, f"{users.size} report(s) rejected: {detail}", name,
                            {"count": int(users.size), "users": users[:DEADLETTER_SAMPLE].tolist()})]

    def _close_due(self, state, name, now: float, only: str | None = None) -> list[Out]:
        outputs = []
        for key in sorted(k for k in state["rounds"] if only is None or k == only):
            round_ = state["rounds"][key]
            if round_["n"] < round_["asked"] and now < round_["deadline"]:
                continue
            del state["rounds"][key]
            state["closed"] = [*state["closed"], key][-CLOSED_ROUNDS_KEPT:]
            missing = round_["asked"] - round_["n"]
            if missing:
                metrics.ldp_missing_reports.labels(name).inc(missing)
            request = round_["request"]
            support = round_["support"] if round_["support"] is not None else np.zeros(
                1 if request["oracle"] == "hm" else request["domain_size"])
            slot, phase = (int(x) for x in key.split(":"))
            envelope = Envelope("support", {"stream": name, "slot": slot, "phase": phase, "support": support,
                                            "n": round_["n"], "missing": missing, "request": request})
            outputs.append(Out("slots" if phase == 1 else "dissimilarity", envelope.encode(), name))
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
        return cls(*(kind(config, logics, keys) for kind in (Assembler, DissimilarityProcessor, PublicationProcessor,
                                                              Collector)))
