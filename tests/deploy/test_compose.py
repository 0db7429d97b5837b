"""docker/docker-compose.yml: parsed by Debian's docker-compose (no engine needed), every wevent
service command parsed by the real `wevent` argument parser, and the stack's pieces consistent
with each other: topics, scrape targets, mounted files, streams and listeners."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re

import pytest
import yaml

from wevent.cli import build_parser
from wevent.cli._common import directory, listen_port, readable_file, writable_file
from wevent.stream.config import AppConfig, load_config
from wevent.stream.agents.processors import Processors
from wevent.stream.settings import Settings

from .conftest import (COMPOSE_FILE, DASHBOARDS, DOCKER, PROMETHEUS_CONFIG, STREAMS_FILE, compose_config, host_file,
                       keys_env, source_of)

WEVENT_DOCKERFILE = "docker/Dockerfile"
RAW = yaml.safe_load(COMPOSE_FILE.read_text())


def builds_wevent(service: dict) -> bool:
    return service.get("build", {}).get("dockerfile") == WEVENT_DOCKERFILE


WEVENT_SERVICES = sorted(name for name, service in RAW["services"].items() if builds_wevent(service))


# Argument types that look at this machine's files and ports; a container's are its own (their
# paths are checked against the mounts by the tests below).
HOST_TYPES = {readable_file, writable_file, directory, listen_port}


def container_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` with every option's type and range, but no look at this machine's files or ports."""
    for action in parser._actions:
        if action.type in HOST_TYPES:
            action.type = None
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                container_parser(sub)
    return parser


def parse_wevent(argv: list[str]):
    """The image's ENTRYPOINT is `wevent`: parse its arguments without running anything."""
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            return container_parser(build_parser(Settings())).parse_args(argv)
    except SystemExit:
        pytest.fail(f"`wevent {' '.join(argv)}` is not a valid invocation: {errors.getvalue().strip()}")


def worker_services(compose: dict) -> list[str]:
    return [name for name in WEVENT_SERVICES if compose["services"][name]["command"][0] == "worker"]


def test_compose_refuses_to_start_without_the_noise_key():
    env = {k: v for k, v in keys_env().items() if k != "WEVENT_NOISE_KEY"}
    result = compose_config(env)
    assert result.returncode != 0
    assert "WEVENT_NOISE_KEY" in result.stderr


def test_kafka_is_the_pinned_official_image_in_kraft_mode(compose):
    for name in ("kafka", "kafka-topics"):
        image = compose["services"][name]["image"]
        repository, _, tag = image.partition(":")
        assert repository == "apache/kafka" and re.fullmatch(r"\d+\.\d+\.\d+", tag), f"{name}: {image}"
    env = compose["services"]["kafka"]["environment"]
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert not any(key.startswith("KAFKA_ZOOKEEPER") for key in env)


