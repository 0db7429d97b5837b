"""The public topics (``releases``, ``audit``, ``deadletter``): JSON, one object per message.

A slot's release line as each model shapes it is what the workers publish on ``releases`` and
``wevent simulate --releases`` writes, alike. A central release is :meth:`ReleaseRecord.from_step`
with the window's spend. A local-model one adds its reports, communication and oracles; a
personalized one adds every requirement type's charges.

The workers sign every release and audit record with the server's release key (one last field,
``signature``: :func:`~wevent.stream.wire.seals.seal`); :class:`PublishedRecords` reads them as
every public reader should, keeping only those that verify under the release public key.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from .format import FORMAT_VERSION, DecodeError, check_version
from .seals import SignatureSeal, unseal
from .topics import AUDIT, RELEASES

__all__ = ["ReleaseRecord", "AuditRecord", "DeadLetter", "PublishedRecords", "unread_bytes", "local_release_record",
           "personalized_release_record"]


def _known_fields(cls, message) -> dict:
    """The fields of dataclass ``cls`` in ``message``, whose other fields (a newer writer's) are ignored."""
    if not isinstance(message, dict):
        raise DecodeError(f"a {cls.__name__} must be a JSON object")
    check_version(message)
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in message.items() if k in names}


def _versioned_json(record) -> str:
    return json.dumps({"version": FORMAT_VERSION, **asdict(record)}, separators=(",", ":"), sort_keys=True)


def _finite_or_none(value):
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class ReleaseRecord:
    """One slot's release on the ``releases`` topic (and one line of a release log).

    ``(stream, slot)`` identifies it: a consumer keeps the first copy of each pair that verifies
    (:class:`PublishedRecords`), and any re-emission after a crash is byte-for-byte identical.
    ``parameters`` says what the release was made with beyond its mechanism, epsilon and window
    (:func:`~wevent.stream.agents.publish.release_parameters`; None in a simulation's log).
    """

    stream: str
    slot: int
    release: list[float]
    strategy: str
    mechanism: str
    epsilon: float
    window: int
    eps1: float
    eps2: float
    window_spend: float  # total budget of the window of w slots ending here
    slot_start: float = 0.0  # epoch seconds; 0 when the stream has no clock (simulation)
    slot_end: float = 0.0
    dissimilarity: float | None = None
    threshold: float | None = None
    extras: dict[str, Any] = field(default_factory=dict)  # model-specific (LDP: users, reports, bits)
    parameters: dict[str, Any] | None = None

    @classmethod
    def from_step(cls, stream: str, mechanism, result, window_spend: float, slot_start: float = 0.0,
                  slot_end: float = 0.0, extras: dict | None = None) -> "ReleaseRecord":
        return cls(
            stream=stream,
            slot=int(result.slot),
            release=np.asarray(result.release, dtype=float).tolist(),
            strategy=result.strategy.value,
            mechanism=mechanism.name,
            epsilon=mechanism.epsilon,
            window=mechanism.window,
            eps1=float(result.eps1),
            eps2=float(result.eps2),
            window_spend=float(window_spend),
            slot_start=float(slot_start),
            slot_end=float(slot_end),
            dissimilarity=_finite_or_none(result.dissimilarity),
            threshold=_finite_or_none(result.threshold),
            extras=dict(extras or {}),
        )

    def to_json(self) -> str:
        return _versioned_json(self)

    def to_bytes(self) -> bytes:
        return self.to_json().encode()

    @classmethod
    def from_json(cls, text: str | bytes) -> "ReleaseRecord":
        """A release, ignoring its ``signature`` (checked by :class:`PublishedRecords` or
        :func:`~wevent.stream.wire.seals.check_seal`) and unknown fields."""
        return cls.from_fields(json.loads(text))

    @classmethod
    def from_fields(cls, data) -> "ReleaseRecord":
        """A release from its decoded JSON object (TypeError when a field is missing)."""
        if isinstance(data, dict) and data.get("record") == "audit":
            raise DecodeError("an audit record, not a release")
        return cls(**_known_fields(cls, data))


@dataclass(frozen=True)
class AuditRecord:
    """The ledger entry of one slot on the ``audit`` topic: enough to re-verify the guarantee.

    Central model: ``eps1``/``eps2`` charged to every user, plus ``reserved`` in every window for a
    query index with its own budget; ``epsilon`` is the stream's total. Personalized: per requirement type,
    ``charges[k]`` charged to every user of type k, with ``types[k] = [w_k, eps_k, users]``.
    Local model: per phase, the per-report budget and which users were asked (None = all).
    """

    stream: str
    slot: int
    mechanism: str
    epsilon: float
    window: int
    eps1: float
    eps2: float
    types: list | None = None
    charges: list | None = None
    phases: list | None = None  # [{"phase": 1|2, "epsilon": e, "users": [...] | None}]
    reserved: float = 0.0  # budget of every window taken by another release (a Mode B query index)
    parameters: dict[str, Any] | None = None  # as on the slot's release
    record: str = "audit"

    def to_json(self) -> str:
        return _versioned_json(self)

    def to_bytes(self) -> bytes:
        return self.to_json().encode()

    @classmethod
    def from_json(cls, text: str | bytes) -> "AuditRecord":
        return cls(**_known_fields(cls, json.loads(text)))


@dataclass(frozen=True)
class DeadLetter:
    """Rejected input with its reason, on the ``deadletter`` topic.

    ``payload`` never copies input bytes. For bytes that decode to no stream (so that nobody can
    tell whether they carry a local-model stream's raw values) it is :func:`unread_bytes`: their
    length and a keyed digest. A dead letter of a local-model stream holds counts and user
    indices at most, never a report's value. Only central and personalized streams, whose server
    is trusted with raw values, keep a sample of the rejected reports (users, values, times).
    """

    reason: str
    topic: str
    detail: str
    stream: str | None = None
    payload: Any = None

    def to_bytes(self) -> bytes:
        return _versioned_json(self).encode()

    @classmethod
    def from_json(cls, text: str | bytes) -> "DeadLetter":
        return cls(**_known_fields(cls, json.loads(text)))


