"""The one definition of what a stream configuration may say: typed fields, per mechanism.

Every setting is a :class:`Field` of a kind (boolean, integer, number, text, choice, table, ...)
with its range. The config loader (:mod:`wevent.stream.config`) checks a config against these
tables, and the Helm chart's ``values.schema.json`` is generated from the same tables, so the two
cannot say different things::

    python -m wevent.stream.config_schema helm/wevent/values.schema.json

rewrites the ``config`` part of the chart's schema in place, and the parts of the chart's own values
defined here (``kafka``: the protocol, SASL and TLS settings; the extra env and volumes); the rest
of the file is kept as written.

Options are per mechanism (:data:`MECHANISMS`): each mechanism lists the options it takes, and an
option another mechanism takes is an error, never silently ignored. A few options are the stream
layer's own rather than the mechanism's (:attr:`Option.stream_level`): the devices' ``block_size``,
the collector's ``deadline_seconds`` and a personalized stream's ``requirements``.

>>> MECHANISMS["ba"].model, sorted(MECHANISMS["ba"].options)
('central', ['budget_shift', 'clamp_round', 'force_first_publish', 'noise'])
>>> BOOLEAN.check("false", "options.budget_shift")
Traceback (most recent call last):
...
wevent.stream.config_schema.SchemaError: options.budget_shift must be a boolean (true or false), got 'false'
"""

from __future__ import annotations

import datetime as dt
import json
import math
import numbers
import re
import reprlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.validation import MIN_EPSILON, ParameterError

__all__ = ["SchemaError", "Field", "Option", "MechanismSchema", "MECHANISMS", "MODELS", "STREAM_FIELDS", "APP_FIELDS",
           "show", "check_table", "config_json_schema", "helm_values_json_schema", "write_helm_schema",
           "SECURITY_PROTOCOLS", "SASL_MECHANISMS"]

MODELS = ("central", "local", "personalized")


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


def _range_text(low, high, low_open: bool, high_open: bool) -> str:
    """``> 0 and <= 100``: the bounds in words a config's author reads at once."""
    bounds = [f"{'>' if low_open else '>='} {_number(low)}"] if low is not None else []
    if high is not None:
        bounds.append(f"{'<' if high_open else '<='} {_number(high)}")
    return " and ".join(bounds)


def _number(value) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


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
        return _range_text(self.minimum, self.maximum, False, False)

    def json_schema(self):
        out = {"type": "integer"}
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
        return _range_text(self.minimum, self.maximum, self.open_low, self.open_high)

    def json_schema(self):
        out = {"type": "number"}
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


class StreamList(Kind):
    """The config's ``streams``: a non-empty list, each checked by the loader with its index."""

    def check(self, value, name):
        if not isinstance(value, list) or not value:
            raise SchemaError("the config declares no `streams`: it needs a non-empty list of them")
        return value

    def json_schema(self):
        return {"type": "array", "minItems": 1, "items": stream_json_schema()}


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


def check_table(value, fields: dict[str, Field], name: str, extra: str = "") -> dict[str, Any]:
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


def table_json_schema(fields: dict[str, Field]) -> dict:
    out: dict[str, Any] = {"type": "object", "additionalProperties": False,
                           "properties": {k: {"description": f.doc, **f.kind.json_schema()} for k, f in fields.items()}}
    required = [k for k, f in fields.items() if f.required]
    if required:
        out["required"] = required
    return out


BOOLEAN = Boolean()
POSITIVE = Number(0, open_low=True)
FINITE = Number()
SHARE = Number(0, 1, open_low=True, open_high=True)  # strictly between 0 and 1
PATH = Text(4096)


# --- the options of each mechanism ----------------------------------------------------------------
@dataclass(frozen=True)
class Option(Field):
    """A mechanism option; ``stream_level`` ones are for the stream layer, not the constructor."""

    stream_level: bool = False


class NoiseChoice(Choice):
    """The noise kind, named for what it is: ``laplace-fp-unsafe`` is the core's floating-point ``laplace``."""

    def check(self, value, name):
        if value == "laplace":
            raise SchemaError(f"{name} 'laplace' is refused in a stream: floating-point Laplace noise leaks the "
                              "released values through its low-order bits; write 'laplace-fp-unsafe' to accept "
                              "that, or 'discrete'")
        return super().check(value, name)


