"""Shared paths and helpers of the deployment tests (docker/, helm/).

The tools these tests run (Debian's docker-compose and prometheus packages, the real `helm` built
with Go at the version the Makefile pins) are installed by `make deploy-tools`, which `make test`
runs; a test whose tool is missing fails and says how to get it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path, PurePosixPath

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
COMPOSE_FILE = DOCKER / "docker-compose.yml"
STREAMS_FILE = DOCKER / "config" / "streams.toml"
PROMETHEUS_CONFIG = DOCKER / "prometheus" / "prometheus.yml"
ALERT_RULES = DOCKER / "prometheus" / "alerts.yml"
DASHBOARDS = DOCKER / "grafana" / "dashboards"
CHART = ROOT / "helm" / "wevent"
CHART_ALERT_RULES = CHART / "files" / "alerts.yml"
MAKEFILE = ROOT / "Makefile"


def tool(name: str, debian_package: str) -> str:
    """The path of a command-line tool, or a failure naming the package that provides it."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"`{name}` is not installed: `make setup` installs it (apt-get install {debian_package})")
    return path


def helm_version() -> str:
    """The helm release the Makefile pins (``HELM_VERSION``)."""
    found = re.search(r"^HELM_VERSION := (v\S+)$", MAKEFILE.read_text(), re.MULTILINE)
    assert found is not None, "the Makefile pins no HELM_VERSION"
    return found.group(1)


def helm_binary() -> str:
    """The pinned helm in its cache, as `make deploy-tools` builds it, or a failure saying so."""
    version = helm_version()
    path = Path.home() / ".cache" / "wevent" / f"helm-{version}" / "helm"
    if not path.exists():
        pytest.fail(f"helm {version} is not built: `make deploy-tools` builds it into {path.parent} with Go")
    return str(path)


def chart_kube_version() -> str:
    """The oldest Kubernetes release the chart supports (``kubeVersion: ">=X.Y.Z-0"`` in Chart.yaml),
    which `helm template` is told it renders for."""
    found = re.fullmatch(r">=(\d+\.\d+\.\d+)-0", yaml.safe_load((CHART / "Chart.yaml").read_text())["kubeVersion"])
    assert found is not None, "Chart.yaml's kubeVersion is not of the form >=X.Y.Z-0"
    return found.group(1)


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


def keys_env() -> dict[str, str]:
    """The environment with fresh secret keys and their public keys (`wevent keys`), as an operator
    sets them before `docker compose up`."""
    from wevent.core.randomness import SecretKey
    from wevent.stream.wire.seals import release_seal, report_seal, request_seal

    noise, device = SecretKey.generate(), SecretKey.generate()
    return {**os.environ, "WEVENT_NOISE_KEY": noise.hex(), "WEVENT_DEVICE_KEY": device.hex(),
            "WEVENT_REQUEST_PUBLIC_KEY": request_seal(noise).public_hex,
            "WEVENT_RELEASE_PUBLIC_KEY": release_seal(noise).public_hex,
            "WEVENT_DEVICE_PUBLIC_KEY": report_seal(device).public_hex}


def compose_config(env: dict[str, str]) -> subprocess.CompletedProcess:
    """`docker-compose config`: the compose file parsed, merged and interpolated (no engine needed)."""
    return subprocess.run([tool("docker-compose", "docker-compose"), "-f", str(COMPOSE_FILE), "config"],
                          capture_output=True, text=True, env=env, cwd=DOCKER, timeout=60)


@pytest.fixture(scope="session")
def compose() -> dict:
    """The compose file as docker-compose resolves it (anchors merged, paths absolute)."""
    result = compose_config(keys_env())
    assert result.returncode == 0, f"docker-compose config failed:\n{result.stderr}"
    return yaml.safe_load(result.stdout)


@pytest.fixture(scope="session")
def streams_raw() -> dict:
    """docker/config/streams.toml as plain data (the stack's stream config)."""
    return tomllib.loads(STREAMS_FILE.read_text())


def mounts(service: dict) -> list[tuple[str, PurePosixPath]]:
    """(source, container path) of each volume; the source is a host path or a named volume."""
    result = []
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        result.append((source, PurePosixPath(target)))
    return result


def source_of(service: dict, container_path: str) -> tuple[str, PurePosixPath] | None:
    """The mount holding ``container_path`` and the path below it, or None."""
    path = PurePosixPath(container_path)
    for source, target in mounts(service):
        if path == target or target in path.parents:
            return source, path.relative_to(target)
    return None


def host_file(service: dict, container_path: str) -> Path:
    found = source_of(service, container_path)
    assert found is not None, f"{container_path} is on no volume of the service"
    source, below = found
    assert source.startswith("/"), f"{container_path} is on the named volume {source!r}, not a host path"
    return Path(source) / below
