"""The one definition of what a stream configuration may say: typed fields, per mechanism.

Every setting is a :class:`Field` of a kind (boolean, integer, number, text, choice, table, ...)
with its range. The config loader (:mod:`wevent.stream.config`) checks a config against these
tables, and the Helm chart's ``values.schema.json`` is generated from the same tables
(:mod:`wevent.stream.helm_schema`), so the two cannot say different things.

Options are per mechanism (:func:`mechanism_schema`), made from the options each mechanism class
declares (:mod:`wevent.core.options`): a mechanism registered in the core is a mechanism a stream
may name, with its options, and an option another mechanism takes is an error, never silently
ignored. A few options are the stream layer's own rather than the mechanism's, declared here
(:data:`STREAM_LEVEL`): the devices' ``block_size``, the collector's ``deadline_seconds`` and a
personalized stream's ``requirements``; ``noise`` has the stream's own words (:data:`STREAM_WORDS`),
and an option that breaks a mechanism's guarantee is refused.

>>> schema = mechanism_schema("ba")
>>> schema.model, sorted(schema.options)
('central', ['budget_shift', 'clamp_round', 'force_first_publish', 'noise'])
>>> BOOLEAN.check("false", "options.budget_shift")
Traceback (most recent call last):
...
wevent.stream.config_kinds.SchemaError: options.budget_shift must be a boolean (true or false), got 'false'

What the config says, and how it is checked
-------------------------------------------

Options are the mechanisms' own keyword arguments, declared once, on each mechanism class
(`OPTIONS`, `pipeline/core/options.py`): the config's schema, the Helm chart's values schema, the
flags of `wevent simulate` (`--budget-shift`, `--cutoff`, ...) and README's table are made from
those declarations, so a new mechanism class brings its options everywhere. A personalized
stream's requirements are a CSV of `user,w,epsilon` lines, or generation settings (the papers'
mixes).

Every mechanism the core registers is a stream mechanism. The central ones of the benchmark of
Schäler et al. (FAST_w, RescueDP, DSAT_w, PeGaSus, AdaPub, BD and BA with grouping) run on M1 and
M2 as BD and BA do, with releases equal to `wevent simulate`'s: M1 measures where the mechanism has
a dissimilarity (one per group of bins for the grouped ones, whose partition M1 moves with the
releases as M2 does), and M2 runs the rest of the slot (`pipeline/stream/agents/central.py` says
how each maps onto them). `wevent bench crash --mechanism NAME` runs crash trials of any of them.

The config is checked once, when it is loaded, against one typed definition
(`pipeline/stream/config_schema.py`, over the kinds of values of `config_kinds.py`): every field and
every mechanism's own options, with their
types and ranges. `budget_shift = "false"` is an error, not a true value; numbers must be finite
and in range; an option the mechanism does not take is refused rather than ignored; stream names
are letters, digits, `.`, `_` and `-` (at most 100). `block_size` and `deadline_seconds` belong
to the devices and the collector of a local stream; `noise` (`discrete`, or `laplace-fp-unsafe`
for the papers' floating-point sampler, which leaks: see the threat model in :mod:`wevent.stream`; plain `laplace` is
refused with a line saying so) applies to the central and personalized mechanisms.
`artifact_compat_nonprivate` is refused in a stream config: it breaks the window guarantee (it
stays in `wevent simulate` for comparisons). Every
problem, including an unreadable, binary, deeply nested or malformed file, is one line naming the
stream and the field, and the worker does not start. The Helm chart's `values.schema.json` is
generated from the same definition (`python -m wevent.stream.helm_schema
helm/wevent/values.schema.json`, and a test keeps them equal), so `helm install` refuses what a
worker would refuse.

A stream's first watermark counts from its `start`: a replay resumed with `--from-slot` into a
stream with no state must stay within `max_watermark_jump_slots`, or raise it.

A `query` index comes in three modes:

- mode `A` indexes the releases and costs nothing;
- mode `B` runs RTP_DMM on the slot's raw counts with its own `epsilon`, which is taken out of the
  stream's budget: the mechanism gets `epsilon - query.epsilon`, and the audit checks the sum;
- mode `C` combines both.

Range queries over the releases of a local-model stream report the oracle's own error: a fresh
release is the estimate from the `n2` reports that actually came, at `eps2`, so its variance is
the oracle's V(eps2, n2); a repeated release keeps the error of the one it repeats. LP-RescueDP
streams cannot be indexed (each release is filtered into the previous one, so its error is not its
own), and a `query` on one is refused when the config is loaded.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, cast

from ..core import options as core_options
from ..core.registry import MODELS, mechanisms
from ..core.validation import MIN_EPSILON
from .config_kinds import (Boolean, ByType, Choice, Field, Integer, Kind, Number, PerMechanism, SchemaError, Table,
                           Text, TextList, Time, check_table, show, table_json_schema)
from .kafka_properties import PROPERTIES_FILE_ENV, SECRET_PATTERN, is_secret

__all__ = ["Option", "MechanismSchema", "mechanism_schema", "mechanism_schemas", "MODELS", "STREAM_FIELDS",
           "APP_FIELDS", "check_options", "config_json_schema"]

# --- kinds the options share (config_kinds has every kind) -----------------------------------------
BOOLEAN = Boolean()
POSITIVE = Number(0, open_low=True)
PATH = Text(4096)


# --- the options of each mechanism ----------------------------------------------------------------
@dataclass(frozen=True)
class Option(Field):
    """An option of a stream: a mechanism's, or (``stream_level``) one the stream layer reads itself;
    ``example`` is a value it takes (other than its default)."""

    stream_level: bool = False
    example: Any = None


def stream_option(declared: core_options.Option) -> Option:
    """A mechanism's declared option as a stream takes it: its kind, range and meaning."""
    kind: Kind
    if declared.kind == "boolean":
        kind = BOOLEAN
    elif declared.kind == "integer":
        # Option.integer takes whole bounds only
        kind = Integer(cast(int | None, declared.minimum), cast(int | None, declared.maximum))
    elif declared.kind == "number":
        kind = Number(declared.minimum, declared.maximum, declared.open_low, declared.open_high)
    else:
        kind = Choice(declared.choices)
    return Option(kind, declared.doc, example=declared.example)


