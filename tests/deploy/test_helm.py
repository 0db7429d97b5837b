"""helm/wevent with the real helm (the release the Makefile pins, built with Go): `helm lint --strict`
with the default values and with every optional part switched on, schema violations refused,
`helm template` rendering with default and non-default values (the noise key is never generated:
two renders give the same key, none renders without a key), and the stream configs the chart
mounts loadable by the worker."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import tomllib

import pytest
import yaml

from pipeline.core.personalized import Requirements
from pipeline.stream.config import load_config
from pipeline.stream.logic import logic_for

from .conftest import CHART, STREAMS_FILE, helm_binary, helm_version

RELEASE = "test-release"
KEY = "0123456789abcdef" * 4
SCHEMA_ERROR = "values don't meet the specifications of the schema"


class Helm:
    """The pinned helm binary, with its config, cache and data directories in ``home`` and no cluster."""

    def __init__(self, binary: str, home) -> None:
        self.binary = binary
        homes = {f"HELM_{kind}_HOME": str(home / kind.lower()) for kind in ("CONFIG", "CACHE", "DATA")}
        self.env = {**os.environ, **homes, "KUBECONFIG": str(home / "kubeconfig")}

    def __call__(self, *args: str, values: dict | None = None) -> subprocess.CompletedProcess:
        """helm with ``args``, and ``values`` over the chart's defaults (``-f -``, from stdin)."""
        stdin = None
        if values is not None:
            args, stdin = (*args, "-f", "-"), yaml.safe_dump(values)
        return subprocess.run([self.binary, *args], input=stdin, capture_output=True, text=True, env=self.env,
                              timeout=120)


@pytest.fixture(scope="session")
def helm(tmp_path_factory) -> Helm:
    return Helm(helm_binary(), tmp_path_factory.mktemp("helm-home"))


def lint(helm: Helm, values: dict) -> subprocess.CompletedProcess:
    """`helm lint --strict` (warnings fail too)."""
    return helm("lint", "--strict", str(CHART), values=values)


def template(helm: Helm, values: dict) -> subprocess.CompletedProcess:
    return helm("template", RELEASE, str(CHART), "--namespace", "wevent", values=values)


def render(helm, values: dict) -> dict[str, list[dict]]:
    """The manifests `helm template` renders with ``values``, by kind."""
    result = template(helm, values)
    assert result.returncode == 0, result.stderr
    manifests: dict[str, list[dict]] = {}
    for doc in yaml.safe_load_all(result.stdout):
        if doc:
            manifests.setdefault(doc["kind"], []).append(doc)
    return manifests


def render_failure(helm, values: dict) -> str:
    """The one-line message of a `helm template` that fails (a template's `fail`, or the schema)."""
    result = template(helm, values)
    assert result.returncode != 0, result.stdout
    return result.stderr


def pod_spec(manifests: dict[str, list[dict]]) -> dict:
    [deployment] = manifests["Deployment"]
    return deployment["spec"]["template"]["spec"]


def worker(manifests: dict[str, list[dict]]) -> dict:
    [container] = pod_spec(manifests)["containers"]
    return container


def test_the_binary_is_the_pinned_release(helm):
    result = helm("version", "--short")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("+")[0].strip() == helm_version()


def test_helm_lint_passes_with_the_default_values(helm):
    result = lint(helm, {})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


def test_helm_template_with_the_default_values_asks_for_the_noise_key(helm):
    assert ("noiseKey: set noiseKey.existingSecret (a Secret holding the key) or noiseKey.value"
            in render_failure(helm, {}))


def test_the_default_values_and_a_noise_key_render_a_plaintext_worker(helm):
    manifests = render(helm, {"noiseKey": {"value": KEY}})
    assert sorted(manifests) == ["ConfigMap", "Deployment", "Secret", "Service"]
    env = {e["name"]: e for e in worker(manifests)["env"]}
    assert env["WEVENT_KAFKA_SECURITY_PROTOCOL"]["value"] == "PLAINTEXT"
    assert [v["name"] for v in pod_spec(manifests)["volumes"]] == ["config", "data", "tmp"]


EVERYTHING = {
    "noiseKey": {"value": KEY},
    "kafka": {"bootstrap": "kafka-0.kafka:9093,kafka-1.kafka:9093", "securityProtocol": "SASL_SSL",
              "sasl": {"username": "wevent", "password": "secret"},
              "tls": {"existingSecret": "kafka-client", "clientCertificate": True, "keyPasswordKey": "key-password"}},
    "configFiles": {"users.csv": "user,w,epsilon\n0,10,1.0\n"},
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    "imagePullSecrets": [{"name": "regcred"}],
    "podAnnotations": {"example.com/owner": "team"},
    "nodeSelector": {"kubernetes.io/arch": "amd64"},
    "tolerations": [{"key": "dedicated", "operator": "Exists"}],
    "extraEnv": [{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}],
    "extraEnvFrom": [{"configMapRef": {"name": "site-env"}}],
    "extraVolumes": [{"name": "site-ca", "configMap": {"name": "site-ca"}}],
    "extraVolumeMounts": [{"name": "site-ca", "mountPath": "/etc/site-ca", "readOnly": True}],
}


