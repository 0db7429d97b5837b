"""helm/wevent with the real helm (the release the Makefile pins, built with Go): `helm lint --strict`
with the default values and with every optional part switched on, schema violations refused,
`helm template` rendering with default and non-default values (the noise key is never generated:
two renders give the same key, none renders without a key), and the stream configs the chart
mounts loadable by the worker."""

from __future__ import annotations

import base64
import os
import re
import tomllib

import pytest
import yaml

from wevent.core.personalized import Requirements
from wevent.stream.config import load_config
from wevent.stream.agents.processors import logic_for
from wevent.stream.settings import Settings

from .conftest import CHART, STREAMS_FILE, helm_version
from .helm_chart import (EVERYTHING, KEY, RELEASE, SASL, TLS_DIR,
                         TLS_FORMS, lint, pod_spec, render, render_failure, schema_error, template, worker)


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
    assert sorted(manifests) == ["ConfigMap", "Deployment", "Pod", "PodDisruptionBudget", "Secret", "Service",
                                 "ServiceAccount"]  # the Pod: `helm test`
    env = {e["name"]: e for e in worker(manifests)["env"]}
    assert env["WEVENT_KAFKA_SECURITY_PROTOCOL"]["value"] == "PLAINTEXT"
    assert [v["name"] for v in pod_spec(manifests)["volumes"]] == ["config", "data", "tmp"]



def test_helm_lint_passes_with_every_optional_part_enabled(helm):
    result = lint(helm, EVERYTHING)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(render(helm, EVERYTHING)) == ["ConfigMap", "Deployment", "NetworkPolicy", "Pod",
                                                "PodDisruptionBudget", "PrometheusRule", "Secret", "Service",
                                                "ServiceAccount", "ServiceMonitor"]


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


def test_the_release_public_key_reaches_the_worker_as_its_variable(helm):
    """Subscribers in the workers' pods (and the workers' own check of it) read WEVENT_RELEASE_PUBLIC_KEY."""
    from wevent.core.randomness import SecretKey
    from wevent.stream.wire.seals import release_seal

    public = release_seal(SecretKey.from_hex(KEY)).public_hex
    env = {e["name"]: e for e in worker(render(helm, {"noiseKey": {"value": KEY}, "releasePublicKey": public}))["env"]}
    assert env["WEVENT_RELEASE_PUBLIC_KEY"] == {"name": "WEVENT_RELEASE_PUBLIC_KEY", "value": public}
    unset = worker(render(helm, {"noiseKey": {"value": KEY}}))["env"]
    assert "WEVENT_RELEASE_PUBLIC_KEY" not in {e["name"] for e in unset}
    assert schema_error(helm, {"noiseKey": {"value": KEY}, "releasePublicKey": "not-a-key"})


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



def kafka_env(manifests: dict[str, list[dict]]) -> dict[str, str | tuple[str, str]]:
    """The worker's WEVENT_KAFKA_* variables: a value, or the (Secret, entry) it comes from."""
    out = {}
    for variable in worker(manifests)["env"]:
        if variable["name"].startswith("WEVENT_KAFKA_"):
            ref = variable.get("valueFrom", {}).get("secretKeyRef")
            out[variable["name"]] = (ref["name"], ref["key"]) if ref else variable["value"]
    return out


def tls_files(manifests: dict[str, list[dict]]) -> tuple[str, list[str]] | None:
    """The Secret mounted read-only at TLS_DIR and its entries there, or None when nothing is."""
    volumes = {v["name"]: v for v in pod_spec(manifests)["volumes"]}
    mounts = [m for m in worker(manifests)["volumeMounts"] if m["mountPath"] == TLS_DIR]
    if not mounts:
        assert "kafka-tls" not in volumes
        return None
    [mount] = mounts
    assert mount["readOnly"] is True
    secret = volumes[mount["name"]]["secret"]
    assert secret["defaultMode"] == 0o440
    assert [item["key"] for item in secret["items"]] == [item["path"] for item in secret["items"]]
    return secret["secretName"], [item["key"] for item in secret["items"]]


