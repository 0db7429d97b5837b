"""The stream configuration is typed once, at load time: every bad value is one ConfigError line
naming the stream and the field, before a worker starts.

The schema (pipeline/stream/config_schema.py) is the one definition of what a config may say:
the loader checks against it, every option it lists is one its mechanism's constructor takes, and
the Helm chart's values.schema.json is generated from it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from wevent.core.registry import mechanisms
from wevent.stream.config import ConfigError, dump_config, load_config, parse_config
from wevent.stream.config_schema import mechanism_schemas
from wevent.stream.helm_schema import helm_schema_text
from wevent.stream.agents.local import device_block_size
from wevent.stream.agents.processors import logic_for
from wevent.stream.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
HELM_SCHEMA = ROOT / "helm" / "wevent" / "values.schema.json"

CENTRAL = {"name": "taxi", "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 5, "domain": 4,
           "users": 10, "slot_seconds": 60, "start": 1_200_000_000}
LOCAL = {**CENTRAL, "name": "taxi-local", "model": "local", "mechanism": "lpa", "users": 100}
PERSONALIZED = {k: v for k, v in CENTRAL.items() if k not in ("epsilon", "window")} | {
    "name": "taxi-personalized", "model": "personalized", "mechanism": "pba",
    "options": {"requirements": {"mix": "groups", "epsilon": 0.6, "window": 12, "seed": 1}}}


def refused(stream: dict, *, top: dict | None = None) -> str:
    """The one-line error a config with this stream gets."""
    with pytest.raises(ConfigError) as info:
        parse_config({"seed": 1, **(top or {}), "streams": [stream]})
    message = str(info.value)
    assert "\n" not in message and len(message) < 400, message
    return message


def with_options(stream: dict, **options) -> dict:
    return {**stream, "options": {**stream.get("options", {}), **options}}


# --- the reproduced problems: values that used to start a worker ----------------------------------
@pytest.mark.parametrize("option", ["budget_shift", "force_first_publish", "clamp_round"])
@pytest.mark.parametrize("text", ["false", "maybe", "0"])
def test_booleans_are_booleans_never_strings(option, text):
    message = refused(with_options(CENTRAL, **{option: text}))
    assert message == f"stream 'taxi': options.{option} must be a boolean (true or false), got {text!r}"


def test_a_string_false_from_a_toml_file_is_refused_not_true(tmp_path):
    path = tmp_path / "streams.toml"
    path.write_text('seed = 1\n[[streams]]\nname = "taxi"\nmodel = "central"\nmechanism = "ba"\nepsilon = 1.0\n'
                    'window = 5\ndomain = 4\nusers = 10\nslot_seconds = 60\nstart = 1200000000\n'
                    'options = { budget_shift = "false" }\n')
    with pytest.raises(ConfigError, match="options.budget_shift must be a boolean"):
        load_config(path)
    path.write_text(path.read_text().replace('"false"', "false"))
    config = load_config(path)
    assert logic_for(config, config.streams[0], Settings()).new_mechanism().dissimilarity_measure.budget_shift is False


@pytest.mark.parametrize("value", ["false", False, True])
def test_the_non_private_artifact_mode_is_never_a_stream_option(value):
    message = refused(with_options(PERSONALIZED, artifact_compat_nonprivate=value))
    assert "options.artifact_compat_nonprivate is not allowed in a stream" in message
    assert "breaks the window guarantee" in message


@pytest.mark.parametrize("stream", [CENTRAL, PERSONALIZED])
def test_floating_point_laplace_noise_must_be_named_for_what_it_is(stream):
    message = refused(with_options(stream, noise="laplace"))
    assert message.startswith(f"stream '{stream['name']}': options.noise 'laplace' is refused in a stream: ")
    assert "low-order bits" in message and "write 'laplace-fp-unsafe'" in message
    config = parse_config({"seed": 1, "streams": [with_options(stream, noise="laplace-fp-unsafe")]})
    assert parse_config(dump_config(config)) == config  # what `wevent run` hands its workers loads again
    assert logic_for(config, config.streams[0], Settings()).new_mechanism().noise == "laplace"  # the core's name


@pytest.mark.parametrize("value, fragment", [
    (0, "options.block_size must be >= 1 and <= 16777216, got 0"),
    (-5, "options.block_size must be >= 1 and <= 16777216, got -5"),
    ("x", "options.block_size must be an integer, got 'x'"),
    (2.0, "options.block_size must be an integer, got 2.0"),
    (True, "options.block_size must be an integer, got True"),
])
def test_block_size_is_a_positive_integer(value, fragment):
    assert refused(with_options(LOCAL, block_size=value)) == f"stream 'taxi-local': {fragment}"


@pytest.mark.parametrize("value, fragment", [
    ("nan", "must be a number, got 'nan'"),
    (math.nan, "must be a finite number, got nan"),
    (math.inf, "must be a finite number, got inf"),
    (0, "must be > 0 and <= 86400, got 0"),
    ("30", "must be a number, got '30'"),
])
def test_deadline_seconds_is_a_finite_positive_number(value, fragment):
    message = refused(with_options(LOCAL, deadline_seconds=value))
    assert message == f"stream 'taxi-local': options.deadline_seconds {fragment}"


def test_nan_from_a_json_config_file_is_refused(tmp_path):
    path = tmp_path / "streams.json"
    path.write_text(json.dumps({"seed": 1, "streams": [with_options(LOCAL, deadline_seconds=math.nan)]}))
    assert "NaN" in path.read_text()
    with pytest.raises(ConfigError, match="options.deadline_seconds must be a finite number"):
        load_config(path)


@pytest.mark.parametrize("name, shown", [
    ("x" * 100_000, "name must have 1 to 100 characters, got 100000"),
    ("taxi\x00", "name must be 1 to 100 letters"),
    ("taxi\nlocal", "name must be 1 to 100 letters"),
    ("", "name must have 1 to 100 characters, got 0"),
    (7, "name must be a string, got 7"),
])
def test_stream_names_are_short_printable_and_safe(name, shown):
    message = refused({**CENTRAL, "name": name})
    assert message.startswith("streams[0]: ") and shown in message


@pytest.mark.parametrize("stream, option", [
    (CENTRAL, "beta"),  # a local method's
    (CENTRAL, "lookback"),  # PBD's
    ({**CENTRAL, "mechanism": "uniform"}, "budget_shift"),  # BD/BA's, not Uniform's
    (LOCAL, "budget_shift"),
    (LOCAL, "u_min"),  # LPD's, not LPA's
    (PERSONALIZED, "lookback"),  # PBD's, not PBA's
    (PERSONALIZED, "decision_override"),  # a test hook of the constructors
    (LOCAL, "devices"),
])
def test_options_are_per_mechanism(stream, option):
    message = refused(with_options(stream, **{option: 1}))
    assert f"options: unknown field(s) {option} for mechanism {stream['mechanism']}; known: " in message


@pytest.mark.parametrize("changes, fragment", [
    ({"epsilon": 1.0}, "a personalized stream has no single epsilon"),
    ({"window": 20}, "a personalized stream has no single window"),
    ({"options": {}}, "options: missing field(s) requirements"),
    ({"options": {"requirements": {"mix": "groups", "window": "12"}}}, "options.requirements.window must be an "
                                                                        "integer, got '12'"),
    ({"options": {"requirements": {"mix": "all"}}}, "options.requirements.mix must be one of groups, per-user"),
    ({"options": {"requirements": 3}}, "options.requirements must be a CSV file"),
])
def test_personalized_streams_take_requirements_not_a_pair(changes, fragment):
    assert fragment in refused({**PERSONALIZED, **changes})


@pytest.mark.parametrize("changes, fragment", [
    ({"oracle": "grr"}, "oracle is for local-model streams only"),
    ({"model": "local", "mechanism": "lpa", "options": {"bound": 2.0}}, "options.bound is the range of mean "
                                                                         "estimation: for oracle hm only"),
    ({"window": 2.0}, "window must be an integer, got 2.0"),
    ({"window": True}, "window must be an integer, got True"),
    ({"epsilon": "1"}, "epsilon must be a number, got '1'"),
    ({"epsilon": 1e300}, "epsilon must be >= 1e-290 and <= 100"),
    ({"users": 10**400}, "users must be >= 1 and <= 4294967296"),
    ({"slot_seconds": 10**400}, "slot_seconds must be a finite number"),
    ({"domain": 2**40}, "domain must be >= 1 and <= 1048576"),
    ({"start": "2008-02-30T00:00:00Z"}, "is not ISO 8601"),
    ({"start": -1}, "start must be >= 0"),
    ({"labels": ["a", 1]}, "labels[1] must be a string, got 1"),
    ({"query": {"mode": "a"}}, "query.mode must be one of A, B, C, got 'a'"),
    ({"query": {"mode": "B", "epsilon": "0.2"}}, "query.epsilon must be a number"),
    ({"model": "local"}, "ba is not a local-model mechanism: it belongs to the central model"),
])
def test_stream_fields_are_typed(changes, fragment):
    assert fragment in refused({**CENTRAL, **changes})


@pytest.mark.parametrize("stream, fragment", [
    ({**CENTRAL, "epsilon": 1e-320}, "epsilon must be >= 1e-290 and <= 100, got 9.99989e-321"),
    ({**CENTRAL, "query": {"mode": "B", "window": 16, "decay": 0.9, "epsilon": 1e-320}},
     "query.epsilon must be >= 1e-290 and <= 100, got 9.99989e-321"),
    ({**PERSONALIZED, "options": {"requirements": {"mix": "groups", "epsilon": 1e-320, "window": 12}}},
     "epsilon must be >= 1e-290 and <= 100, got 9.99989e-321"),
])
def test_a_denormal_budget_is_refused_naming_the_smallest_one(stream, fragment):
    # a budget whose noise scale overflows: refused when the config loads, not left to release nothing
    assert fragment in refused(stream)


@pytest.mark.parametrize("top, fragment", [
    ({"seed": "1"}, "seed must be an integer, got '1'"),
    ({"report_partitions": 0}, "report_partitions must be >= 1"),
    ({"app": "we vent"}, "app must be 1 to 100 letters"),
    ({"colour": "red"}, "unknown field(s) colour"),
])
def test_app_fields_are_typed(top, fragment):
    assert fragment in refused(CENTRAL, top=top)


def test_a_deeply_nested_unknown_value_gives_a_short_line():
    deep: list = []
    for _ in range(10_000):
        deep = [deep]
    assert "unknown field(s) x" in refused(with_options(CENTRAL, x=deep))
    assert "options.clamp_round must be a boolean" in refused(with_options(CENTRAL, clamp_round=deep))


# --- config files: every problem is one line --------------------------------------------------------
def one_line_error(path) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message and len(message) < 400, message
    return message


def test_a_directory_is_not_a_config_file(tmp_path):
    (tmp_path / "streams.toml").mkdir()
    assert "is a directory" in one_line_error(tmp_path / "streams.toml")


@pytest.mark.parametrize("suffix", [".toml", ".json", ".yaml"])
def test_a_binary_file_is_one_line(tmp_path, suffix):
    path = tmp_path / f"streams{suffix}"
    path.write_bytes(bytes(range(256)) * 4)
    assert str(path) in one_line_error(path)


@pytest.mark.parametrize("suffix, text", [
    (".json", "[" * 100_000 + "]" * 100_000),
    (".yaml", "[" * 100_000 + "]" * 100_000),
    (".toml", "x = " + "[" * 100_000 + "]" * 100_000),
])
def test_a_deeply_nested_file_is_one_line(tmp_path, suffix, text):
    path = tmp_path / f"streams{suffix}"
    path.write_text(text)
    assert str(path) in one_line_error(path)


@pytest.mark.parametrize("suffix, text, fragment", [
    (".yaml", "streams:\n  - name: taxi\n   model: central\n", "expected <block end>"),
    (".yaml", "- 1\n- 2\n", "the config must be a table/mapping, got [1, 2]"),
    (".yaml", "", "the config must be a table/mapping, got None"),
    (".json", '"streams"', "the config must be a table/mapping, got 'streams'"),
    (".toml", "streams = [", "streams.toml"),
    (".yaml", "streams: {}\n", "the config declares no `streams`"),
    (".yaml", "streams: [3]\n", "streams[0] must be a table/mapping, got 3"),
])
def test_malformed_files_are_one_line(tmp_path, suffix, text, fragment):
    path = tmp_path / f"streams{suffix}"
    path.write_text(text)
    assert fragment in one_line_error(path)


# --- what a valid config becomes ------------------------------------------------------------------
def test_typed_options_reach_the_mechanism_and_the_stream_layer():
    config = parse_config({"seed": 1, "streams": [with_options(LOCAL, block_size=7, deadline_seconds=2, beta=0.25),
                                                    with_options(CENTRAL, budget_shift=True)]})
    local, central = config.streams
    assert device_block_size(local) == 7 and local.deadline_seconds == 2.0
    assert local.mechanism_options == {"beta": 0.25}
    assert logic_for(config, local, Settings()).new_mechanism().beta == 0.25
    assert logic_for(config, central, Settings()).new_mechanism().dissimilarity_measure.budget_shift is True


def test_a_dumped_config_loads_as_the_same_config(tmp_path):
    config = parse_config({"seed": 1, "streams": [with_options(LOCAL, block_size=7, deadline_seconds=2),
                                                    {**CENTRAL, "start": "2008-02-02T00:00:00Z",
                                                     "query": {"mode": "A", "window": 16, "decay": 0.9}},
                                                    PERSONALIZED]})
    path = tmp_path / "streams.json"
    path.write_text(json.dumps(dump_config(config)))
    assert load_config(path) == config


@pytest.mark.parametrize("path", ["docker/config/streams.toml"])
def test_the_repository_configs_load(path):
    config = load_config(ROOT / path)
    assert {s.model for s in config.streams} == {"central", "local", "personalized"}


# --- one definition: the schema, the constructors and the Helm chart agree -----------------------
MECHANISMS = mechanism_schemas()


def test_every_registered_mechanism_has_its_options_in_the_schema():
    assert set(MECHANISMS) == set(mechanisms())
    for name, entry in MECHANISMS.items():
        assert entry.model in mechanisms()[name].__module__, name


@pytest.mark.parametrize("mechanism, option", [(m, o) for m, e in MECHANISMS.items() for o in e.options
                                               if o != "requirements"])
def test_every_schema_option_is_taken_by_its_mechanism(mechanism, option):
    model = MECHANISMS[mechanism].model
    base = {"central": CENTRAL, "local": LOCAL, "personalized": PERSONALIZED}[model]
    value = MECHANISMS[mechanism].options[option].example  # a value each option declares
    if option == "bound":  # mean estimation: values in [0, bound], one "bin"
        base = {**base, "oracle": "hm", "domain": 1}
    config = parse_config({"seed": 1, "streams": [with_options({**base, "mechanism": mechanism}, **{option: value})]})
    mechanism_object = logic_for(config, config.streams[0], Settings()).new_mechanism()  # TypeError -> ConfigError
    if not config.streams[0].options.keys() - {"block_size", "deadline_seconds"}:
        return  # the stream layer's own options
    params = mechanism_object.state_dict()["params"]
    if option in params:  # what the mechanism keeps is what the config said (in the core's words)
        assert params[option] == {"laplace-fp-unsafe": "laplace"}.get(value, value)


def test_the_helm_values_schema_is_generated_from_the_config_schema():
    committed = HELM_SCHEMA.read_text()
    assert committed == helm_schema_text(committed), (
        "helm/wevent/values.schema.json differs from the config schema: run "
        "`python -m wevent.stream.helm_schema helm/wevent/values.schema.json`")
    generated = json.loads(committed)["properties"]["config"]
    stream = generated["properties"]["streams"]["items"]
    assert stream["properties"]["mechanism"]["enum"] == sorted(mechanisms())
    assert "epsilon" not in stream.get("required", []) and "window" not in stream.get("required", [])


def test_a_query_index_on_a_stream_whose_releases_have_no_variance_is_refused_at_load():
    raw = {"seed": 1, "streams": [{"name": "r", "model": "local", "mechanism": "lp-rescuedp", "epsilon": 1.0,
                                   "window": 10, "domain": 2, "users": 100, "slot_seconds": 60, "start": 0,
                                   "query": {"mode": "A", "window": 64, "decay": 0.99}}]}
    with pytest.raises(ConfigError, match="lp-rescuedp releases cannot be indexed"):
        parse_config(raw)