def test_helm_lint_passes_with_every_optional_part_enabled(helm):
    result = lint(helm, EVERYTHING)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(render(helm, EVERYTHING)) == ["ConfigMap", "Deployment", "Secret", "Service",
                                                          "ServiceMonitor"]


def schema_error(helm, values: dict) -> bool:
    """Both `helm lint` and `helm template` refuse ``values`` by the chart's values.schema.json."""
    linted = lint(helm, values)
    refused_by_lint = linted.returncode != 0 and SCHEMA_ERROR in linted.stdout
    return refused_by_lint and SCHEMA_ERROR in render_failure(helm, values)


@pytest.mark.parametrize("noise_key", [{"value": "not-a-key"}, "ab" * 32, {"generate": True}])
def test_helm_rejects_a_noise_key_that_is_not_64_hex_characters(helm, noise_key):
    assert schema_error(helm, {"noiseKey": noise_key})


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
def test_helm_rejects_stream_configs_the_workers_refuse(helm, stream):
    assert schema_error(helm, {"noiseKey": {"value": KEY}, "config": {"streams": [stream]}})


def test_helm_lint_accepts_the_compose_stack_streams(helm):
    """docker/config/streams.toml (one stream of each model) passes the chart's schema as it loads in a worker."""
    streams = tomllib.loads(STREAMS_FILE.read_text())
    assert load_config(STREAMS_FILE).streams
    result = lint(helm, {"config": streams})
    assert result.returncode == 0, result.stdout + result.stderr


def noise_key_of(manifests: dict[str, list[dict]]) -> tuple[str, str, str | None]:
    """(Secret, entry) the worker reads WEVENT_NOISE_KEY from, and the key if the chart's Secret holds it."""
    ref = next(e for e in worker(manifests)["env"] if e["name"] == "WEVENT_NOISE_KEY")["valueFrom"]["secretKeyRef"]
    secrets = {doc["metadata"]["name"]: doc["data"] for doc in manifests.get("Secret", [])}
    held = secrets.get(ref["name"], {}).get(ref["key"])
    return ref["name"], ref["key"], base64.b64decode(held).decode() if held is not None else None


def test_two_renders_give_the_same_noise_key_from_a_value(helm):
    first = render(helm, {"noiseKey": {"value": KEY}})
    second = render(helm, {"noiseKey": {"value": KEY}})
    assert noise_key_of(first) == noise_key_of(second) == (f"{RELEASE}-wevent", "noise-key", KEY)


@pytest.mark.parametrize("values", [{"noiseKey": {"value": "ab" * 32}},
                                    {"noiseKey": {"existingSecret": "wevent-noise-key"}}, EVERYTHING])
def test_two_renders_of_the_same_values_are_identical(helm, values):
    first = template(helm, values)
    assert first.returncode == 0, first.stderr
    assert template(helm, values).stdout == first.stdout


def test_the_noise_key_comes_from_an_existing_secret(helm):
    manifests = render(helm, {"noiseKey": {"existingSecret": "wevent-noise-key", "secretKey": "key"}})
    assert "Secret" not in manifests  # nothing for the chart's own Secret to hold
    assert noise_key_of(manifests) == ("wevent-noise-key", "key", None)


@pytest.mark.parametrize("noise_key, message", [
    ({}, "noiseKey: set noiseKey.existingSecret (a Secret holding the key) or noiseKey.value (64 hex characters, "
         "openssl rand -hex 32); the chart never generates the key"),
    ({"value": "ab" * 32, "existingSecret": "wevent-noise-key"},
     "noiseKey: set noiseKey.existingSecret or noiseKey.value, not both"),
])
def test_rendering_without_exactly_one_noise_key_fails_with_a_message(helm, noise_key, message):
    assert message in render_failure(helm, {"noiseKey": noise_key})


def test_no_template_draws_randomness():
    for template_file in (CHART / "templates").iterdir():
        assert not re.search(r"\b(rand[A-Z]\w*|randInt|uuidv4|genPrivateKey|genCA|genSelfSignedCert)\b",
                             template_file.read_text()), template_file.name


def test_a_personalized_stream_renders_and_loads(helm, tmp_path, monkeypatch):
    csv = "user,w,epsilon\n" + "".join(f"{u},{10 + u % 3},{0.5 + (u % 2) / 2}\n" for u in range(STREAM["users"]))
    from_csv = {**PERSONALIZED, "name": "taxi-csv", "options": {"requirements": "/etc/wevent/users.csv"}}
    values = {"noiseKey": {"value": KEY}, "configFiles": {"users.csv": csv},
              "config": {"streams": [PERSONALIZED, from_csv]}}
    result = lint(helm, values)
    assert result.returncode == 0, result.stdout + result.stderr
    [config_map] = render(helm, values)["ConfigMap"]
    files = config_map["data"]
    assert files["users.csv"] == csv
    (tmp_path / "streams.yaml").write_text(files["streams.yaml"])
    config = load_config(tmp_path / "streams.yaml")
    assert [(s.name, s.model, s.epsilon) for s in config.streams] == [("taxi-personalized", "personalized", None),
                                                                      ("taxi-csv", "personalized", None)]
    monkeypatch.setenv("WEVENT_NOISE_KEY", KEY)
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