class PublishedRecords:
    """Reads messages of ``releases`` and ``audit`` (or lines of their logs) as a public reader
    should: a record counts only when its ``signature`` verifies under the release public key
    ``key``, bound to its topic (``audit`` for an audit record, else ``releases``) and stream.

    Anyone who can write to the broker can write to these topics: a record that is not JSON, not
    a record, unsigned, or signed under another key (a forgery, a changed byte, another server's)
    is dropped and counted in :attr:`dropped` by reason. With ``key`` None nothing is verified:
    whatever parses as a record counts (the signature, if any, is ignored).

    Examples
    --------
    >>> from wevent.core.randomness import SecretKey
    >>> from wevent.stream.wire.seals import release_seal, seal
    >>> signer = release_seal(SecretKey.from_seed(1))
    >>> genuine = seal(RELEASES, "taxi", b'{"stream":"taxi","slot":1}', signer)
    >>> reader = PublishedRecords(signer.public())
    >>> reader.read(genuine), reader.read(b'{"stream":"taxi","slot":1}'), reader.read(genuine.replace(b"1", b"2", 1))
    ({'stream': 'taxi', 'slot': 1}, None, None)
    >>> reader.summary()
    '2 dropped (1 unsigned, 1 with an invalid signature)'
    """

    def __init__(self, key: SignatureSeal | None) -> None:
        self.key = key
        self.dropped: Counter[str] = Counter()

    def read(self, raw: bytes) -> dict | None:
        """The record's fields without its signature, or None when it is dropped."""
        body, tag = unseal(raw)
        try:
            fields = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            self._drop("not JSON")
            return None
        if not isinstance(fields, dict) or not isinstance(fields.get("stream"), str):
            self._drop("not a record")
            return None
        if self.key is not None:
            if tag is None:
                self._drop("unsigned")
                return None
            topic = AUDIT if fields.get("record") == "audit" else RELEASES
            if not self.key.valid(topic, fields["stream"], body, tag):
                self._drop("with an invalid signature")
                return None
        return fields

    def _drop(self, reason: str) -> None:
        self.dropped[reason] += 1
        return None

    def summary(self) -> str:
        """How many records were dropped, by reason (one phrase)."""
        total = sum(self.dropped.values())
        by_count = sorted(self.dropped.items(), key=lambda kv: (-kv[1], kv[0]))
        reasons = ", ".join(f"{n} {reason}" for reason, n in by_count)
        return f"{total} dropped" + (f" ({reasons})" if reasons else "")


def unread_bytes(data: bytes, key: bytes) -> dict:
    """What a dead letter keeps of bytes it must not copy: their length and a digest.

    The digest is BLAKE2b-128 keyed with ``key`` (the server's secret, personalised apart from the
    noise it derives): it tells two dead letters' inputs apart and matches a suspected input for
    whoever holds the key. An unkeyed digest would not do, because a single report is short and
    guessable: hashing every candidate value would recover it.

    >>> letter = unread_bytes(b"not a report", bytes(32))
    >>> letter["bytes"], len(letter["blake2b_128"])
    (12, 32)
    """
    digest = hashlib.blake2b(bytes(data), key=bytes(key), digest_size=16, person=b"wevent-dlq-v1")
    return {"bytes": len(data), "blake2b_128": digest.hexdigest()}


def local_release_record(stream: str, mechanism, result, window_spend: float, slot_start: float = 0.0,
                         slot_end: float = 0.0) -> ReleaseRecord:
    """One slot's release line of a local-model stream, with its reports, communication and oracles.

    ``n2`` reports at ``eps2`` through ``oracle2`` made a fresh release: enough for its noise
    variance (:func:`wevent.stream.agents.index.release_variance`). ``asked1``/``asked2`` count the
    users each phase asked (0 where it did not run), so a release short of device answers (a
    device down past the deadline) says so itself: ``n1 < asked1`` or ``n2 < asked2``.
    """
    extras = {"n1": result.n1, "n2": result.n2, "reports": result.reports, "bits": result.bits,
              "oracle1": result.oracle1, "oracle2": result.oracle2,
              "asked1": _asked(result.users1, result.eps1, mechanism.population),
              "asked2": _asked(result.users2, result.eps2, mechanism.population)}
    return ReleaseRecord.from_step(stream, mechanism, result, window_spend, slot_start, slot_end, extras=extras)


def _asked(users: np.ndarray | None, epsilon: float, population: int) -> int:
    """How many users a phase asked: its listed users, everyone (None), or none when it did not run."""
    if epsilon <= 0:
        return 0
    return population if users is None else int(len(users))


def personalized_release_record(stream: str, mechanism, result, type_window_spend: np.ndarray,
                                slot_start: float = 0.0, slot_end: float = 0.0) -> ReleaseRecord:
    """One slot's release line with every type's charges.

    ``type_window_spend[k]`` is type k's spend over its own window ending at this slot;
    ``window_spend`` is the largest of them (the most any user's own window holds).
    """
    extras = {"type_eps1": result.type_eps1.tolist(), "type_eps2": result.type_eps2.tolist(),
              "window_spend_ratio": float((type_window_spend / mechanism.types.epsilons).max()),
              "theta": result.theta}
    return ReleaseRecord.from_step(stream, mechanism, result, float(type_window_spend.max()), slot_start, slot_end,
                                   extras=extras)
