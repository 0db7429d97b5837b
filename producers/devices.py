"""The local model's device fleet: the users' side of every request/response round.

A fleet process holds the true values of the users of its shard (whole device blocks: block b
belongs to shard ``b mod shards``), reads the server's requests from ``ldp.requests``, perturbs
the values of the asked users with the library's device-side code and the **devices'** key
(:func:`pipeline.core.local.devices.block_reports`; the server never has that key), and sends only
the perturbed reports to ``ldp.reports``. Raw values never leave this process.

Each user's own ledger (:class:`DeviceLedger`) refuses a report that would take the user over
epsilon within any window of w slots, so privacy holds even against a server that asks too
often. Refusals are counted and logged. An identical request repeated (a server re-emitting
after a crash) is answered with the identical reports at no new cost.

A fleet acts only on requests signed by the server (:class:`SignedRequests`, checked with the
server's public key: the devices hold no server secret) and signs its report batches with a key
derived from the devices' key, so no one else can spend a user's budget or answer in their name.

>>> ledger = DeviceLedger(population=4, window=3, epsilon=1.0)
>>> ledger.admit(slot=1, phase=1, users=np.array([0, 1]), epsilon=1.0).tolist()
[True, True]
>>> ledger.admit(slot=2, phase=1, users=np.array([1, 2]), epsilon=1.0).tolist()  # user 1 again in the window
[False, True]
>>> ledger.admit(slot=2, phase=1, users=np.array([2]), epsilon=1.0).tolist()  # the same request again: free
[True]
>>> ledger.admit(slot=4, phase=1, users=np.array([1]), epsilon=1.0).tolist()  # slot 1 left the window
[True]
"""

from __future__ import annotations

import logging
from collections import deque

import numpy as np

from pipeline.core.data import ABSENT, UserValues
from pipeline.core.local import Request
from pipeline.core.local.devices import Devices, block_reports
from pipeline.core.validation import ParameterError
from pipeline.stream.codecs import AuthenticationError, DecodeError, Envelope, SignatureSeal, check_seal, seal, unseal

log = logging.getLogger("wevent.devices")

MAX_REPORTS_PER_MESSAGE = 16_384  # OUE reports of d ~ 100 bins: well under Kafka's default 1 MiB message


class DeviceLedger:
    """Every user's budget spent in the last ``window`` slots, as their own device keeps it."""

    def __init__(self, population: int, window: int, epsilon: float) -> None:
        self.population, self.window, self.epsilon = int(population), int(window), float(epsilon)
        self.spend = np.zeros(self.population)
        self._charges: deque[tuple[int, np.ndarray, float]] = deque()  # (slot, users, epsilon)
        self._answered: dict[tuple[int, int], np.ndarray] = {}  # (slot, phase) -> users admitted
        self.newest = 0

    def admit(self, slot: int, phase: int, users: np.ndarray, epsilon: float) -> np.ndarray:
        """Which ``users`` may report at ``(slot, phase)`` for ``epsilon`` each; charges them."""
        users = np.asarray(users, dtype=np.int64)
        before = self._answered.get((slot, phase), np.zeros(0, dtype=np.int64))
        # Asked again at the same (slot, phase): the same derived report, already paid for.
        repeat = np.isin(users, before)
        if slot < self.newest:  # a window only moves forward: an older slot cannot be charged safely
            return repeat
        while self._charges and self._charges[0][0] <= slot - self.window:
            _, old, eps = self._charges.popleft()
            self.spend[old] -= eps
        allowed = repeat | (self.spend[users] + epsilon <= self.epsilon * (1 + 1e-12))
        charged = users[allowed & ~repeat]
        self.spend[charged] += epsilon
        self._charges.append((slot, charged, epsilon))
        self._answered[(slot, phase)] = np.concatenate([before, charged])
        self.newest = slot
        for key in [k for k in self._answered if k[0] <= slot - self.window]:
            del self._answered[key]
        return allowed


