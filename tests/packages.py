"""The package's modules as the installed import name ``wevent`` knows them.

pyproject.toml maps the repository's three folders onto one import name (its ``package-dir``):
``pipeline/`` is ``wevent``, ``producers/`` is ``wevent.producers`` and ``topologies/`` is
``wevent.topologies``. The tests that read the source (layers, doctests, packaging) name its files
through this mapping, read from pyproject.toml itself.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
FOLDERS = {folder: package for package, folder in SETUPTOOLS["package-dir"].items()}  # folder -> package


def module_name(path: Path) -> str:
    """``pipeline/core/noise.py`` -> ``wevent.core.noise``; a package's ``__init__.py`` -> the package."""
    folder, *rest = path.resolve().relative_to(ROOT).with_suffix("").parts
    parts = [FOLDERS[folder], *rest]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_files() -> list[Path]:
    """Every Python file of the package, in a fixed order."""
    return [path for folder in sorted(FOLDERS) for path in sorted((ROOT / folder).rglob("*.py"))]


def package_folders() -> dict[str, Path]:
    """Every package (a folder with an ``__init__.py``) by its installed name."""
    return {module_name(path): path.parent for path in source_files() if path.name == "__init__.py"}


def build_wheel(tmp_path: Path) -> Path:
    """A wheel of the checkout's tracked files, built in a copy (a build writes into its source tree)."""
    source = tmp_path / "source"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((ROOT / name).read_bytes())
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--disable-pip-version-check", "-w", str(tmp_path / "dist"), str(source)],
                   check=True, capture_output=True, timeout=300)
    return next((tmp_path / "dist").glob("wevent-*.whl"))