@pytest.mark.parametrize("kafka, env, files", TLS_FORMS.values(), ids=TLS_FORMS)
def test_every_tls_form_lints_and_renders_its_variables_and_files(helm, kafka, env, files):
    values = {"noiseKey": {"value": KEY}, "kafka": kafka}
    linted = lint(helm, values)
    assert linted.returncode == 0, linted.stdout + linted.stderr
    manifests = render(helm, values)
    assert kafka_env(manifests) == env
    assert tls_files(manifests) == files


def test_sasl_credentials_are_in_the_chart_secret_unless_an_existing_secret_holds_them(helm):
    own = render(helm, {"noiseKey": {"value": KEY}, "kafka": {"sasl": SASL}})
    [secret] = own["Secret"]
    assert {k: base64.b64decode(v).decode() for k, v in secret["data"].items()} == {
        "noise-key": KEY, "kafka-username": "wevent", "kafka-password": "secret"}
    existing = render(helm, {"noiseKey": {"value": KEY},
                             "kafka": {"sasl": {"username": "wevent", "existingSecret": "kafka-credentials"}}})
    [secret] = existing["Secret"]
    assert sorted(secret["data"]) == ["noise-key"]


def test_no_mount_lies_inside_a_read_only_mount(helm):
    """Kubernetes cannot create a mount point inside a read-only volume (the ConfigMap at /etc/wevent)."""
    every_values = [EVERYTHING, *({"noiseKey": {"value": KEY}, "kafka": kafka} for kafka, _, _ in TLS_FORMS.values())]
    for values in every_values:
        mounts = worker(render(helm, values))["volumeMounts"]
        for inner in mounts:
            for outer in mounts:
                assert not (outer.get("readOnly") and inner["mountPath"].startswith(outer["mountPath"] + "/")), \
                    (inner, outer)


def test_the_extra_env_and_volumes_follow_the_charts_own(helm):
    manifests = render(helm, EVERYTHING)
    container, spec = worker(manifests), pod_spec(manifests)
    assert container["env"][-1] == EVERYTHING["extraEnv"][0]
    assert container["envFrom"] == EVERYTHING["extraEnvFrom"]
    assert spec["volumes"][-1] == EVERYTHING["extraVolumes"][0]
    assert container["volumeMounts"][-1] == EVERYTHING["extraVolumeMounts"][0]
    assert [v["name"] for v in spec["volumes"]] == ["config", "data", "tmp", "kafka-tls", "kafka-properties", "site-ca"]
    assert "envFrom" not in worker(render(helm, {"noiseKey": {"value": KEY}}))


