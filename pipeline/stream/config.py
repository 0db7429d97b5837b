"""Stream configuration: which streams one app runs, with which mechanism and clock.

A config file (TOML, YAML or JSON) declares the app and its streams::

    app = "wevent"
    report_partitions = 4      # partitions of the `reports` topic (assemblers run in parallel)
    stream_partitions = 2      # partitions of the stream-keyed topics (M1, M2, collector)
    seed = 7                   # reproducible noise; omit and set WEVENT_NOISE_KEY in production
    processing_guarantee = "at_least_once"   # or "exactly_once" (Kafka transactions, not on tansu)
    replication_factor = 1     # copies of each topic the app creates (3 on a production cluster)
    kafka_properties = { "client.id" = "wevent-eu", "session.timeout.ms" = 45000 }   # no secrets here

    [[streams]]
    name = "taxi"
    model = "central"          # central | local | personalized
    mechanism = "ba"
    epsilon = 1.0
    window = 20
    domain = 100               # d: values are 0..d-1
    users = 500                # population: user indices are 0..users-1
    slot_seconds = 60
    start = "2008-02-02T00:00:00Z"   # start of slot 1 (ISO 8601 or epoch seconds)
    lateness_seconds = 0       # how long a slot stays open after its end
    idle_producer_seconds = 600   # how far a producer may trail the others (default: 10 slots)
    options = { budget_shift = false }

A personalized stream (``model = "personalized"``, mechanism ``pbd`` or ``pba``) has no single
epsilon and w: ``options.requirements`` is a CSV file of ``user,w,epsilon`` lines (users are the
stream's user indices) or a table of generation settings, e.g.
``{ mix = "groups", epsilon = 0.6, window = 120, seed = 1 }`` (the generation of Du et al. 2025, Section 5.2).

Options are the mechanism's own, typed and per mechanism, as its class declares them
(:mod:`wevent.stream.config_schema` makes the schema of them): ``budget_shift = "false"`` is an
error, not a true value, and an option the mechanism does not take is an error, not ignored.
Every problem is reported as one :class:`ConfigError` line naming the stream and the field, when
the config is loaded.
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass, field, fields as dataclass_fields
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..core.accounting import Budget
from ..core.registry import mechanisms
from ..core.validation import ParameterError
from .wire.topics import partition_counts
from .config_kinds import SchemaError, check_table, show
from .config_schema import APP_FIELDS, STREAM_FIELDS, STREAM_LEVEL, check_options

__all__ = ["Budget", "ConfigError", "StreamConfig", "AppConfig", "load_config"]

DEFAULT_DEADLINE_SECONDS = 30.0  # how long the collector waits for the users asked in one phase
DEFAULT_MAX_SLOTS_AHEAD = 100
"""How far ahead of a partition's closed slots a report may be, beyond the stream's lateness.