class NoiseChoice(Choice):
    """The noise kind, named for what it is: ``laplace-fp-unsafe`` is the core's floating-point ``laplace``."""

    def check(self, value, name):
        if value == "laplace":
            raise SchemaError(f"{name} 'laplace' is refused in a stream: floating-point Laplace noise leaks the "
                              "released values through its low-order bits; write 'laplace-fp-unsafe' to accept "
                              "that, or 'discrete'")
        return super().check(value, name)


# An option a stream names in its own words: the core's floating-point sampler is `laplace-fp-unsafe` here.
STREAM_WORDS = {
    "noise": Option(NoiseChoice(("discrete", "laplace-fp-unsafe")), "noise distribution of the releases: discrete "
                    "(exact, the default) or laplace-fp-unsafe (the papers' floating-point Laplace, which leaks)",
                    example="laplace-fp-unsafe"),
}
REQUIREMENT_SETTINGS = Table({
    "mix": Field(Choice(("groups", "per-user", "two-type-epsilon", "two-type-window")), "the papers' requirement mix"),
    "epsilon": Field(Number(MIN_EPSILON, 100), "the strictest epsilon the mix is tied to"),
    "window": Field(Integer(1, 2**20), "the strictest window the mix is tied to"),
    "groups": Field(Integer(1, 2**20), "groups of users drawing alike (mix groups)"),
    "share": Field(Number(0, 1), "share of relaxed users (two-type mixes)"),
    "seed": Field(Integer(0, 2**63 - 1), "seed of the draws"),
})
# The stream layer's own options, by model: what the devices, the collector and the requirements read.
STREAM_LEVEL: dict[str, dict[str, Option]] = {
    "central": {},
    "local": {
        "block_size": Option(Integer(1, 2**24), "users per device block (the devices' keystream unit)",
                             stream_level=True, example=16),
        "deadline_seconds": Option(Number(0, 86400, open_low=True), "how long the collector waits for the users "
                                   "asked in one phase", stream_level=True, example=5.0),
    },
    "personalized": {
        "requirements": Option(ByType(((str, PATH), (dict, REQUIREMENT_SETTINGS)), "a CSV file of user,w,epsilon "
                                      "lines or a table of generation settings (mix, epsilon, window, groups, share, "
                                      "seed)"), "every user's (w_i, eps_i): a CSV file or generation settings",
                               required=True, stream_level=True,
                               example={"mix": "groups", "epsilon": 0.6, "window": 12, "seed": 1}),
    },
}
REFUSED = "it breaks the window guarantee (for `wevent simulate` only)"  # why a non-private option is refused


