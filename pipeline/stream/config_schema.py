"""The one definition of what a stream configuration may say: typed fields, per mechanism.

Every setting is a :class:`Field` of a kind (boolean, integer, number, text, choice, table, ...)
with its range. The config loader (:mod:`wevent.stream.config`) checks a config against these
tables, and the Helm chart's ``values.schema.json`` is generated from the same tables
(:mod:`wevent.stream.helm_schema`), so the two cannot say different things.

Options are per mechanism (:data:`MECHANISMS`): each mechanism lists the options it takes, and an
option another mechanism takes is an error, never silently ignored. A few options are the stream
layer's own rather than the mechanism's (:attr:`Option.stream_level`): the devices' ``block_size``,
the collector's ``deadline_seconds`` and a personalized stream's ``requirements``.

>>> MECHANISMS["ba"].model, sorted(MECHANISMS["ba"].options)
('central', ['budget_shift', 'clamp_round', 'force_first_publish', 'noise'])
>>> BOOLEAN.check("false", "options.budget_shift")
Traceback (most recent call last):
...
wevent.stream.config_kinds.SchemaError: options.budget_shift must be a boolean (true or false), got 'false'
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any

from ..core.validation import MIN_EPSILON
from .config_kinds import (Boolean, ByType, Choice, Field, Integer, Kind, Number, PerMechanism, SchemaError, Table,
                           Text, TextList, Time, check_table, show, table_json_schema)
from .kafka_properties import PROPERTIES_FILE_ENV, SECRET_PATTERN, is_secret

__all__ = ["Option", "MechanismSchema", "MECHANISMS", "MODELS", "STREAM_FIELDS", "APP_FIELDS", "check_options",
           "config_json_schema"]

MODELS = ("central", "local", "personalized")

# --- kinds the options share (config_kinds has every kind) -----------------------------------------
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
