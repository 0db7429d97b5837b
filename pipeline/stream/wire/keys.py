"""The keys of the workers' table state, as types: each built and read in one place.

A key is a small frozen dataclass whose fields are its coordinates; :meth:`Key.encode` gives the
text stored in a table (or in a state value, for the keys that name rounds, steps and offsets)
and :meth:`Key.decode` reads it back, refusing anything :meth:`Key.encode` could not have
written with :class:`MalformedKey` (a :class:`~wevent.stream.wire.format.DecodeError`: bad input,
never a crash). Table keys start with their stream's name (:func:`stream_of`) and separate
their fields with ``/``; the keys held inside state values separate theirs with ``:``.

==========================  ====================================  =====================================
key                         text                                  what it names
==========================  ====================================  =====================================
:class:`AssemblerKey`       ``stream/partition``                  an assembler's clock and open slots
:class:`OpenSlotKey`        ``stream/partition/slot``             an open slot's counts and seen users
:class:`PartialKey`         ``stream/slot/partition``             a partial waiting for M1
:class:`ReleaseKey`         ``stream/release/slot``               M2's release and audit, kept for replay
:class:`StepOutputKey`      ``stream/step/slot:kind:phase``       M2's output of a local-model step
:class:`MechanismPartKey`   ``stream/part/digest``                a large part of M2's mechanism state
:class:`EarlyReportsKey`    ``stream/early/slot:phase/offset``    reports waiting for their request
:class:`QueryEntryKey`      ``stream/slot``                       a slot of the query index's log
:class:`QueryHeadKey`       ``stream/head``                       the query index's position
:class:`RoundKey`           ``slot:phase``                        a collector's round (in its state)
:class:`StepKey`            ``slot:kind:phase``                   a local-model step M2 applied
:class:`OffsetMark`         ``topic:partition``                   where a state records its inputs
==========================  ====================================  =====================================

The texts are the stored format: a worker restarted on another version must read them.

Keys are types
--------------

**Keys are types.** Every table key and every key held inside state (rounds, steps, offsets) is a
dataclass in `pipeline/stream/wire/keys.py` with `encode()` and `decode()`. A key that no worker could
have written is refused as bad input.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Self, get_type_hints

from .format import DecodeError

__all__ = ["MalformedKey", "Key", "AssemblerKey", "OpenSlotKey", "PartialKey", "ReleaseKey", "StepOutputKey",
           "MechanismPartKey", "RoundRequestKey", "EarlyReportsKey", "QueryEntryKey", "QueryHeadKey", "RoundKey", "StepKey", "OffsetMark",
           "stream_of"]

_NUMBER = re.compile(r"0|[1-9][0-9]*")


class MalformedKey(DecodeError):
    """A key that no worker writes: the wrong shape, a field out of range, or a separator in a name."""


@dataclass(frozen=True)
class Key:
    """Base of the keys: fields joined by ``separator``, with the literal ``tag`` after the first.

    Integer fields are non-negative; text fields are non-empty and hold neither separator. Fields
    that are keys themselves are written whole (their separator differs from their holder's).
    """

    separator: ClassVar[str] = "/"
    tag: ClassVar[str | None] = None

    def __post_init__(self) -> None:
        for name, kind in _field_types(type(self)):
            value = getattr(self, name)
            if kind is int:  # numpy integers too (slots come from arrays), stored as int
                try:
                    number = -1 if isinstance(value, bool) else operator.index(value)
                except TypeError:
                    number = -1
                if number < 0:
                    raise MalformedKey(f"{type(self).__name__}.{name} must be a non-negative integer, got {value!r}")
                object.__setattr__(self, name, number)
            elif kind is str:
                if not isinstance(value, str) or not value or "/" in value or ":" in value:
                    raise MalformedKey(f"{type(self).__name__}.{name} must be non-empty text without '/' or ':', "
                                       f"got {value!r}")
            elif not isinstance(value, kind):
                raise MalformedKey(f"{type(self).__name__}.{name} must be a {kind.__name__}, got {value!r}")

    def encode(self) -> str:
        parts = [value.encode() if isinstance(value, Key) else str(value)
                 for value in (getattr(self, name) for name, _ in _field_types(type(self)))]
        if self.tag is not None:
            parts.insert(1, self.tag)
        return self.separator.join(parts)

    @classmethod
    def decode(cls, text: str) -> Self:
        """The key ``text`` encodes; :class:`MalformedKey` if it is not one."""
        if not isinstance(text, str):
            raise MalformedKey(f"a {cls.__name__} is text, got {type(text).__name__}")
        types = _field_types(cls)
        parts = text.split(cls.separator)
        if cls.tag is not None:
            if len(parts) < 2 or parts.pop(1) != cls.tag:
                raise MalformedKey(f"not a {cls.__name__}: {text!r}")
        if len(parts) != len(types):
            raise MalformedKey(f"not a {cls.__name__}: {text!r} has {len(parts)} fields, not {len(types)}")
        values: list[object] = []
        for part, (_, kind) in zip(parts, types):
            if kind is int:
                if not _NUMBER.fullmatch(part):
                    raise MalformedKey(f"not a {cls.__name__}: {part!r} in {text!r} is not a number")
                values.append(int(part))
            elif kind is str:
                values.append(part)
            else:
                values.append(kind.decode(part))
        return cls(*values)

    def __str__(self) -> str:
        return self.encode()


_FIELD_TYPES: dict[type[Key], tuple[tuple[str, type[Any]], ...]] = {}


def _field_types(cls: type[Key]) -> tuple[tuple[str, type[Any]], ...]:
    """Each field's name and type: int, str or a :class:`Key` (written with its own separator),
    read once per class."""
    if cls not in _FIELD_TYPES:
        hints = get_type_hints(cls)
        _FIELD_TYPES[cls] = tuple((f.name, hints[f.name]) for f in fields(cls))
    return _FIELD_TYPES[cls]


def stream_of(key: str) -> str:
    """The stream a table key belongs to (every table key starts with its stream's name).

    >>> stream_of(OpenSlotKey("taxi", 1, 30).encode()), stream_of("taxi")
    ('taxi', 'taxi')
    """
    return key.split("/", 1)[0]


# --- keys inside state values -------------------------------------------------------------------
@dataclass(frozen=True, order=True)
class RoundKey(Key):
    """One (slot, phase) request/response round of a local-model stream.

    >>> RoundKey(12, 2).encode(), RoundKey.decode("12:2")
    ('12:2', RoundKey(slot=12, phase=2))
    """

    separator: ClassVar[str] = ":"
    slot: int
    phase: int


@dataclass(frozen=True)
class StepKey(Key):
    """One step of a local-model slot at M2: the message ``kind`` it applied, and its ``phase``
    (0 for kinds without one).

    >>> StepKey.decode("7:support:2")
    StepKey(slot=7, kind='support', phase=2)
    """

    separator: ClassVar[str] = ":"
    slot: int
    kind: str
    phase: int


@dataclass(frozen=True)
class OffsetMark(Key):
    """A source partition, under which a state records the offset of the last input it applied.

    >>> OffsetMark("ldp.reports", 1).encode()
    'ldp.reports:1'
    """

    separator: ClassVar[str] = ":"
    topic: str
    partition: int


# --- table keys ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class AssemblerKey(Key):
    """The head of a stream's assembler on one ``reports`` partition."""

    stream: str
    partition: int


@dataclass(frozen=True)
class OpenSlotKey(Key):
    """An open slot of a stream's assembler on one ``reports`` partition."""

    stream: str
    partition: int
    slot: int


@dataclass(frozen=True)
class PartialKey(Key):
    """A closed slot's partial histogram from one ``reports`` partition, waiting for M1."""

    stream: str
    slot: int
    partition: int


@dataclass(frozen=True)
class ReleaseKey(Key):
    """The release and audit record M2 emitted for a slot."""

    tag: ClassVar[str] = "release"
    stream: str
    slot: int


@dataclass(frozen=True)
class StepOutputKey(Key):
    """What M2 emitted for one local-model step.

    >>> StepOutputKey("taxi", StepKey(7, "support", 2)).encode()
    'taxi/step/7:support:2'
    """

    tag: ClassVar[str] = "step"
    stream: str
    step: StepKey

    @property
    def slot(self) -> int:
        return self.step.slot


@dataclass(frozen=True)
class MechanismPartKey(Key):
    """A part of M2's mechanism state, named by the digest of its bytes."""

    tag: ClassVar[str] = "part"
    stream: str
    digest: str


@dataclass(frozen=True)
class RoundRequestKey(Key):
    """A round's request, held by the collector in a key of its own: written once, while each
    message of reports rewrites the round.

    >>> RoundRequestKey("taxi", RoundKey(3, 1)).encode()
    'taxi/request/3:1'
    """

    tag: ClassVar[str] = "request"
    stream: str
    round: RoundKey


@dataclass(frozen=True)
class EarlyReportsKey(Key):
    """A message of reports that arrived before its round's request, by the offset it came at.

    >>> EarlyReportsKey.decode("taxi/early/3:1/1045")
    EarlyReportsKey(stream='taxi', round=RoundKey(slot=3, phase=1), offset=1045)
    """

    tag: ClassVar[str] = "early"
    stream: str
    round: RoundKey
    offset: int


@dataclass(frozen=True)
class QueryEntryKey(Key):
    """A slot's entry in the query index's log."""

    stream: str
    slot: int


@dataclass(frozen=True)
class QueryHeadKey(Key):
    """The query index's position in a stream."""

    tag: ClassVar[str] = "head"
    stream: str
