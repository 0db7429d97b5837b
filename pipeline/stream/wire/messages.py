"""The internal topics (``slots``, ``dissimilarity``) and the local model's ``ldp.requests`` and ``ldp.reports``.

They carry one frozen dataclass per kind of message (:class:`InternalMessage`: partial, measured,
ready, dissimilarity, support, request, reports, tick), packed with the same compact codec as
mechanism state (a JSON header plus raw array buffers); :func:`decode_message` reads any of them.
Each is sealed apart (:mod:`wevent.stream.wire.seals`).

Messages are types
------------------

**Messages are types.** Each kind of internal and LDP message (partial, measured, ready,
dissimilarity, support, request, reports, tick) is a frozen dataclass in
`pipeline/stream/wire/messages.py` with `encode()` and `decode()`; `decode_message` reads any kind and
refuses a missing field or one of the wrong type.
"""

from __future__ import annotations

from dataclasses import Field, dataclass, fields
from typing import Any, ClassVar, Self

import numpy as np

from ...core import packing
from ...core.central.column_groups import GroupDissimilarity
from ...core.central.dissimilarity import Dissimilarity
from ...core.local.protocol import LocalDissimilarity, Request
from .format import FORMAT_VERSION, DecodeError, check_version
from .seals import unseal

__all__ = ["pack_message", "InternalMessage", "PartialMessage", "MeasuredMessage", "ReadyMessage",
           "DissimilarityMessage", "SupportMessage", "RequestMessage", "ReportsMessage", "TickMessage",
           "MESSAGE_KINDS", "decode_message", "encode_users", "decode_users"]


def pack_message(kind: str, fields: dict[str, Any]) -> bytes:
    """The bytes of an internal or LDP message: its ``kind``, :data:`FORMAT_VERSION` and ``fields``
    in their order, packed like mechanism state (a JSON header plus raw array buffers)."""
    return packing.pack({"kind": kind, "version": FORMAT_VERSION, **fields})


