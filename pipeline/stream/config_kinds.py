"""The kinds of values a config's fields take, and the tables of fields they make.

A :class:`Kind` checks a value (:meth:`Kind.check` returns it, normalised, or raises one
:class:`SchemaError` line naming the field) and says the same in JSON Schema
(:meth:`Kind.json_schema`): boolean, integer, number, text, choice, list of text, time, table,
and a value of one kind per type. A :class:`Field` is a named setting of a kind; :func:`check_table` checks a
table of them, unknown and missing fields included. What a stream configuration may say, field by
field and per mechanism, is :mod:`wevent.stream.config_schema`.

>>> Integer(1, 10).check(11, "window")
Traceback (most recent call last):
...
wevent.stream.config_kinds.SchemaError: window must be >= 1 and <= 10, got 11
"""

from __future__ import annotations

import datetime as dt
import math
import numbers
import re
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.options import range_text
from ..core.validation import ParameterError

__all__ = ["SchemaError", "show", "Kind", "Boolean", "Integer", "Number", "Text", "Choice", "TextList", "Time", "Field",
           "Table", "PerMechanism", "ByType", "check_table", "table_json_schema"]


class SchemaError(ParameterError):
    """A value does not fit its field; the message names the field (the caller adds the stream)."""


_short = reprlib.Repr()
_short.maxstring = _short.maxother = 60
_short.maxlevel = 2
_short.maxlist = _short.maxdict = 4


def show(value) -> str:
    """A bounded ``repr`` for messages: a 100k-character or deeply nested value stays one short line."""
    return _short.repr(value)


# --- kinds of values ------------------------------------------------------------------------------
class Kind:
    """What values a field takes: :meth:`check` returns the value (normalised) or raises SchemaError."""

    def check(self, value, name: str):
        raise NotImplementedError

    def json_schema(self) -> dict:
        raise NotImplementedError


class Boolean(Kind):
    """``true`` or ``false``: never a string or a number (``"false"`` is a non-empty string)."""

    def check(self, value, name):
        if not isinstance(value, bool):
            raise SchemaError(f"{name} must be a boolean (true or false), got {show(value)}")
        return value

    def json_schema(self):
        return {"type": "boolean"}


@dataclass(frozen=True)
class Integer(Kind):
    """A whole number (an int, never a bool, a float or a string) in ``[minimum, maximum]``."""

    minimum: int | None = None
    maximum: int | None = None

    def check(self, value, name):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise SchemaError(f"{name} must be an integer, got {show(value)}")
        value = int(value)
        if (self.minimum is not None and value < self.minimum) or (self.maximum is not None and value > self.maximum):
            raise SchemaError(f"{name} must be {self.range}, got {show(value)}")
        return value

    @property
    def range(self) -> str:
        return range_text(self.minimum, self.maximum, False, False)

    def json_schema(self):
        out: dict[str, Any] = {"type": "integer"}
        if self.minimum is not None:
            out["minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        return out


@dataclass(frozen=True)
class Number(Kind):
    """A finite real number (an int or a float, never a bool or a string) in its range.

    ``minimum``/``maximum`` are inclusive unless ``open_low``/``open_high``.
    """

    minimum: float | None = None
    maximum: float | None = None
    open_low: bool = False
    open_high: bool = False

    def check(self, value, name):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise SchemaError(f"{name} must be a number, got {show(value)}")
        try:
            value = float(value)
        except OverflowError:  # an int beyond floats
            value = math.inf
        if not math.isfinite(value):
            raise SchemaError(f"{name} must be a finite number, got {show(value)}")
        low, high = self.minimum, self.maximum
        if ((low is not None and (value < low or (self.open_low and value == low)))
                or (high is not None and (value > high or (self.open_high and value == high)))):
            raise SchemaError(f"{name} must be {self.range}, got {value:g}")
        return value

    @property
    def range(self) -> str:
        return range_text(self.minimum, self.maximum, self.open_low, self.open_high)

    def json_schema(self):
        out: dict[str, Any] = {"type": "number"}
        if self.minimum is not None:
            out["exclusiveMinimum" if self.open_low else "minimum"] = self.minimum
        if self.maximum is not None:
            out["exclusiveMaximum" if self.open_high else "maximum"] = self.maximum
        return out


@dataclass(frozen=True)
class Text(Kind):
    """A string of 1 to ``max_length`` characters, without control characters (NUL included),
    matching ``pattern`` when there is one (``what`` says in words what the pattern allows)."""

    max_length: int = 200
    pattern: str | None = None
    what: str = ""

    def check(self, value, name):
        if not isinstance(value, str):
            raise SchemaError(f"{name} must be a string, got {show(value)}")
        if not 1 <= len(value) <= self.max_length:
            raise SchemaError(f"{name} must have 1 to {self.max_length} characters, got {len(value)}")
        if self.pattern is not None and not re.fullmatch(self.pattern, value):
            raise SchemaError(f"{name} must be {self.what}, got {show(value)}")
        if _CONTROL.search(value):
            raise SchemaError(f"{name} must not contain control characters, got {show(value)}")
        return value

    def json_schema(self):
        return {"type": "string", "minLength": 1, "maxLength": self.max_length,
                "pattern": f"^(?:{self.pattern})$" if self.pattern else _NO_CONTROL}


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NO_CONTROL = r"^[^\x00-\x1f\x7f]*$"  # RE2 (Helm's schema validator) has no \u escapes


@dataclass(frozen=True)
class Choice(Kind):
    """One of a few strings (``catalogue``: one of many names, where "unknown" says it better)."""

    values: tuple[str, ...]
    catalogue: bool = False

    def check(self, value, name):
        if not isinstance(value, str) or value not in self.values:
            if self.catalogue:
                raise SchemaError(f"unknown {name} {show(value)}; choose one of {', '.join(self.values)}")
            raise SchemaError(f"{name} must be one of {', '.join(self.values)}, got {show(value)}")
        return value

    def json_schema(self):
        return {"enum": list(self.values)}


@dataclass(frozen=True)
class TextList(Kind):
    """A list of at most ``max_items`` strings (kept as a tuple)."""

    item: Text
    max_items: int

    def check(self, value, name):
        if not isinstance(value, (list, tuple)):
            raise SchemaError(f"{name} must be a list of strings, got {show(value)}")
        if len(value) > self.max_items:
            raise SchemaError(f"{name} must have at most {self.max_items} items, got {len(value)}")
        return tuple(self.item.check(v, f"{name}[{i}]") for i, v in enumerate(value))

    def json_schema(self):
        return {"type": "array", "maxItems": self.max_items, "items": self.item.json_schema()}


@dataclass(frozen=True)
class Time(Kind):
    """A point in time: epoch seconds, an ISO 8601 string (``Z`` allowed) or a TOML/YAML datetime.

    Naive times are UTC; the result is epoch seconds in [0, 253402300799] (up to year 9999).
    """

    LATEST = 253402300799

    def check(self, value, name):
        if isinstance(value, str) and len(value) <= 64:
            try:
                value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                raise SchemaError(f"{name} {show(value)} is not ISO 8601 or epoch seconds") from None
        if isinstance(value, dt.datetime):
            value = (value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)).timestamp()
        elif isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise SchemaError(f"{name} must be a time (ISO 8601 or epoch seconds), got {show(value)}")
        return Number(0, self.LATEST).check(value, name)

    def json_schema(self):
        return {"type": ["number", "string"], "minimum": 0, "maximum": self.LATEST, "maxLength": 64}


