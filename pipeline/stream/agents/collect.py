"""The collector (local model): perturbed reports -> the oracle's support, per (slot, phase)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np

from ...core.local.protocol import Request
from ..wire.format import DecodeError
from ..wire.keys import EarlyReportsKey, MalformedKey, RoundKey, RoundRequestKey
from ..wire.messages import ReportsMessage, RequestMessage, SupportMessage, TickMessage, decode_message
from ..wire.seals import unseal
from ..wire.topics import LDP_REPORTS, MEASUREMENTS, SLOTS
from .base import DEADLETTER_SAMPLE, HeadState, Out, Processor, SideKeys, TableValue, dead_letter, malformed
from .events import Events
from .local import LocalLogic
from .seen import seen_add, seen_contains

__all__ = ["CLOSED_ROUNDS_KEPT", "MAX_EARLY_MESSAGES", "asked_positions", "Round", "RoundRequest", "CollectorState",
           "request_key", "round_request", "Collector"]

CLOSED_ROUNDS_KEPT = 16  # closed rounds remembered, so that a late report is told apart from an unrequested one

MAX_EARLY_MESSAGES = 256
"""Report messages a collector holds for requests it has not read yet. A device answers only
after it read the request, so honest early reports are those of the request the collector is
about to read: one round's messages. Each waits in a key of its own; more are refused as
``unrequested`` rather than held."""


def asked_positions(request: Request, users: np.ndarray) -> np.ndarray:
    """Each user's position among the users ``request`` asks (meaningless for a user not asked).

    A round keeps who answered as a set of positions: a bit per asked user at most, where a set of
    ids could take a bit per user of the population (1.25 MB at ten million users, over the bound
    of a table value, rewritten with every message of reports)."""
    if request.users is None:
        return users
    return np.minimum(np.searchsorted(request.users, users), max(request.size - 1, 0))


@dataclass(eq=False)
class Round(TableValue):
    """A collector's open round: how many users its request asks, who of them answered, the sum of
    their reports' support, and until when it waits."""

    asked: int
    answered_at: np.ndarray  # positions among the asked users (:func:`asked_positions`, :func:`seen_add`)
    support: np.ndarray | None  # None until a report counts
    n: int  # users who answered
    deadline: float


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


def round_request(stream: str, round_key: str, side: SideKeys) -> Request:
    """A round's request, from its key of its own."""
    return side.value(request_key(stream, round_key), RoundRequest).request


class Collector(Processor):
    """Sums the perturbed reports of each (slot, phase) round into the oracle's support.

    Reads ``ldp.requests`` (M2's requests: which users are asked) and ``ldp.reports`` (the devices'
    answers, and ticks). A round closes when every asked user answered or its deadline passed
    (the users who did not answer are counted); its support goes to M1 (phase 1, on ``slots``) or
    M2 (phase 2, on ``dissimilarity``). A report from a user who was not asked, a second report, a
    report for a closed round, or one the request's oracle cannot produce (its
    :meth:`~wevent.core.local.oracle.LocalOracle.possible`) is counted and dead-lettered.

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
            return None, None, [malformed(events, self.keys, topic, raw, str(exc))]
        except ValueError:  # the codec failed deeper (text, array buffers); its message may quote the bytes
            return None, None, [malformed(events, self.keys, topic, raw, "malformed internal message")]
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

    def _logic(self, name: str) -> LocalLogic:
        return cast(LocalLogic, self.logics[name])  # the collector keeps local-model streams only

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
                                          now + self._logic(name).deadline_seconds)
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
        request = round_request(name, key, side)
        if users.size != len(reports.reports):
            return self._reject(events, name, "malformed", topic, users, "users and reports differ in number")
        oracle = request.make_oracle()
        ok = oracle.possible(reports.reports, users.size)  # exactly the outputs this oracle can produce
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
            support = oracle.support(reports.reports[keep])
            round_.support = support if round_.support is None else round_.support + support
            round_.answered_at = seen_add(round_.answered_at, at[keep], request.size)
            round_.n += int(keep.sum())
            events.reports_accepted[name] += int(keep.sum())
        return outputs

    def _expire_early(self, state: CollectorState, name, now: float, topic, side: SideKeys,
                      events: Events) -> list[Out]:
        """Reports that waited a whole deadline for a request that never came were not requested."""
        outputs = []
        grace = self._logic(name).deadline_seconds
        for key in list(state.early):
            waiting = [e for e in state.early[key] if e[0] + grace > now]
            for _, expired in (e for e in state.early[key] if e[0] + grace <= now):
                outputs += self._reject(events, name, "unrequested", topic,
                                        np.asarray(side.value(expired, ReportsMessage).users, dtype=np.int64),
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
            request = round_request(name, key, side)
            side.delete(request_key(name, key))
            support = round_.support if round_.support is not None else np.zeros(
                1 if request.oracle == "hm" else request.domain_size)
            message = SupportMessage(name, round_key.slot, round_key.phase, support, round_.n, missing, request)
            outputs.append(Out(SLOTS if round_key.phase == 1 else MEASUREMENTS, message.encode(), name))
        return outputs
