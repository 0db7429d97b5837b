"""Stream configuration: which streams one app runs, with which mechanism and clock.

A config file (TOML, YAML or JSON) declares the app and its streams::

    app = "wevent"
    report_partitions = 4      # partitions of the `reports` topic (assemblers run in parallel)
    stream_partitions = 2      # partitions of the stream-keyed topics (M1, M2, collector)
    seed = 7                   # reproducible noise; omit and set WEVENT_NOISE_KEY in production

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
    options = { budget_shift = false }

A personalized stream (``model = "personalized"``, mechanism ``pbd`` or ``pba``) has no single
epsilon and w: ``options.requirements`` is a CSV file of ``user,w,epsilon`` lines (users are the
stream's user indices) or a table of generation settings, e.g.
``{ mix = "groups", epsilon = 0.6, window = 120, seed = 1 }`` (spec personalized §10.2).

Every problem is reported as one :class:`ConfigError` naming the stream and the field.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.registry import mechanisms
from ..core.randomness import SecretKey
from ..core.validation import ParameterError

__all__ = ["ConfigError", "StreamConfig", "AppConfig", "load_config", "NOISE_KEY_ENV", "DEVICE_KEY_ENV"]

NOISE_KEY_ENV = "WEVENT_NOISE_KEY"  # 64 hex characters: the server's secret noise key
DEVICE_KEY_ENV = "WEVENT_DEVICE_KEY"  # the simulated devices' key (local model)
MODELS = ("central", "local", "personalized")


class ConfigError(ParameterError):
    """The configuration is invalid; the message names the stream and field."""


@dataclass(frozen=True)
class StreamConfig:
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
    oracle: str = "ada"
    options: dict[str, Any] = field(default_factory=dict)
    labels: tuple[str, ...] = ()
    query: dict[str, Any] | None = None  # decayed range queries (pipeline.stream.query)

    @property
    def query_settings(self):
        from .query import QuerySettings

        return QuerySettings.parse(self.query, f"stream {self.name!r}") if self.query is not None else None

    @property
    def reserved_epsilon(self) -> float:
        """Budget a Mode B/C query index takes out of every window (0 otherwise)."""
        settings = self.query_settings
        return settings.reserved_epsilon if settings is not None else 0.0

    @property
    def host_epsilon(self) -> float:
        """The mechanism's budget: epsilon, less what a Mode B/C query index reserves."""
        if not self.reserved_epsilon:
            return self.epsilon
        from ..core.decayed import host_epsilon

        return host_epsilon(self.epsilon, self.reserved_epsilon)

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

    def stream(self, name: str) -> StreamConfig | None:
        return self._by_name.get(name)

    @property
    def _by_name(self) -> dict[str, StreamConfig]:
        return {s.name: s for s in self.streams}

    def noise_key(self) -> SecretKey:
        """The server's secret: ``WEVENT_NOISE_KEY`` (hex) if set, else derived from ``seed``."""
        return _key(NOISE_KEY_ENV, self.seed, "server")

    def device_key(self) -> SecretKey:
        return _key(DEVICE_KEY_ENV, self.seed, "devices")

    def topics(self) -> dict[str, int]:
        """Every topic the app uses, with its partition count (created before workers start)."""
        s = self.stream_partitions
        return {"reports": self.report_partitions, "slots": s, "dissimilarity": s, "releases": s, "audit": s,
                "deadletter": 1, "ldp.requests": s, "ldp.reports": s}


def _key(env: str, seed: int | None, purpose: str) -> SecretKey:
    text = os.environ.get(env)
    if text:
        try:
            return SecretKey.from_hex(text)
        except ValueError as exc:
            raise ConfigError(f"{env}: {exc}") from None
    if seed is None:
        raise ConfigError(f"no noise key: set {env} (64 hex characters) or a `seed` in the config")
    return SecretKey.from_seed(seed, purpose)


def _parse_time(value, where: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, dt.datetime):
        return (value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)).timestamp()
    if isinstance(value, str):
        try:
            parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ConfigError(f"{where}: start {value!r} is not ISO 8601 or epoch seconds") from None
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)).timestamp()
    raise ConfigError(f"{where}: start must be a time, got {value!r}")


