"""docker/Dockerfile and its lock file: multi-stage, non-root, health check, and exact pins of the
whole dependency closure of `wevent[stream]` (no engine here, so the image itself is not built)."""

from __future__ import annotations

import re
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from .conftest import DOCKER

LOCK = DOCKER / "requirements.lock"


def read_lock() -> dict[str, Version]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            match = re.fullmatch(r"([A-Za-z0-9._-]+)==([^\s;]+)", line)
            assert match, f"not an exact pin: {line!r}"
            pins[canonicalize_name(match.group(1))] = Version(match.group(2))
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
    pins = read_lock()
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
    assert len(health) == 1 and "/healthz" in health[0] and "WEVENT_WEB_PORT" in health[0]
    build = steps[:stages[-1]]
    lock_install = [arg for op, arg in build if op == "RUN" and "requirements.lock" in arg]
    assert lock_install and "--no-deps" in lock_install[0], "dependencies come from the lock, nothing resolved"
    base = re.search(r"ARG PYTHON_IMAGE=(\S+)", (DOCKER / "Dockerfile").read_text()).group(1)
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+", base), f"base image not pinned to a release: {base}"