@dataclass(frozen=True)
class MechanismSchema:
    """What a stream of one mechanism may say: its model, its options, and the options it refuses (by name)."""

    model: str
    options: dict[str, Option] = field(default_factory=dict)
    refused: frozenset[str] = frozenset()


def mechanism_schema(name: str) -> MechanismSchema:
    """The schema of the registered mechanism ``name``: its declared options in the stream's words, then
    the stream layer's own options of its model."""
    cls = mechanisms()[name]
    declared = core_options.options_of(cls)
    options = {k: STREAM_WORDS.get(k, stream_option(o)) for k, o in declared.items() if not o.nonprivate}
    refused = frozenset(k for k, o in declared.items() if o.nonprivate)
    return MechanismSchema(cls.model, {**options, **STREAM_LEVEL[cls.model]}, refused)


def mechanism_schemas() -> dict[str, MechanismSchema]:
    """Every registered mechanism's schema, by name (in alphabetical order)."""
    return {name: mechanism_schema(name) for name in sorted(mechanisms())}


class MechanismName(Kind):
    """The name of a registered mechanism (the registry is read when a config is checked)."""

    def check(self, value, name):
        names = sorted(mechanisms())
        if not isinstance(value, str) or value not in names:
            raise SchemaError(f"unknown {name} {show(value)}; choose one of {', '.join(names)}")
        return value

    def json_schema(self):
        return {"enum": sorted(mechanisms())}


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
    "mechanism": Field(MechanismName(), "the mechanism (its model must be the stream's)", required=True),
    "epsilon": Field(Number(MIN_EPSILON, 100), "the budget of every window (not for personalized streams)"),
    "window": Field(Integer(1, 2**20), "w, in slots (not for personalized streams)"),
    "domain": Field(Integer(1, 2**20), "d: values are 0..d-1", required=True),
    "users": Field(Integer(1, 2**32), "the population: user indices are 0..users-1", required=True),
    "slot_seconds": Field(Number(0.001, 1e9), "the slot length", required=True),
    "start": Field(Time(), "the start of slot 1 (ISO 8601 or epoch seconds)", required=True),
    "lateness_seconds": Field(Number(0, 1e9), "how long a slot stays open after its end"),
    "max_watermark_jump_slots": Field(Integer(1, 10_000), "how many slots past the closed ones a watermark may "
                                      "be (default 60): a larger jump is a clock error or a forgery"),
    "idle_producer_seconds": Field(Number(0, 1e9), "event time by which a producer may trail the partition's most "
                                   "advanced one before it stops holding the clock back (default: 10 slots, and at "
                                   "most max_watermark_jump_slots - 1)"),
    "max_slots_ahead": Field(Integer(1, 10_000), "how many slots past the closed ones (beyond the lateness) a "
                             "report may be (default 100): each is a table key of one slot's counts"),
    "oracle": Field(Choice(("ada", "grr", "oue", "hm")), "the frequency oracle (local streams only)"),
    "options": Field(PerMechanism(), "the mechanism's options"),
    "labels": Field(TextList(Text(200), 2**20), "a name for each value"),
    "query": Field(QUERY, "decayed range queries over the stream"),
}
class StreamList(Kind):
    """The config's ``streams``: a non-empty list, each checked by the loader with its index."""

    def check(self, value, name):
        if not isinstance(value, list) or not value:
            raise SchemaError("the config declares no `streams`: it needs a non-empty list of them")
        return value

    def json_schema(self):
        return {"type": "array", "minItems": 1, "items": stream_json_schema()}


