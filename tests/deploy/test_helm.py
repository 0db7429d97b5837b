"""helm/wevent: `helm lint` through helm-sdkpy (Python 3.12) with the default values and with every
optional branch switched on, a schema violation caught by the same lint, and the chart's default
stream config loadable by the worker."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import yaml

from pipeline.stream.config import load_config

from .conftest import CHART
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


def lint(helm_python: str, chart) -> list[dict]:
    """helm lint's messages for the chart directory (Err texts do not survive helm-sdkpy's JSON)."""
    result = subprocess.run([helm_python, "-c", LINT, str(chart)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["TotalChartsLinted"] == 1
    return report["Messages"]


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
        "noiseKey": "ab" * 32,
        "kafka": {"bootstrap": "kafka-0.kafka:9092,kafka-1.kafka:9092",
                  "sasl": {"username": "wevent", "password": "secret"}},
        "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
        "imagePullSecrets": [{"name": "regcred"}],
        "podAnnotations": {"example.com/owner": "team"},
        "nodeSelector": {"kubernetes.io/arch": "amd64"},
        "tolerations": [{"key": "dedicated", "operator": "Exists"}],
    })
    assert problems(lint(helm_python, chart)) == []


def test_helm_lint_rejects_a_noise_key_that_is_not_64_hex_characters(helm_python, tmp_path):
    chart = chart_with(tmp_path, {"noiseKey": "not-a-key"})
    assert any(m["Severity"] > WARNING and m["Path"] == "values.yaml" for m in lint(helm_python, chart))


def test_chart_default_stream_config_loads_like_wevent_run_config(tmp_path):
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    path = tmp_path / "streams.yaml"  # what the ConfigMap mounts: toYaml .Values.config
    path.write_text(yaml.safe_dump(values["config"]))
    config = load_config(path)
    assert [s.name for s in config.streams] == [s["name"] for s in values["config"]["streams"]]
    assert config.report_partitions == values["config"]["report_partitions"]