@pytest.mark.parametrize("name", WEVENT_SERVICES)
def test_service_command_is_a_valid_wevent_invocation(compose, streams_raw, name):
    service = compose["services"][name]
    args = parse_wevent(service["command"])
    if getattr(args, "config", None):
        config_file = host_file(service, args.config)
        assert config_file == STREAMS_FILE, f"{name} reads {config_file}, not the stack's stream config"
        stream_names = [s["name"] for s in streams_raw["streams"]]
        given = getattr(args, "stream", None) or []
        for stream in [given] if isinstance(given, str) else given:  # a device fleet may serve several
            assert stream in stream_names, f"{name}: --stream {stream} is not in {stream_names}"
    if getattr(args, "bootstrap", None):
        listeners = compose["services"]["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
        advertised = {re.sub(r"^\w+://", "", listener) for listener in listeners.split(",")}
        assert args.bootstrap in advertised, f"{name}: --bootstrap {args.bootstrap} is not advertised by kafka"
        assert "kafka" in service.get("depends_on", {}) or "kafka-topics" in service.get("depends_on", {})
    for path in getattr(args, "paths", None) or []:  # replay inputs
        assert host_file(service, path).is_dir(), f"{name}: input {path} is not a mounted directory"
    given = getattr(args, "values", None) or []
    for values in [given] if isinstance(given, str) else given:  # device values: another service's --dump
        volume, below = source_of(service, values)
        writers = [other for other, spec in compose["services"].items() if other != name
                   and "--dump" in spec.get("command", [])
                   and source_of(spec, spec["command"][spec["command"].index("--dump") + 1]) == (volume, below)]
        assert writers, f"{name}: no service writes {values}"
        assert all(service["depends_on"].get(w, {}).get("condition") == "service_completed_successfully"
                   for w in writers), f"{name} must wait for {writers}"


def test_every_service_command_of_the_wevent_image_is_checked():
    """The list above is the compose file's: a new wevent service is checked without editing the test."""
    assert {"worker-1", "worker-2", "replay", "replay-personalized", "replay-local", "devices-1",
            "devices-2"} <= set(WEVENT_SERVICES)


def test_topic_creation_matches_the_stream_config(compose, streams_raw):
    script = compose["services"]["kafka-topics"]["command"][-1]
    created = {name: int(n) for name, n in re.findall(r"^create (\S+) (\d+)$", script, flags=re.M)}
    config = AppConfig(streams=(), report_partitions=streams_raw["report_partitions"],
                       stream_partitions=streams_raw["stream_partitions"])
    assert created == config.topics()


def test_prometheus_scrapes_every_worker_truth_monitor_and_device_shard(compose):
    """Jobs: wevent-worker, every worker's web port; wevent-truth, every replay's --truth-port;
    wevent-devices, every device shard's --metrics-port."""
    expected = {"wevent-worker": set(), "wevent-devices": set()}
    for name in WEVENT_SERVICES:
        args = parse_wevent(compose["services"][name]["command"])
        if args.command == "worker":
            expected["wevent-worker"].add(f"{name}:{args.web_port}")
        elif getattr(args, "truth_port", None):  # loopback only: no container could scrape it
            pytest.fail(f"{name} serves the truth, which listens on loopback only")
        elif args.command == "devices" and args.metrics_port:
            expected["wevent-devices"].add(f"{name}:{args.metrics_port}")
    scrape = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    jobs = {job["job_name"]: {t for group in job["static_configs"] for t in group["targets"]}
            for job in scrape["scrape_configs"]}
    assert jobs == expected
    assert compose["services"]["prometheus"]["volumes"][0].startswith(f"{PROMETHEUS_CONFIG.parent}:")


def test_only_workers_keep_the_image_healthcheck_on_the_port_they_serve(compose):
    dockerfile = (DOCKER / "Dockerfile").read_text()
    image_port = int(re.search(r"WEVENT_WEB_PORT=(\d+)", dockerfile).group(1))
    assert "/livez" in re.search(r"HEALTHCHECK.*?\n[^\n]*CMD[^\n]*", dockerfile, flags=re.S).group(0)
    workers = worker_services(compose)
    for name in WEVENT_SERVICES:
        service = compose["services"][name]
        disabled = service.get("healthcheck", {}).get("test") == ["NONE"]
        if name in workers:
            web_port = parse_wevent(service["command"]).web_port
            port = int(service.get("environment", {}).get("WEVENT_WEB_PORT", image_port))
            assert not disabled and web_port == port, f"{name} serves {web_port}, the check probes {port}"
        else:
            assert disabled, f"{name} runs `wevent {service['command'][0]}`, which serves no /livez"


def test_grafana_provisions_the_dashboards_and_datasource_from_files(compose):
    grafana = compose["services"]["grafana"]
    provider = yaml.safe_load((DOCKER / "grafana/provisioning/dashboards/wevent.yml").read_text())["providers"][0]
    assert host_file(grafana, provider["options"]["path"]) == DASHBOARDS
    assert host_file(grafana, "/etc/grafana/provisioning") == DOCKER / "grafana" / "provisioning"
    assert os.listdir(DASHBOARDS), "no dashboard files"
    datasource = yaml.safe_load((DOCKER / "grafana/provisioning/datasources/prometheus.yml").read_text())
    url = datasource["datasources"][0]["url"]
    assert re.fullmatch(r"http://prometheus:\d+", url) and "prometheus" in compose["services"]


def test_the_workers_accept_the_stack_stream_config(monkeypatch):
    """What `wevent worker` does with config/streams.toml before it joins the group: load it and
    build every stream's processors (a stream the pipeline cannot run stops the worker)."""
    env = keys_env()
    for name in ("WEVENT_NOISE_KEY", "WEVENT_DEVICE_PUBLIC_KEY", "WEVENT_RELEASE_PUBLIC_KEY"):  # what compose gives a worker
        monkeypatch.setenv(name, env[name])
    config = load_config(STREAMS_FILE)
    processors = Processors.build(config, Settings.from_environ(os.environ))
    assert set(processors.publication.logics) == {s.name for s in config.streams}


def test_the_subscriber_verifies_with_the_release_key_the_workers_sign_with(monkeypatch):
    """The subscriber gets the release public key that `wevent keys` derives from the workers' noise
    key, and the stack refuses to start without it; a worker given another key stops at start."""
    from wevent.core.randomness import SecretKey
    from wevent.stream.config import ConfigError
    from wevent.stream.wire.seals import release_seal

    env = keys_env()
    resolved = compose_config(env)
    assert resolved.returncode == 0, resolved.stderr
    services = yaml.safe_load(resolved.stdout)["services"]
    noise = services["worker-1"]["environment"]["WEVENT_NOISE_KEY"]
    assert services["subscribe"]["environment"]["WEVENT_RELEASE_PUBLIC_KEY"] == \
        services["worker-1"]["environment"]["WEVENT_RELEASE_PUBLIC_KEY"] == release_seal(SecretKey.from_hex(noise)).public_hex
    args = parse_wevent(services["subscribe"]["command"])
    assert args.command == "subscribe" and not args.no_verify and args.release_key is None  # the variable's key
    without = compose_config({k: v for k, v in env.items() if k != "WEVENT_RELEASE_PUBLIC_KEY"})
    assert without.returncode != 0 and "WEVENT_RELEASE_PUBLIC_KEY" in without.stderr
    monkeypatch.setenv("WEVENT_NOISE_KEY", noise)
    monkeypatch.setenv("WEVENT_DEVICE_PUBLIC_KEY", env["WEVENT_DEVICE_PUBLIC_KEY"])
    monkeypatch.setenv("WEVENT_RELEASE_PUBLIC_KEY", release_seal(SecretKey.generate()).public_hex)  # a stale export
    with pytest.raises(ConfigError, match="WEVENT_RELEASE_PUBLIC_KEY .* is not this server's release public key"):
        Processors.build(load_config(STREAMS_FILE), Settings.from_environ(os.environ))
