"""The local model's device fleet: the users' side of every request/response round.

A fleet process holds the true values of the users of its shard (whole device blocks: block b
belongs to shard ``b mod shards``), reads the server's requests from ``ldp.requests``, perturbs
the values of the asked users with the library's device-side code and the **devices'** key
(:func:`wevent.core.local.device_reports.block_reports`; the server never has that key), and sends only
the perturbed reports to ``ldp.reports``. Raw values never leave this process, and neither does
who has one: every asked user answers and is charged alike, a user without a value in the slot
(``ABSENT`` in the dump, or beyond its users) with the absent category, the last of the
``domain + 1`` a frequency stream's devices answer in
(:func:`~wevent.stream.agents.local.answers_absent`). A mean stream's devices refuse to start on
a dump without every user's value in every slot.

Each user's own ledger (:class:`DeviceLedger`) refuses a report that would take the user over
epsilon within any window of w slots, so privacy holds even against a server that asks too
often. Every distinct request is charged: a ``(slot, phase)`` is bound to the first request
charged there (by the BLAKE2b digest of its canonical encoding), a byte-identical repeat (a
server re-emitting after a crash) is answered with the identical reports at no new cost, and
any other request for that ``(slot, phase)`` is refused whole. So are requests whose budget is
not a finite number in ``(0, epsilon]``, requests for a slot older than the newest charged one,
and requests more than ``max_ahead`` slots past it. With a ``path`` the ledger is written
atomically to disk before any report leaves, and read back at start: a restart forgets no spend,
and a fleet whose ledger is missing does not start unless told this is its first start.

A fleet acts only on requests signed by the server (:class:`SignedRequests`, checked with the
server's public key: the devices hold no server secret) and signs its report batches with a key
derived from the devices' key, so no one else can spend a user's budget or answer in their name.

Like the workers' processors, the fleet's logic returns what happened with each request (its
refusals, a forged request, in :class:`~wevent.stream.agents.events.Events`) instead of touching
metrics; :meth:`DeviceFleet.answer` and :meth:`SignedRequests.read` hand those events to
:func:`wevent.stream.runtime.prometheus.export`, the one mapping from events to metrics.

>>> from wevent.core.randomness import Phase
>>> def ask(slot, users, epsilon=1.0):
...     return Request(slot, Phase.PUBLICATION, epsilon, "grr", 2, 4, np.array(users))
>>> ledger = DeviceLedger(population=4, window=3, epsilon=1.0)
>>> ledger.admit(ask(1, [0, 1]), np.array([0, 1])).tolist()
[True, True]
>>> ledger.admit(ask(2, [1, 2]), np.array([1, 2])).tolist()  # user 1 again in the window
[False, True]
>>> ledger.admit(ask(2, [1, 2]), np.array([1, 2])).tolist()  # the same request again: free
[False, True]
>>> ledger.admit(ask(2, [1, 2], epsilon=0.5), np.array([1, 2]))  # another request, same (slot, phase)
Traceback (most recent call last):
...
wevent.producers.device_fleet.RequestRefused: slot 2 phase 2 was charged for another request
>>> ledger.admit(ask(4, [1]), np.array([1])).tolist()  # slot 1 left the window
[True]

The fleet in the pipeline
-------------------------

**Device fleet** (`wevent devices`, `producers/device_fleet.py`): holds a shard of users' true
values, answers requests with reports perturbed by the library's device code under the devices'
own key, and keeps a per-user ledger that refuses anything over a user's epsilon in a window.
Every asked user answers and is charged: a user without a value in the slot (`ABSENT` in the
dump, or beyond its users) answers in the devices' "absent" category, the last of the
`domain + 1` they answer in; a mean stream's fleet needs every user's value in every slot.
`wevent simulate --input` answers so too, whatever the dump, and releases what the stream
releases; the generated synthetic streams, whose every user has a value by construction, keep
the papers' categories (two for the binary streams).
It charges every distinct request: a (slot, phase) belongs to the first request charged there
(a BLAKE2b digest of its fields); the same request sent again (a server re-emitting after a
crash) gets the same reports at no new cost, and any other request for that slot and phase is
refused. So are budgets outside (0, epsilon], slots older than the newest charged one, and slots
more than `--max-slots-ahead` (default 100 w) past it (`wevent_device_requests_refused_total`).
Each shard keeps its users' spend for the current window in `--ledger-dir` (default
`./wevent-devices-ledger`), written and synced before any report leaves and read back at
start, so a killed fleet forgets no spend; a damaged or foreign file stops the fleet with one
line rather than starting from zero, and so does a missing one (deleted, or a fleet started
from another working directory), naming the directory it looked in: a fleet starts from an
empty ledger only when told it is the shard's first start (`--new-ledger`, which writes the
empty ledger at once and reads an existing one all the same; `wevent run`, which owns its
fleet's whole life, passes it). The window is charged exactly, as the core's ledgers charge
theirs (`UserCharges`): no slack in the server's favour. `wevent devices` checks the values
dump against the stream (users, domain, slot length, start alignment) before it connects.

**Device fleets commit after answering.** `wevent devices` writes a request's charge to its
ledger on disk, sends the reports, waits until the broker has every one, and only then commits
the request's offset. A fleet killed at any point reads the request again on restart and answers
it with the same bytes: its ledger recognises the request, so the repeat costs no budget. The
collector counts a re-sent report once (dropped as `duplicate`, or `late` once its round has
closed), so releases equal a run without crashes. A report the broker does not take stops the
fleet with one line and the request uncommitted, for its supervisor to restart it. An answer
message holds at most 900,000 bytes, under Kafka's default 1 MiB limit.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from wevent.core.accounting import UserCharges, WindowSpend
from wevent.core.data import ABSENT, UserValues
from wevent.core.exact import round_up
from wevent.core.local import Request
from wevent.core.local.protocol import DIGEST_BYTES
from wevent.core.local.device_reports import Devices, block_reports
from wevent.core.local.user_sets import pack_users, unpack_users
from wevent.core.packing import StateError, pack, unpack
from wevent.core.validation import ParameterError
from wevent.stream.config import StreamConfig
from wevent.stream.wire.topics import LDP_REPORTS, LDP_REQUESTS
from wevent.stream.wire.seals import AuthenticationError, SignatureSeal, check_seal, seal, unseal
from wevent.stream.wire.format import DecodeError
from wevent.stream.wire.messages import ReportsMessage, RequestMessage, decode_message
from wevent.stream.agents.events import Events
from wevent.stream.agents.local import answer_categories, answers_absent

log = logging.getLogger("wevent.devices")

MAX_REPORTS_PER_MESSAGE = 16_384  # OUE reports of d ~ 100 bins: well under Kafka's default 1 MiB message
MAX_MESSAGE_BYTES = 900_000  # users and reports of one message, whatever d: under Kafka's default 1 MiB
# /2 keeps each charge's users as a packed user set (gaps or a bitset, whichever is shorter): a
# fleet rewrites its whole window per request, and /1's bitsets of the population made that 5 MB
# per request at a million users. A /1 file is still read.
LEDGER_FORMAT = "wevent-device-ledger/2"
BITSET_LEDGER_FORMAT = "wevent-device-ledger/1"


class RequestRefused(Exception):
    """A whole request a device fleet does not answer; ``reason`` is the metric's label."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class DeviceLedger:
    """Every user's budget spent in the last ``window`` slots, as their own device keeps it.

    It keeps the users' spend as the core's ledgers do, exactly (a
    :class:`~wevent.core.accounting.UserCharges`), and answers the question they answer, which
    user window comes closest to its bound (:meth:`tightest`, a core
    :class:`~wevent.core.accounting.WindowSpend`), but it charges in its own way, because it
    guards the users rather than accounting for a mechanism: it *admits* a request before any
    report exists, refusing each user it would take over ``epsilon``, where a core ledger records
    a step result after the release; it charges a request once by its digest, whatever the
    server sends again; and it keeps the users of every charge as a packed set on disk, read back
    at start. ``wevent audit`` checks the server's own records with the core's ledgers.

    Parameters
    ----------
    population : int
        Users ``0..population-1``.
    window : int
        ``w``: a user spends at most ``epsilon`` in any ``w`` consecutive slots.
    epsilon : float
        The window budget of every user.
    max_ahead : int, optional
        A request more than this many slots past the newest charged slot is refused, so a forged
        far-future request cannot move the window past the real stream. The default, ``100 *
        window``, is far above the gaps the mechanisms leave between requests (``w`` for LSP; the
        sampling interval of LP-RescueDP grows in calm streams: 121 slots at ``w = 10`` after
        3000 synthetic slots).
    newest : int
        The slot the bound counts from while nothing is charged (a fleet passes the slot before
        its first value).
    path : path-like, optional
        Where the ledger is kept: every change is written there (atomically) before ``admit``
        returns. ``owner`` names the stream and shard it belongs to; :meth:`open` checks it.

    Attributes
    ----------
    charges : wevent.core.accounting.UserCharges
        Every user's charges in the window ending at :attr:`newest`, kept exactly: a user is
        admitted only if the exact sum of their charges plus the request's budget is at most
        ``epsilon``, with no slack in the server's favour.
    newest : int
        The newest charged slot.
    """

    def __init__(self, population: int, window: int, epsilon: float, *, max_ahead: int | None = None,
                 newest: int = 0, path: str | os.PathLike[str] | None = None, owner: str = "") -> None:
        self.population, self.window, self.epsilon = int(population), int(window), float(epsilon)
        self.max_ahead = 100 * self.window if max_ahead is None else int(max_ahead)
        if self.max_ahead < 1:
            raise ParameterError(f"the slots a request may run ahead must be >= 1, got {self.max_ahead}")
        self.path, self.owner = (None if path is None else Path(path)), owner
        self.charges = UserCharges(self.population)
        # (slot, phase) -> (digest of the request charged there, its epsilon, the users it charged as a
        # packed user set: a bitmap or gaps between ids, whichever is shorter, at most N/8 bytes where
        # their ids would take 8 bytes per user)
        self._charged: dict[tuple[int, int], tuple[bytes, float, bytes]] = {}
        self.newest = int(newest)

    @classmethod
    def open(cls, path: str | os.PathLike[str], population: int, window: int, epsilon: float, *, new: bool = False,
             max_ahead: int | None = None, newest: int = 0, owner: str = "") -> "DeviceLedger":
        """The ledger kept at ``path``. A file that does not check is an error, and so is no file at all
        unless ``new`` says this is the ledger's first start: then an empty ledger is written at once,
        so that a later start finds it. An existing file is read whatever ``new`` says."""
        file = Path(path)
        ledger = cls(population, window, epsilon, max_ahead=max_ahead, newest=newest, path=file, owner=owner)
        try:
            data = file.read_bytes()
        except FileNotFoundError:
            if not new:
                raise StateError(f"no device ledger {file.name} in {file.parent.resolve()}: a fleet "
                                 "that answered before would answer again what its users already spent, so it starts "
                                 "from an empty ledger only when told this is its first start (wevent devices "
                                 "--new-ledger)") from None
            ledger.save()
            return ledger
        except OSError as exc:
            raise StateError(f"cannot read device ledger {path}: {exc.strerror}") from None
        ledger._restore(data)
        return ledger

    def admit(self, request: Request, users: np.ndarray) -> np.ndarray:
        """Which of ``users`` (distinct indices asked by ``request``) may report; charges them.

        Raises :class:`RequestRefused` when the request is refused for every user.
        """
        users = np.asarray(users, dtype=np.int64)
        slot, phase = int(request.slot), int(request.phase)
        where = f"slot {slot} phase {phase}"
        digest = request.digest
        charged = self._charged.get((slot, phase))
        if charged is not None:
            if charged[0] != digest:
                raise RequestRefused("conflict", f"{where} was charged for another request")
            return np.isin(users, unpack_users(charged[2], self.population))  # asked again: already paid for
        epsilon = float(request.epsilon)
        if not math.isfinite(epsilon) or not 0 < epsilon <= self.epsilon:
            raise RequestRefused("bad_epsilon", f"{where} asks for epsilon = {request.epsilon!r}, outside (0, "
                                                f"{self.epsilon:g}]")
        if slot < self.newest:  # a window only moves forward: an older slot cannot be charged safely
            raise RequestRefused("stale", f"{where} is older than the newest charged slot {self.newest}")
        if slot > self.newest + self.max_ahead:
            raise RequestRefused("ahead", f"{where} is more than {self.max_ahead} slots past slot {self.newest}")
        for key in [k for k in self._charged if k[0] <= slot - self.window]:  # out of every later window
            _, spent, packed = self._charged.pop(key)
            self.charges.charge(unpack_users(packed, self.population), spent, -1)
        allowed = self.charges.within(users, epsilon, self.epsilon)
        chosen = users[allowed]
        if not (chosen[1:] > chosen[:-1]).all():  # a fleet asks in increasing order; others may not
            chosen = np.unique(chosen)
        self._charge(slot, phase, digest, epsilon, chosen, pack_users(chosen, self.population))
        self.newest = slot
        self.save()
        return allowed

    def _charge(self, slot: int, phase: int, digest: bytes, epsilon: float, users: np.ndarray,
                packed: bytes) -> None:
        self._charged[(slot, phase)] = (digest, epsilon, packed)
        self.charges.charge(users, epsilon)

    def tightest(self) -> WindowSpend | None:
        """The fullest user window, the one ending at :attr:`newest` (None while nothing is charged);
        its spend is the exact sum rounded up."""
        if not self._charged:
            return None
        user, spend = self.charges.fullest()
        last = self.newest - 1  # 0-based, as WindowSpend counts slots
        return WindowSpend(round_up(spend), self.epsilon, 0, max(0, last - self.window + 1), last, user)

    # --- on disk -------------------------------------------------------------------------------
    def _state(self) -> dict[str, object]:
        return {"format": LEDGER_FORMAT, "owner": self.owner, "population": self.population, "window": self.window,
                "newest": self.newest,
                "charges": [{"slot": slot, "phase": phase, "digest": digest, "epsilon": epsilon, "users": packed}
                            for (slot, phase), (digest, epsilon, packed) in sorted(self._charged.items())]}

    def save(self) -> None:
        """Write the ledger to :attr:`path`: a new file, synced, then renamed over the old one (a
        ledger without a path is kept in memory only).

        A failure is a :class:`StateError`: the fleet stops rather than send reports it could forget.
        """
        path = self.path
        if path is None:
            return
        body = pack(self._state())
        data = body + hashlib.blake2b(body, digest_size=DIGEST_BYTES).digest()
        temporary = path.with_name(path.name + ".tmp")
        try:
            with open(temporary, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(temporary, path)
            directory = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(directory)  # the rename itself survives a power cut
            finally:
                os.close(directory)
        except OSError as exc:
            raise StateError(f"cannot write device ledger {path}: {exc.strerror}") from None

    def _restore(self, data: bytes) -> None:
        def corrupt(problem: str) -> StateError:
            return StateError(f"device ledger {self.path} is unusable ({problem}); it holds the users' spend in "
                              f"the current window, so it is not reset: restore it, or remove it knowingly")

        body, checksum = data[:-DIGEST_BYTES], data[-DIGEST_BYTES:]
        if len(data) <= DIGEST_BYTES or hashlib.blake2b(body, digest_size=DIGEST_BYTES).digest() != checksum:
            raise corrupt("checksum mismatch: truncated or damaged")
        try:
            state = unpack(body)
        except StateError as exc:
            raise corrupt(str(exc)) from None
        if state.get("format") not in (LEDGER_FORMAT, BITSET_LEDGER_FORMAT):
            raise corrupt(f"format is {state.get('format')!r}, this fleet reads {LEDGER_FORMAT!r}")
        expected = {"owner": self.owner, "population": self.population, "window": self.window}
        for field, value in expected.items():
            if state.get(field) != value:
                raise corrupt(f"{field} is {state.get(field)!r}, this fleet has {value!r}")
        try:
            newest = int(state["newest"])
            for charge in state["charges"]:
                slot, phase, epsilon = int(charge["slot"]), int(charge["phase"]), float(charge["epsilon"])
                digest, packed = charge["digest"], charge["users"]
                if not newest - self.window < slot <= newest or (slot, phase) in self._charged:
                    raise ValueError(f"a charge at slot {slot} phase {phase} outside the window ending at {newest}")
                if not math.isfinite(epsilon) or epsilon <= 0 or len(digest) != DIGEST_BYTES:
                    raise ValueError(f"a malformed charge at slot {slot} phase {phase}")
                if state["format"] == BITSET_LEDGER_FORMAT:
                    bits = np.asarray(packed)
                    if bits.dtype != np.uint8 or bits.shape != (-(-self.population // 8),):
                        raise ValueError(f"a malformed charge at slot {slot} phase {phase}")
                    users = np.flatnonzero(np.unpackbits(bits, count=self.population))
                else:
                    users = unpack_users(bytes(packed), self.population)
                self._charge(slot, phase, bytes(digest), epsilon, users, pack_users(users, self.population))
        except (KeyError, TypeError, ValueError) as exc:
            raise corrupt(str(exc)) from None
        self.newest = newest


class Answer(NamedTuple):
    """What a fleet does with one request: the report batches to send, and what it saw."""

    reports: list[ReportsMessage]
    events: Events


class DeviceFleet:
    """The devices of one shard of users: answers requests with perturbed reports.

    ``ledger_dir`` keeps the shard's :class:`DeviceLedger` on disk (one file per stream and
    shard). A fleet fails closed: it does not start from an empty ledger, which would answer again
    for spend its users already have, unless ``new_ledger`` says this is the shard's first start.
    Then a missing ledger file is created (an existing one is read all the same); without
    ``ledger_dir`` the ledger lives in this object only, so ``new_ledger`` must say that the
    fleet's whole life is this process's. ``max_ahead`` bounds how far past the newest charged
    slot a request may be (see :class:`DeviceLedger`).
    """

    def __init__(self, stream: StreamConfig, values: UserValues, devices: Devices, shard: int = 0, shards: int = 1, *,
                 ledger_dir: str | os.PathLike[str] | None = None, new_ledger: bool = False,
                 max_ahead: int | None = None) -> None:
        from wevent.stream.runtime.kafka import check_feed_fits  # noqa: PLC0415 - the Kafka client, for a live feed

        if not 0 <= shard < shards:
            raise ParameterError(f"shard must be in 0..{shards - 1}, got {shard}")
        epsilon, window = stream.epsilon, stream.window
        if epsilon is None or window is None:  # a personalized stream: every user has a budget of their own
            raise ParameterError(f"stream {stream.name!r} has no window budget of its own: devices answer a "
                                 "local-model stream")
        check_feed_fits(values, stream)  # users, domain, slot length and start alignment
        self.stream = stream
        self.values = values
        self.devices = devices
        self.shard, self.shards = shard, shards
        if not answers_absent(stream.oracle):
            self._check_complete(values)
        self.slot_offset = round((values.start - stream.start) / stream.slot_seconds)
        newest = self.slot_offset  # nothing charged: count from the first value
        if ledger_dir is None:
            if not new_ledger:
                raise ParameterError("a fleet without a ledger directory keeps its users' spend in memory only, and "
                                     "another one would start from nothing: give ledger_dir, or new_ledger=True when "
                                     "this fleet's whole life is this process's")
            self.ledger = DeviceLedger(stream.users, window, epsilon, max_ahead=max_ahead, newest=newest)
        else:
            self.ledger = DeviceLedger.open(self._ledger_path(Path(ledger_dir), new_ledger), stream.users, window,
                                            epsilon, new=new_ledger, max_ahead=max_ahead, newest=newest,
                                            owner=f"{stream.name} {shard}/{shards}")
        self.refused = 0
        self.answered = 0

    def _ledger_path(self, directory: Path, new: bool) -> Path:
        """This shard's ledger file (its directory made on a first start); the ledgers of another
        sharding of the stream are an error."""
        name = self.stream.name
        try:
            if new:
                directory.mkdir(parents=True, exist_ok=True)
            others = sorted(p.name for p in directory.glob(f"{name}-*of*.ledger")
                            if not p.name.endswith(f"of{self.shards}.ledger"))
        except OSError as exc:
            raise ParameterError(f"cannot use ledger directory {directory}: {exc.strerror}") from None
        if others:  # another sharding splits the users differently: its spend would be forgotten
            raise ParameterError(f"ledger directory {directory} holds {', '.join(others)} of another sharding than "
                                 f"{self.shard}/{self.shards}: re-sharding would forget the users' spend")
        return directory / f"{name}-{self.shard}of{self.shards}.ledger"

    def _check_complete(self, values: UserValues) -> None:
        """A mean stream's devices need every user's value in every slot (:func:`answers_absent`)."""
        missing = int((values.values == ABSENT).sum()) + (self.stream.users - values.users) * values.slots
        if missing:
            raise ParameterError(f"stream {self.stream.name!r} estimates a mean, which has no category for a user "
                                 f"without a value, so every user answers with one: the dump has no value for "
                                 f"{missing} of its {self.stream.users} users x {values.slots} slots")

    def values_at(self, slot: int) -> np.ndarray | None:
        """Every user's answer at ``slot``: their value, or the absent category (the last of the
        request's) for a user without one; None outside the dump."""
        feed_slot = slot - self.slot_offset
        if not 1 <= feed_slot <= self.values.slots:
            return None
        row = self.values.values[feed_slot - 1]
        if row.size < self.stream.users:  # users beyond the data have no value
            row = np.concatenate([row, np.full(self.stream.users - row.size, ABSENT, dtype=row.dtype)])
        return np.where(row == ABSENT, self.stream.domain, row.astype(np.int64))

    def answer(self, request: Request) -> list[ReportsMessage]:
        """:meth:`respond`, its events exported as metrics: what ``wevent devices`` does with a request."""
        from wevent.stream.runtime import prometheus  # noqa: PLC0415 - prometheus_client, where metrics are exported

        answer = self.respond(request)
        prometheus.export(answer.events)
        return answer.reports

    def respond(self, request: Request) -> Answer:
        """The report batches this shard sends for ``request`` (users admitted by their ledgers),
        and the refusals it counted."""
        events = Events()
        try:
            self._check(request)
        except RequestRefused as refusal:  # nothing about the request can be trusted, not even its users
            return Answer([], self._refuse(events, 0, request, refusal.reason, str(refusal)))
        blocks = [(block, np.arange(users.start, users.stop) if isinstance(users, slice) else users)
                  for block, users in self.devices.blocks(request) if block % self.shards == self.shard]
        if not blocks:
            return Answer([], events)
        asked = np.concatenate([users for _, users in blocks])
        values = self.values_at(request.slot)
        if values is None:
            return Answer([], self._refuse(events, asked.size, request, "no_value", f"no value for slot {request.slot}"))
        held = values[asked]
        try:
            # Every asked user is charged and answers, a user without a value with the absent
            # category: who answers, and when, never depends on raw data. The ledger is on disk
            # before any report of this request leaves.
            admitted = self.ledger.admit(request, asked)
        except RequestRefused as refusal:
            return Answer([], self._refuse(events, asked.size, request, refusal.reason, str(refusal)))
        if not admitted.all():
            self._refuse(events, int((~admitted).sum()), request, None, "over budget")
        batches = []
        oracle = request.make_oracle()
        start = 0
        for block, users in blocks:
            chosen = admitted[start:start + users.size]
            block_held = held[start:start + users.size]
            start += users.size
            if not chosen.any():
                continue
            # Every asked user of the block is perturbed in order, so each report is the one the
            # simulation draws whoever else answers; refused users' reports are dropped.
            reports = block_reports(self.devices.randomness, request, block, block_held, oracle)
            # A message the broker refuses would never be delivered, and its request never committed.
            per_message = max(1, min(MAX_REPORTS_PER_MESSAGE, MAX_MESSAGE_BYTES // (reports[0].nbytes + users.itemsize)))
            for first in range(0, int(chosen.sum()), per_message):
                kept = np.flatnonzero(chosen)[first:first + per_message]
                batches.append(ReportsMessage(self.stream.name, request.slot, int(request.phase), users[kept],
                                              reports[kept]))
                self.answered += kept.size
        return Answer(batches, events)

    def _check(self, request: Request) -> None:
        """The request is one this stream's devices can answer: its population, users, domain and oracle."""
        stream = self.stream
        categories = answer_categories(stream.oracle, stream.domain)
        if request.population != stream.users or request.domain_size != categories:
            raise RequestRefused("malformed", f"a request for {request.population} users in {request.domain_size} "
                                              f"categories; stream {stream.name!r} has {stream.users} users who "
                                              f"answer in {categories}")
        users = request.users
        if users is not None and (users.ndim != 1 or users.size and (users[0] < 0 or users[-1] >= stream.users
                                                                     or np.any(np.diff(users) <= 0))):
            raise RequestRefused("malformed", f"the asked users are not distinct ascending ids in 0..{stream.users - 1}")
        try:
            request.make_oracle()
        except ParameterError as exc:
            raise RequestRefused("malformed", str(exc)) from None

    def _refuse(self, events: Events, count: int, request: Request, reason: str | None, message: str) -> Events:
        """Count ``count`` refused reports and, for a whole refused request, its ``reason`` in
        ``events`` (returned); one log line."""
        self.refused += count
        events.device_refusals[self.stream.name] += count
        if reason is not None:
            events.device_requests_refused[self.stream.name, reason] += 1
        log.warning("stream %s slot %s phase %s: %d device(s) refused (%s)", self.stream.name, request.slot,
                    request.phase, count, message)
        return events


class SignedRequests:
    """Reads a stream's requests from ``ldp.requests``: only those the server signed.

    A request without a valid signature (anyone can write to the broker) is refused before any
    ledger sees it: counted (``wevent_forged_messages_total``), logged in one line, charging no one.
    """

    def __init__(self, stream: str, server: SignatureSeal) -> None:
        self.stream = stream
        self.server = server  # the server's public key
        self.forged = 0

    def read(self, raw: bytes) -> Request | None:
        """:meth:`check`, a forged request counted in the metrics."""
        from wevent.stream.runtime import prometheus  # noqa: PLC0415 - prometheus_client, where metrics are exported

        request, events = self.check(raw)
        prometheus.export(events)
        return request

    def check(self, raw: bytes) -> tuple[Request | None, Events]:
        """The request in ``raw`` if it is a request of this stream signed by the server, else None;
        and the events (a forged request) it caused."""
        events = Events()
        body, tag = unseal(raw)
        try:
            message = decode_message(body)
        except DecodeError:
            return None, events
        if not isinstance(message, RequestMessage) or message.stream != self.stream:
            return None, events
        try:
            check_seal(self.server, LDP_REQUESTS, self.stream, body, tag)
        except AuthenticationError as exc:
            self.forged += 1
            events.forged_messages[LDP_REQUESTS, "unauthenticated"] += 1
            log.warning("stream %s: refused a request of slot %s phase %s: %s", self.stream, message.request.slot,
                        int(message.request.phase), exc)
            return None, events
        return message.request, events


def signed_reports(batches: list[ReportsMessage], devices: SignatureSeal) -> list[bytes]:
    """The ``ldp.reports`` messages of a fleet's answer: one signature per batch, not per report."""
    return [seal(LDP_REPORTS, batch.stream, batch.encode(), devices) for batch in batches]
