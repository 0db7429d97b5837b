"""The oldest versions pyproject.toml declares it supports are the versions it runs on.

Every dependency of the package and of its `stream` and `broker` extras is declared as a range.
This test installs the floor of each range (its ``>=`` bound, exactly) into a fresh virtual
environment beside a wheel of the checkout, then runs the in-process stream tests and one
`wevent run` through the embedded broker there. The top of each range is what docker/requirements.lock
pins and what the rest of the suite runs on (tests/deploy/test_image.py checks that).
"""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest
from packaging.requirements import Requirement

from tests.packages import ROOT, build_wheel

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS = ("stream", "broker")
TEST_TOOLS = ("pytest>=8", "pytest-timeout>=2.3", "hypothesis>=6.100", "jsonschema>=4.18")


def declared() -> list[Requirement]:
    return [Requirement(text) for text in
            [*PROJECT["dependencies"], *(text for extra in EXTRAS for text in PROJECT["optional-dependencies"][extra])]]


def floor(requirement: Requirement) -> str:
    """``name==X`` for the requirement's ``>=X`` bound."""
    lower = [spec.version for spec in requirement.specifier if spec.operator == ">="]
    assert len(lower) == 1, f"{requirement} declares no single floor (>=)"
    return f"{requirement.name}=={lower[0]}"


def test_every_dependency_is_a_range_with_a_floor():
    for requirement in declared():
        assert "==" not in str(requirement.specifier), f"{requirement} is pinned, not a range"
        floor(requirement)


@pytest.mark.slow
def test_the_floors_of_the_declared_ranges_run_the_stream(tmp_path):
    wheel = build_wheel(tmp_path)
    venv = tmp_path / "floor"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    floors = tmp_path / "floors.txt"
    floors.write_text("\n".join(floor(r) for r in declared()) + "\n")
    install = subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                              "-c", str(floors), f"wevent[{','.join(EXTRAS)}] @ {wheel.as_uri()}", *TEST_TOOLS],
                             capture_output=True, text=True, timeout=1200)
    assert install.returncode == 0, install.stderr[-2000:]
    installed = subprocess.run([python, "-m", "pip", "freeze"], capture_output=True, text=True, check=True).stdout
    for line in floors.read_text().split():
        assert line.split("[")[0].lower() in installed.lower(), f"{line} not installed: {installed}"

    tests = subprocess.run([python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "tests/stream"],
                           cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
    run = subprocess.run([str(venv / "bin" / "wevent"), "run", "--slots", "5", "--quiet"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and "5 releases of stream 'taxi'" in run.stderr, run.stdout + run.stderr
