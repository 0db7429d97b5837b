"""helm/wevent: `helm lint` through helm-sdkpy (Python 3.12) with the default values and with every
optional branch switched on, schema violations caught by the same lint, templates rendered by
helm's engine (the noise key is never generated: two renders give the same key, none without a
key), and the stream configs the chart mounts loadable by the worker."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import tomllib

import pytest
import yaml

from pipeline.core.personalized import Requirements
from pipeline.stream.config import load_config
from pipeline.stream.logic import logic_for

from .conftest import CHART, STREAMS_FILE
from .python312 import HELM_VENV, find_python312

# helm's lint severities (pkg/lint/support): 1 info, 2 warning, 3 error
WARNING = 2
LINT = """
import asyncio, json, sys
import helm_sdkpy
result = asyncio.run(helm_sdkpy.Lint(helm_sdkpy.Configuration()).run(sys.argv[1]))
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def helm_python() -> str:
    if find_python312() is None:
        pytest.skip("no Python 3.12 on this machine: helm-sdkpy's native library needs it")
    python = HELM_VENV / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{HELM_VENV} is missing: `make setup` creates it with Python 3.12 and helm-sdkpy")
    return str(python)


def run_lint(helm_python: str, chart) -> tuple[list[dict], str]:
    """helm lint's messages for the chart directory (Err texts do not survive helm-sdkpy's JSON), and its log."""
    result = subprocess.run([helm_python, "-c", LINT, str(chart)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["TotalChartsLinted"] == 1
    return report["Messages"], result.stderr


def lint(helm_python: str, chart) -> list[dict]:
    return run_lint(helm_python, chart)[0]


TEMPLATES = ("secret.yaml", "deployment.yaml", "configmap.yaml")
FAILED = re.compile(r'funcMap fail message=("(?:[^"\\]|\\.)*")')


def render(helm_python: str, chart) -> tuple[dict[str, list[dict]], list[str]]:
    """The chart's templates as helm's engine renders them, and the messages of the `fail`s they hit.

    helm-sdkpy has no `helm template`, but `helm lint` renders every template with the chart's
    values (and, like `helm template`, no cluster: `lookup` finds nothing). In lint mode a `fail`
    only logs its message, so a probe template fails with each rendered template, base64-encoded.
    """
    probe = "".join(f'{{{{- fail (printf "wevent-render {name} %s" (include (print $.Template.BasePath "/{name}") . '
                    f'| b64enc)) }}}}\n' for name in TEMPLATES)
    (chart / "templates" / "zz-render-probe.yaml").write_text(probe)
    _, log = run_lint(helm_python, chart)
    rendered, failures = {}, []
    for quoted in FAILED.findall(log):
        message = json.loads(quoted)
        if message.startswith("wevent-render "):
            _, name, text = message.split(" ", 2)
            rendered[name] = [doc for doc in yaml.safe_load_all(base64.b64decode(text)) if doc]
        else:
            failures.append(message)
    assert set(rendered) == set(TEMPLATES), log
    return rendered, failures


def merged(base: dict, overrides: dict) -> dict:
    out = dict(base)
    for key, value in overrides.items():
        out[key] = merged(base.get(key, {}), value) if isinstance(value, dict) else value
    return out


def chart_with(tmp_path, overrides: dict):
    """A copy of the chart whose values.yaml has ``overrides`` merged in (helm-sdkpy's lint takes no values)."""
    chart = shutil.copytree(CHART, tmp_path / CHART.name)
    values = yaml.safe_load((chart / "values.yaml").read_text())
    (chart / "values.yaml").write_text(yaml.safe_dump(merged(values, overrides)))
    return chart


def problems(messages: list[dict]) -> list[str]:
    return [f"severity {m['Severity']} in {m['Path']}" for m in messages if m["Severity"] >= WARNING]


def test_helm_lint_passes_with_the_default_values(helm_python):
    assert problems(lint(helm_python, CHART)) == []


def test_helm_lint_passes_with_every_optional_part_enabled(helm_python, tmp_path):
    chart = chart_with(tmp_path, {
        "noiseKey": {"value": "ab" * 32},
        "kafka": {"bootstrap": "kafka-0.kafka:9092,kafka-1.kafka:9092",
                  "sasl": {"username": "wevent", "password": "secret"}},
        "configFiles": {"users.csv": "user,w,epsilon\n0,10,1.0\n"},
        "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
        "imagePullSecrets": [{"name": "regcred"}],
        "podAnnotations": {"example.com/owner": "team"},
        "nodeSelector": {"kubernetes.io/arch": "amd64"},
        "tolerations": [{"key": "dedicated", "operator": "Exists"}],
    })
    assert problems(lint(helm_python, chart)) == []


def schema_error(helm_python, chart) -> bool:
    return any(m["Severity"] > WARNING and m["Path"] == "values.yaml" for m in lint(helm_python, chart))


@pytest.mark.parametrize("noise_key", [{"value": "not-a-key"}, "ab" * 32, {"generate": True}])
def test_helm_lint_rejects_a_noise_key_that_is_not_64_hex_characters(helm_python, tmp_path, noise_key):
    assert schema_error(helm_python, chart_with(tmp_path, {"noiseKey": noise_key}))


STREAM = yaml.safe_load((CHART / "values.yaml").read_text())["config"]["streams"][0]
PERSONALIZED = {k: v for k, v in STREAM.items() if k not in ("epsilon", "window")} | {
    "name": "taxi-personalized", "model": "personalized", "mechanism": "pba",
    "options": {"requirements": {"mix": "groups", "epsilon": 1.0, "window": 20, "seed": 1}}}


@pytest.mark.parametrize("stream", [
    {**STREAM, "options": {"budget_shift": "false"}},  # what the workers refuse, the chart refuses
    {**STREAM, "options": {"beta": 0.5}},  # a local method's option on BA
    {**STREAM, "window": 2.5},
    {**STREAM, "name": "a/b"},
    {**PERSONALIZED, "epsilon": 1.0},
    {**PERSONALIZED, "options": {}},
])
def test_helm_lint_rejects_stream_configs_the_workers_refuse(helm_python, tmp_path, stream):
    assert schema_error(helm_python, chart_with(tmp_path, {"config": {"streams": [stream]}}))


def test_helm_lint_accepts_the_compose_stack_streams(helm_python, tmp_path):
    """docker/config/streams.toml (one stream of each model) passes the chart's schema as it loads in a worker."""
    streams = tomllib.loads(STREAMS_FILE.read_text())
    assert load_config(STREAMS_FILE).streams
    chart = chart_with(tmp_path, {"config": streams})
    assert problems(lint(helm_python, chart)) == []


def noise_key_of(rendered: dict[str, list[dict]]) -> tuple[str, str, str | None]:
    """(Secret, entry) the worker reads WEVENT_NOISE_KEY from, and the key if the chart's Secret holds it."""
    container = rendered["deployment.yaml"][0]["spec"]["template"]["spec"]["containers"][0]
    ref = next(e for e in container["env"] if e["name"] == "WEVENT_NOISE_KEY")["valueFrom"]["secretKeyRef"]
    secrets = {doc["metadata"]["name"]: doc["data"] for doc in rendered["secret.yaml"]}
    held = secrets.get(ref["name"], {}).get(ref["key"])
    return ref["name"], ref["key"], base64.b64decode(held).decode() if held is not None else None


def test_two_renders_give_the_same_noise_key_from_a_value(helm_python, tmp_path):
    key = "0123456789abcdef" * 4
    first, failures = render(helm_python, chart_with(tmp_path / "a", {"noiseKey": {"value": key}}))
    second, _ = render(helm_python, chart_with(tmp_path / "b", {"noiseKey": {"value": key}}))
    assert failures == []
    release = "test-release"  # the release lint renders
    assert noise_key_of(first) == noise_key_of(second) == (f"{release}-wevent", "noise-key", key)


@pytest.mark.parametrize("values", [{}, {"noiseKey": {"value": "ab" * 32}},
                                    {"noiseKey": {"existingSecret": "wevent-noise-key"}}])
def test_two_renders_of_the_same_values_are_identical(helm_python, tmp_path, values):
    first = render(helm_python, chart_with(tmp_path / "a", values))
    assert render(helm_python, chart_with(tmp_path / "b", values)) == first


def test_the_noise_key_comes_from_an_existing_secret(helm_python, tmp_path):
    rendered, failures = render(helm_python, chart_with(tmp_path, {
        "noiseKey": {"existingSecret": "wevent-noise-key", "secretKey": "key"}}))
    assert failures == [] and rendered["secret.yaml"] == []  # nothing for the chart's own Secret to hold
    assert noise_key_of(rendered) == ("wevent-noise-key", "key", None)


@pytest.mark.parametrize("noise_key, message", [
    ({}, "noiseKey: set noiseKey.existingSecret (a Secret holding the key) or noiseKey.value (64 hex characters, "
         "openssl rand -hex 32); the chart never generates the key"),
    ({"value": "ab" * 32, "existingSecret": "wevent-noise-key"},
     "noiseKey: set noiseKey.existingSecret or noiseKey.value, not both"),
])
def test_rendering_without_exactly_one_noise_key_fails_with_a_message(helm_python, tmp_path, noise_key, message):
    _, failures = render(helm_python, chart_with(tmp_path, {"noiseKey": noise_key}))
    assert message in failures


def test_no_template_draws_randomness(tmp_path):
    for template in (CHART / "templates").iterdir():
        assert not re.search(r"\b(rand[A-Z]\w*|randInt|uuidv4|genPrivateKey|genCA|genSelfSignedCert)\b",
                             template.read_text()), template.name


def test_a_personalized_stream_renders_and_loads(helm_python, tmp_path, monkeypatch):
    csv = "user,w,epsilon\n" + "".join(f"{u},{10 + u % 3},{0.5 + (u % 2) / 2}\n" for u in range(STREAM["users"]))
    from_csv = {**PERSONALIZED, "name": "taxi-csv", "options": {"requirements": "/etc/wevent/users.csv"}}
    chart = chart_with(tmp_path / "chart", {"noiseKey": {"value": "ab" * 32}, "configFiles": {"users.csv": csv},
                                            "config": {"streams": [PERSONALIZED, from_csv]}})
    assert problems(lint(helm_python, chart)) == []
    rendered, failures = render(helm_python, chart)
    assert failures == []
    files = rendered["configmap.yaml"][0]["data"]
    assert files["users.csv"] == csv
    (tmp_path / "streams.yaml").write_text(files["streams.yaml"])
    config = load_config(tmp_path / "streams.yaml")
    assert [(s.name, s.model, s.epsilon) for s in config.streams] == [("taxi-personalized", "personalized", None),
                                                                      ("taxi-csv", "personalized", None)]
    monkeypatch.setenv("WEVENT_NOISE_KEY", "ab" * 32)
    assert logic_for(config, config.streams[0]).groups >= 1
    (tmp_path / "users.csv").write_text(files["users.csv"])
    assert Requirements.load_csv(tmp_path / "users.csv").users == STREAM["users"]


def test_chart_default_stream_config_loads_like_wevent_run_config(tmp_path):
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    path = tmp_path / "streams.yaml"  # what the ConfigMap mounts: toYaml .Values.config
    path.write_text(yaml.safe_dump(values["config"]))
    config = load_config(path)
    assert [s.name for s in config.streams] == [s["name"] for s in values["config"]["streams"]]
    assert config.report_partitions == values["config"]["report_partitions"]