def _stream(raw: dict, index: int) -> StreamConfig:
    where = f"streams[{index}]"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a table/mapping")
    name = raw.get("name")
    if not isinstance(name, str) or not name or "/" in name:
        raise ConfigError(f"{where}: a stream needs a non-empty `name` without '/'")
    where = f"stream {name!r}"
    known = {f for f in StreamConfig.__dataclass_fields__}
    unknown = set(raw) - known
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    required = ("model", "mechanism", "domain", "users", "slot_seconds", "start")
    if raw.get("model") != "personalized":
        required += ("epsilon", "window")
    missing = [f for f in required if f not in raw]
    if missing:
        raise ConfigError(f"{where}: missing field(s) {', '.join(missing)}")
    model = raw["model"]
    if model not in MODELS:
        raise ConfigError(f"{where}: model must be one of {', '.join(MODELS)}, got {model!r}")
    if raw["mechanism"] not in mechanisms():
        raise ConfigError(f"{where}: unknown mechanism {raw['mechanism']!r}")

    def number(key, cast, minimum):
        value = raw[key] if key in raw else StreamConfig.__dataclass_fields__[key].default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"{where}: {key} must be a number, got {value!r}")
        if cast is int and float(value) != int(value):
            raise ConfigError(f"{where}: {key} must be an integer, got {value!r}")
        if value < minimum or (minimum == 0 and key != "lateness_seconds" and value == 0):
            raise ConfigError(f"{where}: {key} must be > {minimum}" if minimum == 0 else f"{where}: {key} must be >= {minimum}")
        return cast(value)

    options = raw.get("options", {})
    if not isinstance(options, dict):
        raise ConfigError(f"{where}: options must be a table/mapping")
    stream = StreamConfig(
        name=name,
        model=model,
        mechanism=raw["mechanism"],
        epsilon=number("epsilon", float, 0) if "epsilon" in raw else None,
        window=number("window", int, 1) if "window" in raw else None,
        domain=number("domain", int, 1),
        users=number("users", int, 1),
        slot_seconds=number("slot_seconds", float, 0),
        start=_parse_time(raw["start"], where),
        lateness_seconds=number("lateness_seconds", float, 0) if "lateness_seconds" in raw else 0.0,
        oracle=str(raw.get("oracle", "ada")),
        options=dict(options),
        labels=tuple(str(x) for x in raw.get("labels", ())),
        query=raw.get("query"),
    )
    try:
        settings = stream.query_settings  # validates the query table
    except ParameterError as exc:
        raise ConfigError(str(exc)) from None
    if settings is not None and settings.reserved_epsilon:
        if model != "central":
            raise ConfigError(f"{where}: query modes B and C need raw counts: central streams only")
        try:
            stream.host_epsilon
        except ParameterError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return stream


def parse_config(raw: dict) -> AppConfig:
    if not isinstance(raw, dict):
        raise ConfigError("the config must be a table/mapping")
    streams = raw.get("streams")
    if not isinstance(streams, list) or not streams:
        raise ConfigError("the config declares no `streams`")
    parsed = tuple(_stream(s, i) for i, s in enumerate(streams))
    names = [s.name for s in parsed]
    if len(set(names)) != len(names):
        raise ConfigError("stream names must be unique")
    unknown = set(raw) - {"streams", "app", "report_partitions", "stream_partitions", "seed"}
    if unknown:
        raise ConfigError(f"unknown top-level field(s) {', '.join(sorted(unknown))}")
    for key in ("report_partitions", "stream_partitions"):
        if key in raw and (not isinstance(raw[key], int) or isinstance(raw[key], bool) or raw[key] < 1):
            raise ConfigError(f"{key} must be an integer >= 1")
    seed = raw.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise ConfigError("seed must be an integer")
    return AppConfig(
        streams=parsed,
        app=str(raw.get("app", "wevent")),
        report_partitions=raw.get("report_partitions", 4),
        stream_partitions=raw.get("stream_partitions", 2),
        seed=seed,
    )


def load_config(path: str | Path) -> AppConfig:
    path = Path(path)
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    try:
        if path.suffix == ".toml":
            raw = tomllib.loads(text.decode())
        elif path.suffix in (".yaml", ".yml"):
            import yaml

            raw = yaml.safe_load(text)
        elif path.suffix == ".json":
            raw = json.loads(text)
        else:
            raise ConfigError(f"{path}: use a .toml, .yaml or .json config file")
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except Exception as exc:  # yaml.YAMLError without importing yaml at module load
        if type(exc).__module__.startswith("yaml"):
            raise ConfigError(f"{path}: {exc}") from None
        raise
    return parse_config(raw)


def dump_config(config: AppConfig) -> dict:
    """The config as a plain mapping (what `wevent run` writes for the workers it starts)."""
    return {
        "app": config.app,
        "report_partitions": config.report_partitions,
        "stream_partitions": config.stream_partitions,
        **({"seed": config.seed} if config.seed is not None else {}),
        "streams": [
            {k: (list(v) if isinstance(v, tuple) else v) for k, v in s.__dict__.items() if v is not None}
            for s in config.streams
        ],
    }