@dataclass(frozen=True)
class Field:
    """A named setting: its kind, whether it must be given, and what it means."""

    kind: Kind
    doc: str
    required: bool = False


@dataclass(frozen=True)
class Table(Kind):
    """A mapping with known keys only: an unknown key is an error, never ignored."""

    fields: dict[str, Field]

    def check(self, value, name):
        return check_table(value, self.fields, name)

    def json_schema(self):
        return table_json_schema(self.fields)


class PerMechanism(Kind):
    """A stream's ``options``: a mapping, whose keys and values depend on the mechanism
    (:func:`check_options`, and one ``if``/``then`` per mechanism in the JSON Schema)."""

    def check(self, value, name):
        if not isinstance(value, dict):
            raise SchemaError(f"{name} must be a table/mapping, got {show(value)}")
        return value

    def json_schema(self):
        return {"type": "object"}


@dataclass(frozen=True)
class ByType(Kind):
    """One kind per Python type of the value, e.g. a path (a string) or settings (a table)."""

    kinds: tuple[tuple[type, Kind], ...]
    what: str

    def check(self, value, name):
        for base, kind in self.kinds:
            if isinstance(value, base):
                return kind.check(value, name)
        raise SchemaError(f"{name} must be {self.what}, got {show(value)}")

    def json_schema(self):
        return {"anyOf": [kind.json_schema() for _, kind in self.kinds]}


def check_table(value, fields: Mapping[str, Field], name: str, extra: str = "") -> dict[str, Any]:
    """``value`` checked field by field: the given fields only (no defaults are filled in)."""
    where = f"{name}: " if name else ""
    if not isinstance(value, dict):
        raise SchemaError(f"{name or 'the config'} must be a table/mapping, got {show(value)}")
    unknown = [k for k in value if k not in fields]
    if unknown:
        names = ", ".join(show(k) if not isinstance(k, str) or _CONTROL.search(k) or len(k) > 60 else k
                          for k in sorted(unknown, key=str))
        raise SchemaError(f"{where}unknown field(s) {names}{extra}; known: {', '.join(fields)}")
    missing = [k for k, f in fields.items() if f.required and k not in value]
    if missing:
        raise SchemaError(f"{where}missing field(s) {', '.join(missing)}")
    prefix = f"{name}." if name else ""
    return {k: fields[k].kind.check(v, prefix + k) for k, v in value.items()}


def table_json_schema(fields: Mapping[str, Field]) -> dict:
    out: dict[str, Any] = {"type": "object", "additionalProperties": False,
                           "properties": {k: {"description": f.doc, **f.kind.json_schema()} for k, f in fields.items()}}
    required = [k for k, f in fields.items() if f.required]
    if required:
        out["required"] = required
    return out