NOISE = Option(NoiseChoice(("discrete", "laplace-fp-unsafe")), "noise distribution of the releases: discrete "
               "(exact, the default) or laplace-fp-unsafe (the papers' floating-point Laplace, which leaks)")
CENTRAL = {
    "clamp_round": Option(BOOLEAN, "post-process fresh releases to non-negative integers"),
    "noise": NOISE,
}
ADAPTIVE_CENTRAL = {
    **CENTRAL,
    "budget_shift": Option(BOOLEAN, "move dissimilarity budget to publications when d > 2w"),
    "force_first_publish": Option(BOOLEAN, "publish slot 1 whatever the dissimilarity"),
}
REQUIREMENT_SETTINGS = Table({
    "mix": Field(Choice(("groups", "per-user", "two-type-epsilon", "two-type-window")), "the papers' requirement mix"),
    "epsilon": Field(Number(MIN_EPSILON, 100), "the strictest epsilon the mix is tied to"),
    "window": Field(Integer(1, 2**20), "the strictest window the mix is tied to"),
    "groups": Field(Integer(1, 2**20), "groups of users drawing alike (mix groups)"),
    "share": Field(Number(0, 1), "share of relaxed users (two-type mixes)"),
    "seed": Field(Integer(0, 2**63 - 1), "seed of the draws"),
})
PERSONALIZED = {
    "requirements": Option(ByType(((str, PATH), (dict, REQUIREMENT_SETTINGS)), "a CSV file of user,w,epsilon lines "
                                  "or a table of generation settings (mix, epsilon, window, groups, share, seed)"),
                           "every user's (w_i, eps_i): a CSV file or generation settings", required=True,
                           stream_level=True),
    "threshold": Option(Choice(("sqrt-error", "scale")), "what the dissimilarity is compared with"),
    "force_first_publish": Option(BOOLEAN, "publish slot 1 whatever the dissimilarity"),
    "dc_obs_sensitivity": Option(POSITIVE, "sensitivity of the dissimilarity calculation"),
    "clamp_round": CENTRAL["clamp_round"],
    "noise": NOISE,
}
LOCAL = {
    "block_size": Option(Integer(1, 2**24), "users per device block (the devices' keystream unit)", stream_level=True),
    "deadline_seconds": Option(Number(0, 86400, open_low=True), "how long the collector waits for the users asked "
                               "in one phase", stream_level=True),
    "var_mode": Option(Choice(("exact_avg", "paper_literal", "approx")), "the form of the oracles' variance V"),
    "bound": Option(POSITIVE, "the bound B of mean estimation (oracle hm)"),
}
ADAPTIVE_LOCAL = {
    **LOCAL,
    "beta": Option(SHARE, "share of the budget (budget division) or population (population division) for M1"),
    "force_first": Option(BOOLEAN, "publish slot 1 whatever the dissimilarity"),
}
POPULATION = {**ADAPTIVE_LOCAL, "pool": Option(Choice(("floor", "rest")), "the publication pool's rule")}
DSAT = {  # the rate controller of LB-DSAT_w and LP-DSAT_w
    "cutoff": Option(Integer(1, 2**20), "target publications per window C (below w)"),
    "threshold": Option(Number(0, 2), "initial threshold T"),
    "tolerance": Option(POSITIVE, "tolerance sigma of the publication rate"),
    "gain": Option(FINITE, "controller gain theta"),
    "rate_denominator": Option(Choice(("window", "slot")), "the publication rate divides by min(t, w) or t"),
}
RESCUE = {  # the sampling and filter of LB-RescueDP and LP-RescueDP
    **LOCAL,
    "sample_share": Option(POSITIVE, "phi: the sampling share's growth"),
    "kp": Option(FINITE, "PID proportional gain"),
    "ki": Option(FINITE, "PID integral gain"),
    "kd": Option(FINITE, "PID derivative gain"),
    "integral_window": Option(Integer(1, 2**20), "pi_i: feedback errors in the integral term"),
    "interval_gain": Option(FINITE, "theta: how fast the sampling interval moves"),
    "process_noise": Option(Number(0), "Q: the Kalman filter's process noise"),
    "initial_covariance": Option(POSITIVE, "P0: the Kalman filter's initial covariance"),
}