class DeviceFleet:
    """The devices of one shard of users: answers requests with perturbed reports."""

    def __init__(self, stream, values: UserValues, devices: Devices, shard: int = 0, shards: int = 1) -> None:
        if not 0 <= shard < shards:
            raise ParameterError(f"shard must be in 0..{shards - 1}, got {shard}")
        if values.users > stream.users:
            raise ParameterError(f"the values hold {values.users} users, stream {stream.name!r} has {stream.users}")
        self.stream = stream
        self.values = values
        self.devices = devices
        self.shard, self.shards = shard, shards
        # A user with no value in a slot reports the extra ABSENT category when the stream has one.
        self.absent_category = values.domain_size if stream.domain == values.domain_size + 1 else None
        self.slot_offset = round((values.start - stream.start) / stream.slot_seconds)
        self.ledger = DeviceLedger(stream.users, stream.window, stream.epsilon)
        self.refused = 0
        self.answered = 0

    def values_at(self, slot: int) -> np.ndarray | None:
        feed_slot = slot - self.slot_offset
        if not 1 <= feed_slot <= self.values.slots:
            return None
        row = self.values.values[feed_slot - 1]
        if self.absent_category is not None:
            row = np.where(row == ABSENT, self.absent_category, row)
        if row.size < self.stream.users:  # users beyond the data have no value
            row = np.concatenate([row, np.full(self.stream.users - row.size, ABSENT, dtype=row.dtype)])
        return row

    def answer(self, request: Request) -> list[dict]:
        """The report batches this shard sends for ``request`` (users admitted by their ledgers)."""
        values = self.values_at(request.slot)
        batches = []
        for block, users in self.devices.blocks(request):
            if block % self.shards != self.shard:
                continue
            users = np.arange(users.start, users.stop) if isinstance(users, slice) else np.asarray(users)
            if values is None:
                self._refuse(users.size, request, "no value for this slot")
                continue
            held = values[users]
            # Every asked user of the block is perturbed in order, so each report is the one the
            # simulation draws whoever else answers; refused or absent users' reports are dropped.
            reports = block_reports(self.devices.randomness, request, block, np.where(held == ABSENT, 0, held))
            present = held != ABSENT
            admitted = present & self.ledger.admit(request.slot, int(request.phase), users, request.epsilon)
            if (~admitted).any():
                self._refuse(int((~admitted).sum()), request, "over budget or absent")
            for start in range(0, int(admitted.sum()), MAX_REPORTS_PER_MESSAGE):
                chosen = np.flatnonzero(admitted)[start:start + MAX_REPORTS_PER_MESSAGE]
                batches.append({"stream": self.stream.name, "slot": request.slot, "phase": int(request.phase),
                                "users": users[chosen], "reports": reports[chosen]})
                self.answered += chosen.size
        return batches

    def _refuse(self, count: int, request: Request, reason: str) -> None:
        from pipeline.stream import metrics

        self.refused += count
        metrics.device_refusals.labels(self.stream.name).inc(count)
        log.warning("stream %s slot %d phase %d: %d device(s) refused (%s)", self.stream.name, request.slot,
                    int(request.phase), count, reason)


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
        """The request in ``raw`` if it is a request of this stream signed by the server, else None."""
        body, tag = unseal(raw)
        try:
            envelope = Envelope.decode(body)
        except DecodeError:
            return None
        if envelope.kind != "request" or envelope.get("stream") != self.stream:
            return None
        try:
            check_seal(self.server, "ldp.requests", self.stream, body, tag)
        except AuthenticationError as exc:
            from pipeline.stream import metrics

            self.forged += 1
            metrics.forged_messages.labels("ldp.requests", "unauthenticated").inc()
            log.warning("stream %s: refused a request of slot %s phase %s: %s", self.stream, envelope.get("slot"),
                        envelope.get("phase"), exc)
            return None
        return Request.from_dict({k: v for k, v in envelope.fields.items() if k != "stream"})


def signed_reports(batches: list[dict], devices: SignatureSeal) -> list[bytes]:
    """The ``ldp.reports`` messages of a fleet's answer: one signature per batch, not per report."""
    return [seal("ldp.reports", batch["stream"], Envelope("reports", batch).encode(), devices) for batch in batches]
