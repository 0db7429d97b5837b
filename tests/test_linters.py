"""The linters' verdicts are part of the suite: a ruff finding or a mypy error fails ``make test``.

Both are configured in pyproject.toml (ruff over the repository, mypy over the package wevent as
``make setup`` links it) and installed with the ``test`` extra; they run here as the developer would
run them.
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing():
    done = run("ruff", "check", "--no-cache", ".")
    assert "No module named ruff" not in done.stderr, "ruff is missing: pip install -e '.[test]'"
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_finds_no_error():
    done = run("mypy")
    assert "No module named mypy" not in done.stderr, "mypy is missing: pip install -e '.[test]'"
    assert "Can't find package" not in done.stdout + done.stderr, "mypy's view of the package is missing: make setup"
    assert done.returncode == 0, done.stdout + done.stderr