PID = {  # the feedback controller FAST_w, RescueDP and AdaPub share
    "kp": RESCUE["kp"], "ki": RESCUE["ki"], "kd": RESCUE["kd"],
    "integral_window": Option(Integer(1, 2**20), "feedback errors in the PID's integral term"),
}
GROUPED = {  # BD and BA with bins grouped
    **ADAPTIVE_CENTRAL,
    "groups": Option(Integer(1, 10**6), "groups of bins (default: max(1, d // 500))"),
    "period": Option(Integer(1, 2**20), "slots between two regroupings"),
}
SMOOTHED = {**CENTRAL, "max_group": Option(Integer(1, 2**16), "the most slots one group of releases spans")}


@dataclass(frozen=True)
class MechanismSchema:
    model: str
    options: dict[str, Option] = field(default_factory=dict)


MECHANISMS: dict[str, MechanismSchema] = {
    "uniform": MechanismSchema("central", CENTRAL),
    "sample": MechanismSchema("central", CENTRAL),
    "bd": MechanismSchema("central", ADAPTIVE_CENTRAL),
    "ba": MechanismSchema("central", ADAPTIVE_CENTRAL),
    "pbd": MechanismSchema("personalized", {
        **PERSONALIZED,
        "lookback": Option(Choice(("paper", "artifact")), "slots of past publications subtracted: w-1 or w")}),
    "pba": MechanismSchema("personalized", PERSONALIZED),
    "bd-grouped": MechanismSchema("central", GROUPED),
    "ba-grouped": MechanismSchema("central", GROUPED),
    "fast-w": MechanismSchema("central", {
        **CENTRAL, **PID,
        "sample_ratio": Option(Number(0, 1, open_low=True), "r: the share of a window's slots sampled at most"),
        "interval_gain": Option(FINITE, "theta: how fast the sampling interval moves"),
        "error_target": Option(POSITIVE, "xi: the feedback error the controller aims at"),
        "process_noise": Option(Number(0), "Q: the Kalman filter's process noise"),
        "measurement_noise": Option(POSITIVE, "R: the Kalman filter's measurement noise"),
        "initial_covariance": Option(POSITIVE, "P0: the Kalman filter's initial covariance"),
    }),
    "rescuedp": MechanismSchema("central", {
        **CENTRAL, **PID,
        "sample_share": Option(POSITIVE, "phi: the sampling share's growth"),
        "max_share": Option(Number(0, 1, open_low=True), "p_max: the largest share of the remaining budget"),
        "max_budget": Option(Number(MIN_EPSILON, 100), "e_max: the largest budget of one sample (default: eps / 5)"),
        "interval_gain": Option(FINITE, "theta: how fast the sampling interval moves"),
        "dynamic_grouping": Option(BOOLEAN, "group bins that move together (RescueDP-MD) or not (1D per bin)"),
        "group_limit": Option(POSITIVE, "tau: the largest noisy count a group may sum"),
        "min_correlation": Option(Number(-1, 1), "the least correlation of two bins in one group"),
        "max_difference": Option(Number(0), "the largest difference of two bins' releases in one group"),
        "history": Option(Integer(2, 2**16), "kappa: releases the grouping compares"),
        "process_noise": Option(Number(0), "Q: the Kalman filter's process noise"),
        "initial_covariance": Option(POSITIVE, "P0: the Kalman filter's initial covariance"),
    }),
    "dsat": MechanismSchema("central", {
        **ADAPTIVE_CENTRAL,
        "cutoff": Option(Integer(1, 2**20), "C: target publications per window (default: ceil(0.15 w))"),
        "threshold": Option(Number(0), "T: the initial threshold in counts (default: 1 / eps_2)"),
        "tolerance": DSAT["tolerance"],
        "gain": Option(FINITE, "theta: the controller's gain (default: T / 10)"),
        "threshold_cap": Option(Number(0), "the largest threshold (default: 2 T)"),
        "rate_denominator": DSAT["rate_denominator"],
    }),
    "pegasus": MechanismSchema("central", {
        **SMOOTHED,
        "grouper_share": Option(SHARE, "the share of epsilon the grouper spends"),
        "threshold": Option(POSITIVE, "theta: the grouper's deviation threshold (default: 5 / eps_g)"),
        "smoother": Option(Choice(("median", "mean", "shrinkage")), "how a group's releases are smoothed"),
    }),
    "adapub": MechanismSchema("central", {
        **SMOOTHED, **PID,
        "grouping_share": Option(SHARE, "the share of epsilon the grouping in time spends"),
        "pivots": Option(Integer(0, 2**16), "g: pivots grouping the bins (0: no grouping of bins)"),
        "error_floor": Option(POSITIVE, "gamma: the least error the feedback assumes"),
    }),
    "lbu": MechanismSchema("local", LOCAL),
    "lsp": MechanismSchema("local", LOCAL),
    "lpu": MechanismSchema("local", LOCAL),
    "lbd": MechanismSchema("local", ADAPTIVE_LOCAL),
    "lba": MechanismSchema("local", ADAPTIVE_LOCAL),
    "lpd": MechanismSchema("local", {**POPULATION, "u_min": Option(Integer(1, 2**32), "fewest users a publication asks")}),
    "lpa": MechanismSchema("local", POPULATION),
    "lb-dsat": MechanismSchema("local", {**ADAPTIVE_LOCAL, **DSAT}),
    "lp-dsat": MechanismSchema("local", {**POPULATION, **DSAT}),
    "lb-rescuedp": MechanismSchema("local", {
        **RESCUE, "max_share": Option(Number(0, 1, open_low=True), "p_max: the largest share of the remaining budget")}),
    "lp-rescuedp": MechanismSchema("local", {
        **RESCUE,
        "max_share": Option(Number(0, 1, open_low=True), "p_max: the largest share of available users sampled"),
        "max_users": Option(Integer(1, 2**32), "n_max: the most users one sample asks"),
    }),
}