Producers send a slot's reports and then its watermark, so honest reports run ahead of the closed
slots by the lateness plus a device's clock error. Every slot in this horizon is one table key of
at most one slot's counts, so the horizon bounds the keys one assembler partition holds and the
keys one message may touch: a batch reaching further (even one user's 10,000 future reports) has
its excess refused as ``too_far_ahead`` instead of growing the state."""

DEFAULT_IDLE_PRODUCER_SLOTS = 10
"""A stream's default ``idle_producer_seconds``, in slots (and at most ``max_watermark_jump_slots - 1``).

A partition's clock waits for its slowest live producer; one that trails the most advanced by more
than this, in event time, is taken for idle (dead, or stalled) and no longer waited for
(:class:`~wevent.stream.agents.assemble.Assembler`). Producers send a watermark per slot, so the
idleness is counted in slots: ten let an honest producer fall nine slots behind the others (a
later start, a slower region) and hold a stream back by at most ten slots when one dies. It
must stay below ``max_watermark_jump_slots``: the others' watermarks may run at most that many slots
past the closed ones, so a longer idleness would never let them pass a dead producer."""


class ConfigError(ParameterError):
    """The configuration is invalid; the message names the stream and field."""


@dataclass(frozen=True)
class StreamConfig:
    """One stream's settings, checked and typed (:func:`parse_config` is the way to make one).

    ``options`` holds the options the config gave, typed; the mechanism's defaults apply to the
    others. :attr:`mechanism_options` are the mechanism constructor's keywords; ``block_size``,
    ``deadline_seconds`` and ``requirements`` are the stream layer's own.
    """

    name: str
    model: str
    mechanism: str
    epsilon: float | None  # None for personalized streams: every user has their own (w_i, eps_i)
    window: int | None
    domain: int
    users: int
    slot_seconds: float
    start: float
    lateness_seconds: float = 0.0
    max_watermark_jump_slots: int = 60  # producers send a watermark at every slot's end: jumps are 1
    idle_producer_seconds: float | None = None  # None: the default (idle_seconds)
    max_slots_ahead: int = DEFAULT_MAX_SLOTS_AHEAD
    oracle: str = "ada"
    options: dict[str, Any] = field(default_factory=dict)
    labels: tuple[str, ...] = ()
    query: dict[str, Any] | None = None  # decayed range queries (wevent.stream.query_settings)

    @property
    def mechanism_options(self) -> dict[str, Any]:
        """The options for the mechanism's constructor (those given in the config only)."""
        return {k: v for k, v in self.options.items() if k not in STREAM_LEVEL[self.model]}

    @property
    def block_size(self) -> int:
        """Users per device block (local model)."""
        from ..core.local.device_reports import DEFAULT_BLOCK_SIZE  # noqa: PLC0415 - the local model, for its streams

        return self.options.get("block_size", DEFAULT_BLOCK_SIZE)

    @property
    def deadline_seconds(self) -> float:
        """How long the collector waits for the users asked in one phase (local model)."""
        return self.options.get("deadline_seconds", DEFAULT_DEADLINE_SECONDS)

    @property
    def requirements(self) -> str | dict | None:
        """A personalized stream's requirements: a CSV path or generation settings."""
        return self.options.get("requirements")

    @property
    def query_settings(self):
        from .query_settings import QuerySettings  # noqa: PLC0415 - the decayed core, for streams with a query index

        return QuerySettings.parse(self.query, f"stream {self.name!r}") if self.query is not None else None

    @property
    def reserved_epsilon(self) -> float:
        """Budget a Mode B/C query index takes out of every window (0 otherwise)."""
        settings = self.query_settings
        return settings.reserved_epsilon if settings is not None else 0.0

    @cached_property
    def budget(self) -> Budget | None:
        """The stream's window budget and its shares, settled once (None for a personalized stream,
        whose users each have their own): records, metrics and alerts carry it as it is."""
        if self.epsilon is None or self.window is None:  # both or neither: a personalized stream has neither
            return None
        return Budget(self.epsilon, self.window, self.reserved_epsilon)

    @property
    def idle_seconds(self) -> float:
        """How far (event-time seconds) a producer may trail a partition's most advanced producer
        and still hold the partition's clock back: ``idle_producer_seconds``, by default
        :data:`DEFAULT_IDLE_PRODUCER_SLOTS` slots (at most ``max_watermark_jump_slots - 1``)."""
        if self.idle_producer_seconds is not None:
            return self.idle_producer_seconds
        return min(DEFAULT_IDLE_PRODUCER_SLOTS, self.max_watermark_jump_slots - 1) * self.slot_seconds

    # --- the slot clock: slot s covers [start + (s-1) L, start + s L) -------------------------
    def slot_of_ms(self, times_ms: np.ndarray) -> np.ndarray:
        """1-based slot of each event time (ms since epoch); times before the start give slot <= 0."""
        offset = np.asarray(times_ms, dtype=np.int64) - round(self.start * 1000)
        return offset // round(self.slot_seconds * 1000) + 1

    def slot_start(self, slot: int) -> float:
        return self.start + (slot - 1) * self.slot_seconds

    def slot_end(self, slot: int) -> float:
        return self.start + slot * self.slot_seconds

    def closable_through(self, watermark: float) -> int:
        """The last slot whose end plus the allowed lateness is at or before ``watermark``."""
        return math.floor((watermark - self.lateness_seconds - self.start) / self.slot_seconds)


@dataclass(frozen=True)
class AppConfig:
    streams: tuple[StreamConfig, ...]
    app: str = "wevent"
    report_partitions: int = 4
    stream_partitions: int = 2
    seed: int | None = None
    processing_guarantee: str = "at_least_once"
    replication_factor: int = 1
    kafka_properties: dict[str, Any] = field(default_factory=dict)  # Kafka client properties (no secrets)

    def stream(self, name: str) -> StreamConfig | None:
        return self._by_name.get(name)

    def known_stream(self, name: str) -> StreamConfig:
        """The stream ``name`` of a message already routed to it (KeyError for no such stream)."""
        return self._by_name[name]

    @property
    def _by_name(self) -> dict[str, StreamConfig]:
        return {s.name: s for s in self.streams}

    def topics(self) -> dict[str, int]:
        """Every topic the app uses, with its partition count (created before workers start)."""
        return partition_counts(self.report_partitions, self.stream_partitions)


def _stream(raw, index: int) -> StreamConfig:
    where = f"streams[{index}]"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a table/mapping, got {show(raw)}")
    if "name" not in raw:
        raise ConfigError(f"{where}: missing field(s) name")
    try:
        name = STREAM_FIELDS["name"].kind.check(raw["name"], "name")
        where = f"stream {name!r}"
        fields = check_table(raw, STREAM_FIELDS, "")
        model, mechanism = fields["model"], fields["mechanism"]
        belongs = mechanisms()[mechanism].model
        if belongs != model:
            raise SchemaError(f"{mechanism} is not a {model}-model mechanism: it belongs to the {belongs} model")
        pair = [key for key in ("epsilon", "window") if key in fields]
        if model == "personalized" and pair:
            raise SchemaError(f"a personalized stream has no single {' or '.join(pair)}: every user has their own "
                              f"(w_i, eps_i) in options.requirements")
        if model != "personalized" and len(pair) < 2:
            raise SchemaError(f"missing field(s) {', '.join(k for k in ('epsilon', 'window') if k not in fields)}")
        if "oracle" in fields and model != "local":
            raise SchemaError("oracle is for local-model streams only")
        options = check_options(fields.get("options", {}), mechanism)
        if "bound" in options and fields.get("oracle") != "hm":
            raise SchemaError("options.bound is the range of mean estimation: for oracle hm only")
    except SchemaError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    stream = StreamConfig(
        name=name, model=model, mechanism=mechanism, epsilon=fields.get("epsilon"), window=fields.get("window"),
        domain=fields["domain"], users=fields["users"], slot_seconds=fields["slot_seconds"], start=fields["start"],
        lateness_seconds=fields.get("lateness_seconds", 0.0),
        max_watermark_jump_slots=fields.get("max_watermark_jump_slots", 60),
        idle_producer_seconds=fields.get("idle_producer_seconds"),
        max_slots_ahead=fields.get("max_slots_ahead", DEFAULT_MAX_SLOTS_AHEAD), oracle=fields.get("oracle", "ada"),
        options=options,
        labels=fields.get("labels", ()), query=fields.get("query"),
    )
    passable = (stream.max_watermark_jump_slots - 1) * stream.slot_seconds
    if stream.idle_seconds > passable:
        raise ConfigError(f"{where}: idle_producer_seconds {stream.idle_seconds:g} is more than "
                          f"max_watermark_jump_slots - 1 = {stream.max_watermark_jump_slots - 1} slots ({passable:g} s): "
                          "the other producers' watermarks could never pass a producer that died")
    try:
        settings = stream.query_settings
    except ParameterError as exc:  # the query settings' own checks name the stream already
        raise ConfigError(str(exc)) from None
    if settings is not None:
        from .query_settings import unindexable  # noqa: PLC0415 - the decayed core, for streams with a query index

        reason = unindexable(mechanism)
        if reason:
            raise ConfigError(f"{where}: query: {mechanism} releases cannot be indexed: {reason}")
    if settings is not None and settings.reserved_epsilon and model != "central":
        raise ConfigError(f"{where}: query modes B and C need raw counts: central streams only")
    try:
        _ = stream.budget  # resolved here, once: a reservation that leaves the host nothing stops the config
    except ParameterError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return stream


def parse_config(raw) -> AppConfig:
    """A config mapping (what a config file holds) checked against the schema, as typed settings."""
    try:
        fields = check_table(raw, APP_FIELDS, "")
    except SchemaError as exc:
        raise ConfigError(str(exc)) from None
    parsed = tuple(_stream(s, i) for i, s in enumerate(fields["streams"]))
    names = [s.name for s in parsed]
    if len(set(names)) != len(names):
        raise ConfigError("stream names must be unique")
    return AppConfig(
        streams=parsed,
        app=fields.get("app", "wevent"),
        report_partitions=fields.get("report_partitions", 4),
        stream_partitions=fields.get("stream_partitions", 2),
        seed=fields.get("seed"),
        processing_guarantee=fields.get("processing_guarantee", "at_least_once"),
        replication_factor=fields.get("replication_factor", 1),
        kafka_properties=fields.get("kafka_properties", {}),
    )


MAX_CONFIG_BYTES = 16 * 2**20


def load_config(path: str | Path) -> AppConfig:
    """A config file (.toml, .yaml/.yml or .json) as typed settings; any problem is one ConfigError line."""
    path = Path(path)
    try:
        return parse_config(_read(path))
    except ConfigError as exc:
        raise ConfigError(" ".join(str(exc).split())) from None  # one line, whatever a parser said


def _read(path: Path):
    if path.suffix not in (".toml", ".yaml", ".yml", ".json"):
        raise ConfigError(f"{path}: use a .toml, .yaml or .json config file")
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: a config file has at most {MAX_CONFIG_BYTES // 2**20} MiB")
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"{path} is a directory, not a config file") from None
    except OSError as exc:
        raise ConfigError(f"cannot read the config file {path}: {exc.strerror or exc}") from None
    try:
        if path.suffix == ".toml":
            return tomllib.loads(data.decode("utf-8"))
        if path.suffix == ".json":
            return json.loads(data.decode("utf-8"))
        return _load_yaml(data)
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text (a binary file?)") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply") from None
    except ValueError as exc:  # TOMLDecodeError, JSONDecodeError and YAML's errors (see _load_yaml)
        raise ConfigError(f"{path}: {exc}") from None