@pytest.mark.parametrize("values, message", [
    ({"kafka": {"securityProtocol": "SASL_SSL"}},
     "kafka.securityProtocol SASL_SSL needs kafka.sasl.username"),
    ({"kafka": {"sasl": {"existingSecret": "kafka-credentials"}}},
     "kafka.sasl.username is empty, which switches SASL off, but kafka.sasl.password or kafka.sasl.existingSecret"),
    ({"kafka": {"securityProtocol": "SSL", "sasl": SASL}},
     "kafka.sasl.username is set but kafka.securityProtocol SSL sends no credentials"),
    ({"kafka": {"tls": {"existingSecret": "kafka-ca"}}},
     "kafka.tls.existingSecret is set but kafka.securityProtocol PLAINTEXT uses no TLS"),
    ({"kafka": {"securityProtocol": "SASL_PLAINTEXT", "sasl": SASL, "tls": {"existingSecret": "kafka-ca"}}},
     "kafka.tls.existingSecret is set but kafka.securityProtocol SASL_PLAINTEXT uses no TLS"),
    ({"kafka": {"securityProtocol": "SSL", "tls": {"existingSecret": "kafka-ca", "ca": False}}},
     "kafka.tls.existingSecret is set but neither kafka.tls.ca nor kafka.tls.clientCertificate"),
    ({"kafka": {"securityProtocol": "SSL", "tls": {"clientCertificate": True}}},
     "kafka.tls.clientCertificate needs kafka.tls.existingSecret"),
    ({"kafka": {"securityProtocol": "SSL", "tls": {"existingSecret": "kafka-ca", "keyPasswordKey": "pw"}}},
     "kafka.tls.keyPasswordKey is set but kafka.tls.clientCertificate is not"),
    ({"extraEnv": [{"name": "WEVENT_NOISE_KEY", "value": "ab" * 32}]},
     "extraEnv sets WEVENT_NOISE_KEY, which the chart sets itself"),
    ({"extraEnv": [{"name": "WEVENT_KAFKA_SECURITY_PROTOCOL", "value": "SSL"}]},
     "extraEnv sets WEVENT_KAFKA_SECURITY_PROTOCOL, which the chart sets itself"),
    ({"extraEnv": [{"name": "HTTPS_PROXY", "value": "a"}, {"name": "HTTPS_PROXY", "value": "b"}]},
     "extraEnv sets HTTPS_PROXY twice"),
    ({"extraVolumes": [{"name": "config", "emptyDir": {}}]},
     "extraVolumes has a second volume named config"),
    ({"extraVolumeMounts": [{"name": "site-ca", "mountPath": "/etc/site-ca"}]},
     "extraVolumeMounts mounts site-ca, which is no volume of the pod"),
    ({"extraVolumes": [{"name": "site-ca", "emptyDir": {}}],
      "extraVolumeMounts": [{"name": "site-ca", "mountPath": "/etc/wevent/site-ca"}]},
     "extraVolumeMounts mounts site-ca at /etc/wevent/site-ca, on or inside the mount of config at /etc/wevent"),
    ({"extraVolumes": [{"name": "scratch", "emptyDir": {}}],
      "extraVolumeMounts": [{"name": "scratch", "mountPath": "/tmp"}]},
     "extraVolumeMounts mounts scratch at /tmp, on or inside the mount of tmp at /tmp"),
])
def test_settings_that_disagree_fail_the_render_with_one_line(helm, values, message):
    stderr = render_failure(helm, {"noiseKey": {"value": KEY}, **values})
    assert "Error: execution error at (wevent/templates/deployment.yaml" in stderr and message in stderr, stderr


@pytest.mark.parametrize("values", [
    {"kafka": {"securityProtocol": "TLS"}},
    {"kafka": {"securityprotocol": "SSL"}},  # misspelt: PLAINTEXT would stay in force
    {"kafka": {"tls": {"clientCert": True}}},
    {"kafka": {"tls": {"existingSecret": "Kafka_CA"}}},  # not a Kubernetes name
    {"kafka": {"sasl": {"mechanism": "GSSAPI"}}},
    {"extraEnv": [{"value": "no name"}]},
    {"extraEnv": {"HTTPS_PROXY": "http://proxy:3128"}},  # a map, not a list of EnvVar
    {"extraVolumeMounts": [{"name": "site-ca"}]},
])
def test_helm_rejects_kafka_and_extra_values_of_the_wrong_shape(helm, values):
    assert schema_error(helm, {"noiseKey": {"value": KEY}, **values})


def test_no_template_draws_randomness():
    for template_file in (CHART / "templates").rglob("*.*"):
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
    assert logic_for(config, config.streams[0], Settings.from_environ(os.environ)).groups >= 1
    (tmp_path / "users.csv").write_text(files["users.csv"])
    assert Requirements.load_csv(tmp_path / "users.csv").users == STREAM["users"]


def test_chart_default_stream_config_loads_like_wevent_run_config(tmp_path):
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    path = tmp_path / "streams.yaml"  # what the ConfigMap mounts: toYaml .Values.config
    path.write_text(yaml.safe_dump(values["config"]))
    config = load_config(path)
    assert [s.name for s in config.streams] == [s["name"] for s in values["config"]["streams"]]
    assert config.report_partitions == values["config"]["report_partitions"]


def test_the_notes_subscribe_with_the_release_key():
    """`wevent subscribe` refuses to run without a key to verify with: the install notes give it one."""
    lines = (CHART / "templates" / "NOTES.txt").read_text().splitlines()
    commands = [i for i, line in enumerate(lines) if line.strip().startswith("wevent subscribe")]
    assert len(commands) == 2  # with releasePublicKey set, and without
    for i in commands:
        assert "--release-key {{ .Values.releasePublicKey }}" in lines[i] or "wevent keys)" in lines[i - 1]