PROPERTY_NAME = Text(200, r"[A-Za-z0-9][A-Za-z0-9._-]*", "a Kafka property name (letters, digits, '.', '_', '-')")
PROPERTY_VALUE = Text(4096)


class ClientProperties(Kind):
    """Kafka client properties by name (``session.timeout.ms = 45000``): each a string, a number or
    a boolean, and never a secret (:func:`~wevent.stream.kafka_properties.is_secret`), which goes in
    the properties file or a ``WEVENT_KAFKA_*`` variable. Which properties the clients take, and
    which wevent sets itself, is checked when the first client is made
    (:class:`~wevent.stream.kafka_properties.KafkaCredentials`)."""

    def check(self, value, name):
        if not isinstance(value, dict):
            raise SchemaError(f"{name} must be a table/mapping of Kafka client properties, got {show(value)}")
        for key, item in value.items():
            PROPERTY_NAME.check(key, f"{name}: {show(key)}")
            if is_secret(key):
                raise SchemaError(f"{name}.{key} is a secret, never in the config: give it in the Kafka properties "
                                  f"file ({PROPERTIES_FILE_ENV}) or its WEVENT_KAFKA_* variable")
            if isinstance(item, str):
                if item:  # an empty value means something to some properties (no host name check)
                    PROPERTY_VALUE.check(item, f"{name}.{key}")
            elif isinstance(item, bool) or isinstance(item, numbers.Integral):
                pass
            elif not (isinstance(item, numbers.Real) and math.isfinite(item)):
                raise SchemaError(f"{name}.{key} must be a string, a number or a boolean, got {show(item)}")
        return dict(value)

    def json_schema(self):
        return {"type": "object",
                "propertyNames": {**PROPERTY_NAME.json_schema(), "not": {"pattern": SECRET_PATTERN}},
                "additionalProperties": {"type": ["string", "number", "boolean"], "maxLength": 4096}}


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
    "kafka_properties": Field(ClientProperties(), "Kafka client properties of every client, e.g. client.id or "
                              "session.timeout.ms (no secrets: those go in the properties file)"),
    "streams": Field(StreamList(), "the streams", required=True),
}


def check_options(raw, mechanism: str) -> dict[str, Any]:
    """A stream's ``options`` for ``mechanism``: the given ones, typed (no defaults filled in)."""
    schema = mechanism_schema(mechanism)
    if isinstance(raw, dict):
        refused = next((k for k in raw if k in schema.refused), None)
        if refused is not None:
            raise SchemaError(f"options.{refused} is not allowed in a stream: {REFUSED}")
    return check_table(raw, schema.options, "options", extra=f" for mechanism {mechanism}")


# --- JSON Schema (the Helm chart's values.schema.json) -------------------------------------------
def stream_json_schema() -> dict:
    out = table_json_schema(STREAM_FIELDS)
    rules = []
    for name, mechanism in mechanism_schemas().items():
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
    budget below epsilon, ``bound`` with oracle ``hm`` only, ``idle_producer_seconds`` within
    ``max_watermark_jump_slots - 1`` slots) are the loader's alone.
    """
    return table_json_schema(APP_FIELDS)