def _load_yaml(data: bytes):
    import yaml  # noqa: PLC0415 - PyYAML, for YAML configs only

    try:
        return yaml.safe_load(data)
    except yaml.YAMLError as exc:
        raise ValueError(str(exc)) from None


def dump_config(config: AppConfig) -> dict:
    """The config as a plain mapping (what `wevent run` writes for the workers it starts).

    Settings left at their defaults are left out, so that the mapping loads again as the same config.
    """
    return {
        "app": config.app,
        "report_partitions": config.report_partitions,
        "stream_partitions": config.stream_partitions,
        **({"seed": config.seed} if config.seed is not None else {}),
        **({"processing_guarantee": config.processing_guarantee}
           if config.processing_guarantee != "at_least_once" else {}),
        **({"replication_factor": config.replication_factor} if config.replication_factor != 1 else {}),
        **({"kafka_properties": dict(config.kafka_properties)} if config.kafka_properties else {}),
        "streams": [_given(s) for s in config.streams],
    }


def _given(stream: StreamConfig) -> dict[str, Any]:
    out = {}
    for f in dataclass_fields(stream):
        value = getattr(stream, f.name)
        default = f.default_factory() if callable(f.default_factory) else f.default
        if value is not None and value != default:
            out[f.name] = list(value) if isinstance(value, tuple) else value
    return out