# Constructor keywords that are not options of a stream, with why (the message says it).
REFUSED_OPTIONS = {
    "artifact_compat_nonprivate": "it reproduces the authors' code, which breaks the window guarantee "
                                  "(for `wevent simulate` only)",
}


# --- the stream and the app ---------------------------------------------------------------------
# Names go into table keys ("stream/slot"), Kafka record keys, topic-safe ids and metric labels.
NAME = Text(100, r"[A-Za-z0-9][A-Za-z0-9._-]*", "1 to 100 letters, digits, '.', '_' or '-' starting with a "
            "letter or digit (without '/')")
QUERY = Table({
    "mode": Field(Choice(("A", "B", "C")), "A: over the releases; B: RTP_DMM on raw counts; C: both"),
    "window": Field(Integer(1, 2**24), "the sliding window of the range queries, in slots"),
    "decay": Field(Number(0, 1, open_low=True), "the decay factor in (0, 1]"),
    "epsilon": Field(Number(MIN_EPSILON, 100), "RTP_DMM's budget (modes B and C), taken out of the stream's"),
    "lambda_variant": Field(Choice(("none", "paper", "cai")), "the matrix mechanism's lambda variant"),
})
STREAM_FIELDS: dict[str, Field] = {
    "name": Field(NAME, "the stream's name (keys, topics' records, metrics labels)", required=True),
    "model": Field(Choice(MODELS), "central, local or personalized", required=True),
    "mechanism": Field(Choice(tuple(MECHANISMS), catalogue=True), "the mechanism (its model must be the stream's)",
                       required=True),
    "epsilon": Field(Number(MIN_EPSILON, 100), "the budget of every window (not for personalized streams)"),
    "window": Field(Integer(1, 2**20), "w, in slots (not for personalized streams)"),
    "domain": Field(Integer(1, 2**20), "d: values are 0..d-1", required=True),
    "users": Field(Integer(1, 2**32), "the population: user indices are 0..users-1", required=True),
    "slot_seconds": Field(Number(0.001, 1e9), "the slot length", required=True),
    "start": Field(Time(), "the start of slot 1 (ISO 8601 or epoch seconds)", required=True),
    "lateness_seconds": Field(Number(0, 1e9), "how long a slot stays open after its end"),
    "max_watermark_jump_slots": Field(Integer(1, 10_000), "the most slots one watermark may close at once "
                                      "(default 60): a larger jump is a clock error or a forgery"),
    "max_slots_ahead": Field(Integer(1, 10_000), "how many slots past the closed ones (beyond the lateness) a "
                             "report may be (default 100): each is a table key of one slot's counts"),
    "oracle": Field(Choice(("ada", "grr", "oue", "hm")), "the frequency oracle (local streams only)"),
    "options": Field(PerMechanism(), "the mechanism's options"),
    "labels": Field(TextList(Text(200), 2**20), "a name for each value"),
    "query": Field(QUERY, "decayed range queries over the stream"),
}
PROCESSING_GUARANTEES = ("at_least_once", "exactly_once")
APP_FIELDS: dict[str, Field] = {
    "app": Field(NAME, "the Faust app id: consumer group and table topics"),
    "report_partitions": Field(Integer(1, 10000), "partitions of the reports topic"),
    "stream_partitions": Field(Integer(1, 10000), "partitions of the stream-keyed topics"),
    "seed": Field(Integer(0, 2**63 - 1), "reproducible noise (experiments); production sets WEVENT_NOISE_KEY"),
    "processing_guarantee": Field(Choice(PROCESSING_GUARANTEES), "at_least_once (default; any broker) or "
                                  "exactly_once (Kafka transactions: Apache Kafka, not the embedded tansu)"),
    "replication_factor": Field(Integer(1, 100), "copies of every topic the app creates, changelogs included "
                                "(default 1; 3 on a production cluster)"),
    "streams": Field(StreamList(), "the streams", required=True),
}


