"""The pipeline with the Kafka client settings of the stack (producers and workers configured for a
real Kafka, as docker-compose and Helm run them): against the embedded broker here, and against a
real Apache Kafka (the image and KRaft settings of docker-compose.yml) in a testcontainers
container, skipped with the reason where no Docker engine answers (as on the development machines).
Each runs `wevent run --bootstrap` and `wevent audit` of the audit topic."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from wevent.stream.runtime.broker import EmbeddedBroker, free_port
from wevent.stream.runtime.child_processes import wait_until

from .conftest import COMPOSE_FILE

pytestmark = [pytest.mark.slow, pytest.mark.integration]

SLOTS = 20


def docker_engine_problem() -> str | None:
    """Why no Docker engine can run containers here, or None when one answers."""
    try:
        import docker

        docker.from_env(timeout=5).ping()
    except Exception as exc:  # the client is missing, no socket, or the daemon does not answer
        return f"{type(exc).__name__}: {exc}"
    return None


def reachable(bootstrap: str) -> bool:
    from confluent_kafka.admin import AdminClient

    try:
        AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=2)
        return True
    except Exception:  # the broker is still starting
        return False


@pytest.fixture(scope="module")
def kafka() -> str:
    problem = docker_engine_problem()
    if problem:
        pytest.skip(f"no Docker engine to run the Apache Kafka container: {problem}")
    from testcontainers.core.container import DockerContainer

    service = yaml.safe_load(COMPOSE_FILE.read_text())["services"]["kafka"]
    port = free_port()
    env = {key: str(value) for key, value in service["environment"].items() if key != "KAFKA_LOG_DIRS"}
    env.update(  # one listener, advertised on the host port the test binds
        KAFKA_LISTENERS="PLAINTEXT://:9092,CONTROLLER://:9093",
        KAFKA_ADVERTISED_LISTENERS=f"PLAINTEXT://localhost:{port}",
        KAFKA_LISTENER_SECURITY_PROTOCOL_MAP="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        KAFKA_INTER_BROKER_LISTENER_NAME="PLAINTEXT",
        KAFKA_CONTROLLER_QUORUM_VOTERS="1@localhost:9093",
    )
    container = DockerContainer(service["image"]).with_bind_ports(9092, port)
    for key, value in env.items():
        container = container.with_env(key, value)
    with container:
        bootstrap = f"localhost:{port}"
        assert wait_until(lambda: reachable(bootstrap), 120, 1.0), "Kafka did not start within 120 s"
        yield bootstrap


def run_and_audit(bootstrap: str, tmp_path, env: dict | None = None) -> None:
    """`wevent run --bootstrap`: every slot released in order; then `wevent audit` of its audit topic passes.
    An external Kafka outlives the run, so the run needs a lasting key from the environment."""
    from wevent.core.randomness import SecretKey
    from wevent.stream.wire.seals import release_seal

    log = tmp_path / "releases.jsonl"
    noise = os.urandom(32).hex()
    run = subprocess.run([sys.executable, "-m", "wevent.cli", "run", "--bootstrap", bootstrap, "--slots", str(SLOTS),
                          "--release-log", str(log), "--quiet"], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "WEVENT_NOISE_KEY": noise, **(env or {})})
    assert run.returncode == 0, run.stderr[-3000:]
    slots = [json.loads(line)["slot"] for line in log.read_text().splitlines()]
    assert slots == list(range(1, SLOTS + 1))
    audit = subprocess.run([sys.executable, "-m", "wevent.cli", "audit", "--bootstrap", bootstrap, "--release-key",
                            release_seal(SecretKey.from_hex(noise)).public_hex], capture_output=True, text=True,
                           timeout=120)
    assert audit.returncode == 0, audit.stdout + audit.stderr


def test_producers_configured_for_kafka_reach_the_workers_through_the_embedded_broker(tmp_path):
    """With --bootstrap, `wevent run` sends as `wevent replay --bootstrap` does in the stack (batched,
    compressed); the worker must decode that. The worker keeps its tansu settings (--tansu-compat via
    the environment), without which every hop waits out tansu's full fetch wait."""
    with EmbeddedBroker() as broker:
        run_and_audit(broker.bootstrap, tmp_path, {"WEVENT_TANSU_COMPAT": "1"})


def test_wevent_run_releases_every_slot_through_apache_kafka_and_the_audit_holds(kafka, tmp_path):
    run_and_audit(kafka, tmp_path)
