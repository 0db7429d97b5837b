"""M2: decision, release, ledger.

A stream's parameters and key are fixed for its lifetime
--------------------------------------------------------

**A stream's parameters and key are fixed for its lifetime.** If the configured mechanism
differs from the one in a stream's state, M2 refuses to release (dead letter `config_changed`,
and one log line per stream per minute) rather than mix two mechanisms in one ledger or
re-derive a slot's noise at another scale. Change parameters or key under a new stream name.
Every release and audit record says what it was made with: `mechanism`, `epsilon`, `window`,
and `parameters` (the domain, the population, the noise, a fingerprint of the mechanism's
other options, and a `fingerprint` of them all with the slot clock). `wevent run` shows only
releases made with the parameters and key it asked for. On a Kafka that keeps streams across
runs, before it starts a worker, it reads its stream's newest release that verifies under its
own key: made with other parameters, the run stops at once with one line naming the stream and
what differs (mechanism, epsilon, w, domain, noise, users, options, slot clock); none verifying
while the stream has releases means another key made them, and the run stops too; each line
says how to start a new stream (`--stream NAME`, or a new name in the config). A stream of the
same parameters and key is continued, and the run says so. While it runs, it watches its
stream's dead letters: `config_changed` (or a state M2 cannot read or write) stops it with that
one line instead of waiting for releases that will not come.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable

import numpy as np

from ...core import packing
from ...core.base import Mechanism, StepResult
from ..config import AppConfig, StreamConfig
from ..wire.format import DecodeError
from ..wire.keys import MechanismPartKey, ReleaseKey, StepKey, StepOutputKey
from ..wire.messages import (
    DissimilarityMessage,
    MeasuredMessage,
    ReadyMessage,
    RequestMessage,
    SupportMessage,
    decode_message,
)
from ..wire.records import ReleaseRecord
from ..wire.seals import AuthenticationError, check_seal, seal, unseal
from ..wire.topics import AUDIT, LDP_REQUESTS, MEASUREMENTS, RELEASES
from .base import (LONGEST_FLOAT, HeadState, Out, Processor, ServerKeys, SideKeys, TableValue, all_offsets,
                   at_longest, dead_letter, refuse)
from .events import Events
from .failures import ERROR_LOG_INTERVAL, Throttle
from .logic import StreamLogic

__all__ = ["RECENT_RELEASES", "PublicationState", "MechanismPart", "MechanismParts", "KeptOutputs",
           "CommittedReleases", "PublicationProcessor", "release_parameters"]

log = logging.getLogger(__name__)

RECENT_RELEASES = 8  # releases kept for identical re-emission after a crash

# The mechanism's parameters a release names on its own (epsilon, window, domain) or in
# ``parameters`` (noise, users); the others are its options.
_NAMED_PARAMETERS = ("epsilon", "window", "domain_size", "noise", "population")


def release_parameters(stream: StreamConfig, mechanism: Mechanism) -> dict[str, Any]:
    """What a stream's releases and audit records say they were made with, beyond the mechanism,
    epsilon and window they carry as fields of their own (``parameters``).

    ``fingerprint`` is the first 16 hexadecimal characters of the SHA-256 of the canonical JSON
    (keys sorted, no spaces) of the mechanism's name, its constructor parameters
    (:meth:`~wevent.core.base.Mechanism.params`: what M2 refuses to change, ``config_changed``),
    the population and the slot clock: two releases with one fingerprint were made with the same
    parameters. ``domain``, ``users`` and ``noise`` (None for a local stream) are given as they are,
    and ``options`` is the fingerprint of the mechanism's other parameters, so that a reader can
    name what differs. The lateness, deadlines and other operational settings are not included:
    they may change over a stream's life.

    Examples
    --------
    >>> from wevent.core.central import BudgetAbsorption
    >>> from wevent.stream.config import parse_config
    >>> stream = parse_config({"streams": [{"name": "s", "model": "central", "mechanism": "ba", "epsilon": 1,
    ...     "window": 5, "domain": 4, "users": 10, "slot_seconds": 60, "start": 0}]}).streams[0]
    >>> made = release_parameters(stream, BudgetAbsorption(1.0, 5, 4))
    >>> sorted(made), made["noise"], len(made["fingerprint"])
    (['domain', 'fingerprint', 'noise', 'options', 'users'], 'discrete', 16)
    >>> release_parameters(stream, BudgetAbsorption(0.5, 5, 4))["fingerprint"] != made["fingerprint"]
    True
    """
    params = json.loads(packing.to_json(mechanism.params()))
    options = {k: v for k, v in params.items() if k not in _NAMED_PARAMETERS}
    made_with = {"mechanism": mechanism.name, "parameters": params, "users": stream.users, "start": stream.start,
                 "slot_seconds": stream.slot_seconds}
    return {"fingerprint": _fingerprint(made_with), "domain": stream.domain, "users": stream.users,
            "noise": params.get("noise"), "options": _fingerprint(options)}


def _fingerprint(value) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


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


#: stream name -> the records committed transactions hold on the stream's ``releases`` partition, newest first
CommittedReleases = Callable[[str], Iterable[tuple[bytes | None, bytes]]]


class PublicationProcessor(Processor):
    """Decides and publishes (M2); holds the mechanism state and budget ledger of each stream.

    State key: ``stream`` (the mechanism, the window's charges, which outputs are kept); the
    outputs of the last :data:`RECENT_RELEASES` slots, re-emitted identically when their input is
    replayed, are keys of their own (``stream/release/slot``, ``stream/step/slot:kind:phase``), so
    that no value holds more than one slot's release.

    Under at-least-once a replayed input re-emits its slot's release, which may then be on
    ``releases`` twice, identical. Under exactly-once (:meth:`exactly_once`) a release is sent
    once. The worker's Kafka transactions do not make M2's ledger and its release one: the ledger
    reaches the changelog before the release is sent, and a transaction may commit between the
    two, so a worker that takes a stream over finds a ledger whose release may or may not have
    been committed. Re-emitting it always (at-least-once) publishes it twice when it was;
    re-emitting it never loses it when it was not. So before re-emitting, M2 asks ``releases``
    itself: the newest release of the stream that a committed transaction holds, with a valid MAC
    (a forgery must not silence a stream), read once per stream after each takeover, when the
    previous owner's transactions are settled (its producer is fenced by the new owner's before
    anything is read). A replayed slot at or below it is not sent again. From then on M2 knows
    which slots it sent itself (:meth:`taken_over` forgets that when the stream's partition
    changes hands): those are in its own transactions, which commit, or end the worker. When
    ``releases`` cannot be read, M2 re-emits, as at-least-once does: an identical duplicate
    rather than a release that never appears.
    """

    persist_before_send = True
    reads = (MeasuredMessage, ReadyMessage, DissimilarityMessage, SupportMessage)
    state_type = PublicationState

    def __init__(self, config: AppConfig, logics: dict[str, StreamLogic], keys: ServerKeys) -> None:
        super().__init__(config, logics, keys)
        self.parameters = {name: release_parameters(logic.stream, logic.new_mechanism())
                           for name, logic in logics.items()}
        self.refusals = Throttle(ERROR_LOG_INTERVAL)  # the log's lines about a stream's refused slots
        self.committed: CommittedReleases | None = None
        self._released_through: dict[str, int] = {}  # exactly-once: every release up to this slot is on releases

    def exactly_once(self, committed: CommittedReleases) -> None:
        """Send each release once: ``committed`` reads what committed transactions hold on ``releases``."""
        self.committed = committed

    def taken_over(self, streams: Iterable[str]) -> None:
        """The worker (newly) owns ``streams``: what it knew of their releases may be stale."""
        for name in streams:
            self._released_through.pop(name, None)

    def _on_releases(self, name: str, slot: int) -> bool:
        """Whether ``releases`` holds stream ``name``'s release of ``slot`` (exactly-once only)."""
        if self.committed is None:
            return False
        if name not in self._released_through:
            try:
                self._released_through[name] = self._newest_committed(name, self.committed)
            except Exception as exc:  # noqa: BLE001 - Kafka unreachable, a timeout: re-emit rather than lose it
                log.warning("stream %s: cannot read its committed releases (%s): sending slot %d's again", name,
                            exc, slot)
                return False
        return slot <= self._released_through[name]

    def _newest_committed(self, name: str, committed: CommittedReleases) -> int:
        """The slot of the newest authentic release of stream ``name`` on ``releases`` (0: none)."""
        by = self.keys.seal_of(RELEASES)
        for key, value in committed(name):
            if key != name.encode():
                continue
            body, tag = unseal(value)
            try:
                check_seal(by, RELEASES, name, body, tag)
                return ReleaseRecord.from_json(body).slot
            except (AuthenticationError, DecodeError, ValueError, TypeError):
                continue  # not a release of this stream's workers: it proves nothing
        return 0

    def _sent(self, name: str, outputs: dict[str, bytes], slot: int) -> None:
        if self.committed is not None and RELEASES in outputs:
            self._released_through[name] = max(self._released_through.get(name, 0), slot)

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
        """The largest release record of ``stream``, signed: every value, and every number, at its longest."""
        longest = -2.2250738585072014e-308
        record = ReleaseRecord(stream.name, 2**31, [longest] * stream.domain, "approximation", stream.mechanism,
                               longest, 2**31, longest, longest, longest, longest, longest, longest, longest,
                               parameters=self.parameters[stream.name])
        return len(seal(RELEASES, stream.name, record.to_bytes(), self.keys.releases))

    def max_head_bytes(self, stream) -> int:
        """The size of the stream's state once its window's charges are full, with the mechanism's state
        at its largest: every number in it at its longest (a central mechanism's arrays keep the shapes
        they start with; a local mechanism's ledger holds a number per user: its population counts here)."""
        mechanism = self.logics[stream.name].new_mechanism()
        ledger = mechanism.sliding_ledger()
        full = np.zeros((ledger.keep, ledger.columns))
        recent, steps = [2**31] * RECENT_RELEASES, [StepKey(2**31, "dissimilarity", 2).encode()] * (3 * RECENT_RELEASES)
        head = PublicationState(packing.pack(at_longest(mechanism.state_dict())), recent, steps, full, LONGEST_FLOAT,
                                offsets=all_offsets(self.config, (MEASUREMENTS,)))
        return len(head.pack())

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
            if self._on_releases(name, slot):
                return []  # exactly-once: the slot's release, and all it took, are published already
            kept_key = ReleaseKey(name, slot) if measured else StepOutputKey(name, step)
            kept = side.get(kept_key.encode(), KeptOutputs)
            if kept is None:
                return []
            self._sent(name, kept.by_topic, slot)
            return [Out(t, v, name) for t, v in kept.by_topic.items()]
        if slot != mechanism.slot + 1:
            return [dead_letter(events, "gap", topic, f"slot {slot} arrived while waiting for {mechanism.slot + 1}",
                                name)]
        changed = logic.parameters_changed(mechanism)
        if changed:
            held = self.refusals.admit(name)
            if held is not None:  # one line per stream per minute: every input of the stream is refused
                log.error("stream %s: mechanism parameters changed; slot %d not released: %s (start a new stream "
                          "under another name for new parameters)%s", name, slot, changed,
                          f"; {held} more refused since the last line" if held else "")
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
            self._sent(name, outputs, slot)
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
        record = replace(logic.record(mechanism, result, group_spend, logic.stream.slot_start(slot),
                                      logic.stream.slot_end(slot)), parameters=self.parameters[name])
        audit = replace(logic.audit(mechanism, result), parameters=self.parameters[name])
        outputs = {RELEASES: record.to_bytes(), AUDIT: audit.to_bytes()}
        state.recent = self._keep(side, [*state.recent, slot], lambda k: ReleaseKey(name, k), outputs, slot)
        events.releases.append(logic.released(mechanism, result, ledger.tightest(), now, float(state.closed_at)))
        return outputs