def check_options(raw, mechanism: str) -> dict[str, Any]:
    """A stream's ``options`` for ``mechanism``: the given ones, typed (no defaults filled in)."""
    options = MECHANISMS[mechanism].options
    if isinstance(raw, dict):
        refused = next((k for k in raw if k in REFUSED_OPTIONS), None)
        if refused is not None:
            raise SchemaError(f"options.{refused} is not allowed in a stream: {REFUSED_OPTIONS[refused]}")
    return check_table(raw, options, "options", extra=f" for mechanism {mechanism}")


# --- JSON Schema (the Helm chart's values.schema.json) -------------------------------------------
def stream_json_schema() -> dict:
    out = table_json_schema(STREAM_FIELDS)
    rules = []
    for name, mechanism in MECHANISMS.items():
        then: dict[str, Any] = {"properties": {"model": {"const": mechanism.model},
                                               "options": table_json_schema(mechanism.options)}}
        if mechanism.model == "personalized":  # each user has their own (w_i, eps_i)
            then["required"] = ["options"]
            then["not"] = {"anyOf": [{"required": ["epsilon"]}, {"required": ["window"]}]}
        else:
            then["required"] = ["epsilon", "window"]
        if mechanism.model != "local":
            then.setdefault("not", {"anyOf": []})["anyOf"].append({"required": ["oracle"]})
        rules.append({"if": {"properties": {"mechanism": {"const": name}}, "required": ["mechanism"]}, "then": then})
    out["allOf"] = rules
    return out


def config_json_schema() -> dict:
    """JSON Schema (draft-07) of a stream configuration.

    It holds every field's type and range and, per mechanism, its model and options; the few
    rules across fields beyond those (a query index of mode B/C on central streams only, its
    budget below epsilon, ``bound`` with oracle ``hm`` only) are the loader's alone.
    """
    return table_json_schema(APP_FIELDS)


# --- the chart's Kafka settings and extra env/volumes ---------------------------------------------
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# Kubernetes' names of Secrets (DNS subdomains) and of their entries; empty means "not set".
_SECRET_NAME = {"type": "string", "maxLength": 253,
                "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$"}
_SECRET_KEY = {"type": "string", "maxLength": 253, "pattern": r"^[-._a-zA-Z0-9]*$"}