class InternalMessage:
    """A message of ``slots``, ``dissimilarity``, ``ldp.requests`` or ``ldp.reports``.

    Each kind is a frozen dataclass below: :meth:`to_fields` gives its fields in their order on the
    wire, :meth:`from_fields` reads them back (ignoring fields a newer writer added), and
    :func:`decode_message` reads any kind. A message is sealed apart (:func:`seal`).

    >>> partial = PartialMessage("taxi", 4, 0, np.array([[1, 2]]), 60.0)
    >>> back = decode_message(partial.encode())
    >>> type(back).__name__, back.slot, back.counts.tolist()
    ('PartialMessage', 4, [[1, 2]])
    """

    kind: ClassVar[str]
    stream: str
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # each kind is a dataclass

    def to_fields(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_fields(cls, values: dict[str, Any]) -> Self:
        raise NotImplementedError

    def encode(self) -> bytes:
        return pack_message(self.kind, self.to_fields())

    @classmethod
    def decode(cls, data: bytes) -> Self:
        """The message in ``data`` (sealed or not: the seal is not checked), which must be of this kind."""
        message = decode_message(data)
        if not isinstance(message, cls):
            raise DecodeError(f"a {message.kind} message, not a {cls.kind} message")
        return message


def _text(values: dict, name: str) -> str:
    if not isinstance(values[name], str):
        raise DecodeError(f"{name} must be text")
    return values[name]


def _integer(values: dict, name: str) -> int:
    value = values[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise DecodeError(f"{name} must be an integer")
    return value


def _real(values: dict, name: str) -> float:
    value = values[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DecodeError(f"{name} must be a number")
    return float(value)


@dataclass(frozen=True, eq=False)
class PartialMessage(InternalMessage):
    """One ``reports`` partition's counts of a closed slot: assembler to M1, on ``slots``."""

    kind: ClassVar[str] = "partial"
    stream: str
    slot: int
    partition: int
    counts: np.ndarray  # (groups, domain)
    closed_at: float  # the assembler's wall time when it closed the slot

    @classmethod
    def from_fields(cls, values):
        return cls(_text(values, "stream"), _integer(values, "slot"), _integer(values, "partition"),
                   np.asarray(values["counts"]), _real(values, "closed_at"))


@dataclass(frozen=True, eq=False)
class MeasuredMessage(InternalMessage):
    """A central or personalized slot's counts and private dissimilarity (None: the mechanism
    has no M1): M1 to M2, on ``dissimilarity``.

    On the wire the dissimilarity is its named fields, and ``dis_values`` where it is one per group
    of bins (:class:`~wevent.core.central.column_groups.GroupDissimilarity`: BD and BA with grouping).

    >>> dis = GroupDissimilarity(3, 2.5, 0.05, 10.0, np.array([2.5, 0.25]))
    >>> back = decode_message(MeasuredMessage("taxi", 3, 60.0, np.array([[4, 1]]), dis).encode())
    >>> type(back.dissimilarity).__name__, back.dissimilarity.values.tolist()
    ('GroupDissimilarity', [2.5, 0.25])
    """

    kind: ClassVar[str] = "measured"
    stream: str
    slot: int
    closed_at: float  # when the slot's last partition closed
    counts: np.ndarray  # (groups, domain)
    dissimilarity: Dissimilarity | None = None

    def to_fields(self):
        dis = self.dissimilarity
        measured: dict[str, Any] = {} if dis is None else {"dis_value": dis.value, "dis_epsilon": dis.epsilon, "dis_scale": dis.scale}
        if isinstance(dis, GroupDissimilarity) and dis.values is not None:
            measured["dis_values"] = np.asarray(dis.values, dtype=float)
        return {"stream": self.stream, "slot": self.slot, "closed_at": self.closed_at, "counts": self.counts,
                **measured}

    @classmethod
    def from_fields(cls, values):
        slot = _integer(values, "slot")
        dis = None
        if "dis_value" in values:
            scalars = (slot, _real(values, "dis_value"), _real(values, "dis_epsilon"), _real(values, "dis_scale"))
            dis = (GroupDissimilarity(*scalars, np.asarray(values["dis_values"], dtype=float))
                   if "dis_values" in values else Dissimilarity(*scalars))
        return cls(_text(values, "stream"), slot, _real(values, "closed_at"), np.asarray(values["counts"]), dis)


@dataclass(frozen=True)
class ReadyMessage(InternalMessage):
    """A local-model slot closed everywhere, release ``slot - 1`` known: M1 to M2, on
    ``dissimilarity``, which then opens the slot's rounds."""

    kind: ClassVar[str] = "ready"
    stream: str
    slot: int
    closed_at: float

    @classmethod
    def from_fields(cls, values):
        return cls(_text(values, "stream"), _integer(values, "slot"), _real(values, "closed_at"))


@dataclass(frozen=True)
class DissimilarityMessage(InternalMessage):
    """A local-model slot's dissimilarity, from its phase-1 support: M1 to M2, on ``dissimilarity``.

    On the wire ``dis`` holds its named fields.
    """

    kind: ClassVar[str] = "dissimilarity"
    stream: str
    slot: int
    dissimilarity: LocalDissimilarity

    def to_fields(self):
        return {"stream": self.stream, "slot": self.slot, "dis": self.dissimilarity.to_dict()}

    @classmethod
    def from_fields(cls, values):
        return cls(_text(values, "stream"), _integer(values, "slot"), LocalDissimilarity.from_dict(values["dis"]))


@dataclass(frozen=True, eq=False)
class SupportMessage(InternalMessage):
    """A closed round's summed support: collector to M1 (phase 1, on ``slots``) or M2 (phase 2, on
    ``dissimilarity``). ``n`` users answered the ``request``; ``missing`` asked users did not."""

    kind: ClassVar[str] = "support"
    stream: str
    slot: int
    phase: int
    support: np.ndarray
    n: int
    missing: int
    request: Request

    def to_fields(self):
        return {**super().to_fields(), "request": self.request.to_dict()}

    @classmethod
    def from_fields(cls, values):
        return cls(_text(values, "stream"), _integer(values, "slot"), _integer(values, "phase"),
                   np.asarray(values["support"]), _integer(values, "n"), _integer(values, "missing"),
                   Request.from_dict(values["request"]))


@dataclass(frozen=True, eq=False)
class RequestMessage(InternalMessage):
    """M2's request to the devices on ``ldp.requests``: the request's fields beside the stream."""

    kind: ClassVar[str] = "request"
    stream: str
    request: Request

    def to_fields(self):
        return {"stream": self.stream, **self.request.to_dict()}

    @classmethod
    def from_fields(cls, values):
        return cls(_text(values, "stream"), Request.from_dict(values))


@dataclass(frozen=True, eq=False)
class ReportsMessage(InternalMessage):
    """Devices' perturbed reports for one round, on ``ldp.reports``: ``users[i]`` sent ``reports[i]``
    (a value for GRR and HM, a row of packed bits for OUE). The collector checks them against the
    round's request."""

    kind: ClassVar[str] = "reports"
    stream: str
    slot: int
    phase: int
    users: np.ndarray
    reports: np.ndarray

    @classmethod
    def from_fields(cls, values):
        return cls(_text(values, "stream"), _integer(values, "slot"), _integer(values, "phase"),
                   np.asarray(values["users"]), np.asarray(values["reports"]))


@dataclass(frozen=True)
class TickMessage(InternalMessage):
    """A worker's unsigned nudge on ``ldp.reports``: the collector looks at its clock for deadlines."""

    kind: ClassVar[str] = "tick"
    stream: str

    @classmethod
    def from_fields(cls, values):
        return cls(_text(values, "stream"))


MESSAGE_KINDS: dict[str, type[InternalMessage]] = {cls.kind: cls for cls in (
    PartialMessage, MeasuredMessage, ReadyMessage, DissimilarityMessage, SupportMessage, RequestMessage,
    ReportsMessage, TickMessage)}


def decode_message(data: bytes) -> InternalMessage:
    """The internal or LDP message in ``data``, sealed or not (:func:`check_seal` checks the seal),
    as the dataclass of its kind.

    Raises :class:`DecodeError` for bytes that are no message of a known kind, a missing field, one
    of the wrong type or one of an older layout. A deeper failure (text or an array buffer the codec cannot read) raises
    a ValueError whose text may quote the bytes.
    """
    try:
        values = packing.unpack(unseal(data)[0])
        check_version(values)
        kind = values.pop("kind")
        kind_class = MESSAGE_KINDS[kind]
    except (packing.StateError, KeyError, TypeError, AttributeError) as exc:
        raise DecodeError(f"malformed internal message: {exc}") from None
    try:
        return kind_class.from_fields(values)
    except KeyError as exc:
        raise DecodeError(f"malformed {kind} message: no field {exc}") from None
    except (DecodeError, packing.LayoutError) as exc:  # their text is ours: it quotes no field's value
        raise DecodeError(f"malformed {kind} message: {exc}") from None
    except (TypeError, ValueError) as exc:  # their text may quote a field's value: only their type
        raise DecodeError(f"malformed {kind} message: a field of the wrong type ({type(exc).__name__})") from None


def encode_users(users: np.ndarray | None, population: int) -> np.ndarray | None:
    """A set of user indices as a bitset (``population / 8`` bytes; None stays None = everyone).

    >>> decode_users(encode_users(np.array([0, 5, 9]), 12), 12).tolist()
    [0, 5, 9]
    """
    if users is None:
        return None
    bits = np.zeros(population, dtype=bool)
    bits[np.asarray(users, dtype=np.int64)] = True
    return np.packbits(bits)


def decode_users(bitset: np.ndarray | None, population: int) -> np.ndarray | None:
    if bitset is None:
        return None
    return np.flatnonzero(np.unpackbits(np.asarray(bitset, dtype=np.uint8), count=population))
