"""Profiles: named, frozen settings of a feed, every one of which can be overridden.

A profile is a frozen dataclass whose overridable fields are declared with :func:`setting` (a
default, a help text, and how to read the value from a command-line string); ``wevent replay``
turns each into an option. :func:`resolve` picks a named profile and applies overrides; the
dataclass's ``__post_init__`` validates the result.

>>> from wevent.producers.tdrive import PROFILES
>>> resolve(PROFILES, "personalized", slot_seconds=600).slot_seconds
600
>>> resolve(PROFILES, "personalized", slot_seconds=None).slot_seconds  # None: keep the profile's
60.0
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, TypeVar

from wevent.core.validation import ParameterError

from .preprocess import ABSENT_POLICIES, check_absent, check_slot_seconds

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["setting", "settings_of", "resolve", "positive_int", "SlotSettings"]

P = TypeVar("P", bound="DataclassInstance")
T = TypeVar("T")


def setting(default: T, help: str, parse: Callable[[str], object] | None = None, metavar: str | None = None,
            choices: tuple[str, ...] | None = None) -> T:
    """A profile field that can be overridden; ``parse`` reads it from a command-line string."""
    return dataclasses.field(default=default, metadata={"help": help, "parse": parse or type(default),
                                                        "metavar": metavar, "choices": choices})


def settings_of(profile_cls: type[DataclassInstance]) -> list[dataclasses.Field[Any]]:
    """The overridable fields of a profile class, in declaration order."""
    return [f for f in dataclasses.fields(profile_cls) if "help" in f.metadata]


def resolve(profiles: Mapping[str, P], name: str, **overrides: object) -> P:
    """Profile ``name`` with the given fields replaced (``None`` keeps the profile's value)."""
    try:
        base = profiles[name]
    except KeyError:
        raise ParameterError(f"unknown profile {name!r}; choose one of {', '.join(profiles)}") from None
    known = {f.name for f in settings_of(type(base))}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ParameterError(f"profile {name!r} has no setting {unknown[0]!r}; settings: {', '.join(sorted(known))}")
    return dataclasses.replace(base, **{k: v for k, v in overrides.items() if v is not None})


def positive_int(text: str) -> int:
    """Read a count from the command line (an integer >= 1)."""
    value = int(text)
    if value < 1:
        raise ValueError(f"expected an integer >= 1, got {text!r}")
    return value


@dataclass(frozen=True)
class SlotSettings:
    """Settings every file reader shares: the clock and what a slot without a record holds."""

    description: str = ""
    slot_seconds: float = setting(60.0, "slot length in seconds", float, "SECONDS")
    absent: str = setting("carry-forward", "value of a user without a record in a slot: carry-forward (the "
                          "previous value; the first value before it), category (an extra 'absent' value) or "
                          "none (not counted)", str, "POLICY", ABSENT_POLICIES)
    max_slots: int | None = setting(None, "keep only the first T slots (default: all)", positive_int, "T")

    def __post_init__(self) -> None:
        check_slot_seconds(self.slot_seconds)
        check_absent(self.absent)
        if self.max_slots is not None and self.max_slots < 1:
            raise ParameterError(f"max_slots must be >= 1, got {self.max_slots!r}")