def _values(properties: dict[str, tuple[str, dict]], required: tuple[str, ...] = ()) -> dict:
    """An object of the chart's values with known keys only: a misspelt key (``securityprotocol``)
    would otherwise be ignored and leave the default in force."""
    out: dict[str, Any] = {"type": "object", "additionalProperties": False,
                           "properties": {k: {"description": doc, **schema} for k, (doc, schema) in properties.items()}}
    if required:
        out["required"] = list(required)
    return out


def _kubernetes_list(doc: str, *required: str) -> dict:
    """A list of Kubernetes objects (EnvVar, Volume, ...): the API server checks them whole; the
    schema checks that each is an object with its identifying fields."""
    return {"description": doc, "type": "array",
            "items": {"type": "object", "required": list(required),
                      "properties": {k: {"type": "string", "minLength": 1} for k in required}}}


def helm_values_json_schema() -> dict:
    """JSON Schema (draft-07) of the chart's values defined here, by value name."""
    kafka = _values({
        "bootstrap": ("bootstrap servers, host:port[,host:port...]",
                      {"type": "string", "pattern": r"^[^,:\s]+:[0-9]+(,[^,:\s]+:[0-9]+)*$"}),
        "securityProtocol": ("WEVENT_KAFKA_SECURITY_PROTOCOL; empty: SASL_SSL with sasl.username, else PLAINTEXT",
                             {"enum": ["", *SECURITY_PROTOCOLS]}),
        "sasl": ("SASL credentials (protocols SASL_PLAINTEXT and SASL_SSL)", _values({
            "mechanism": ("WEVENT_KAFKA_SASL_MECHANISM", {"enum": list(SASL_MECHANISMS)}),
            "username": ("the user; empty: no SASL", {"type": "string"}),
            "password": ("the password, stored in the chart's Secret", {"type": "string"}),
            "existingSecret": ("a Secret with the entries kafka-username and kafka-password", _SECRET_NAME),
        })),
        "tls": ("TLS files (protocols SSL and SASL_SSL), mounted from an existing Secret", _values({
            "existingSecret": ("a Secret with ca.crt and/or tls.crt and tls.key", _SECRET_NAME),
            "ca": ("mount ca.crt, the brokers' CA bundle (WEVENT_KAFKA_SSL_CAFILE)", {"type": "boolean"}),
            "clientCertificate": ("mount tls.crt and tls.key for mutual TLS (WEVENT_KAFKA_SSL_CERTFILE, "
                                  "WEVENT_KAFKA_SSL_KEYFILE)", {"type": "boolean"}),
            "keyPasswordKey": ("the entry of existingSecret with tls.key's password (WEVENT_KAFKA_SSL_KEY_PASSWORD)",
                               _SECRET_KEY),
        })),
    }, required=("bootstrap",))
    return {
        "kafka": {"description": "How the workers reach Kafka (generated by pipeline/stream/config_schema.py: "
                                 "do not edit)", **kafka},
        "extraEnv": _kubernetes_list("extra environment variables of the worker (EnvVar)", "name"),
        "extraEnvFrom": {"description": "extra sources of environment variables (EnvFromSource)", "type": "array",
                         "items": {"type": "object"}},
        "extraVolumes": _kubernetes_list("extra volumes of the pod (Volume)", "name"),
        "extraVolumeMounts": _kubernetes_list("extra mounts of the worker (VolumeMount)", "name", "mountPath"),
    }


def helm_schema_text(current: str) -> str:
    """The chart's values.schema.json text with its generated properties made afresh."""
    schema = json.loads(current)
    schema["properties"]["config"] = {
        "description": "The stream configuration (generated by pipeline/stream/config_schema.py: do not edit)",
        **config_json_schema(),
    }
    schema["properties"].update(helm_values_json_schema())
    return json.dumps(schema, indent=2) + "\n"


def write_helm_schema(path: str | Path) -> None:
    path = Path(path)
    path.write_text(helm_schema_text(path.read_text()))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m wevent.stream.config_schema helm/wevent/values.schema.json")
    write_helm_schema(sys.argv[1])
