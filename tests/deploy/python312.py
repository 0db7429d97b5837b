"""Where Python 3.12 is on this machine (helm-sdkpy's wheels need it), for the Makefile and the tests.

Run as a script it prints the interpreter's path, or exits 1 when there is none. A `python3.12` on
PATH may be a pyenv shim for a version that is not selected: it counts only if it runs.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HELM_VENV = ROOT / ".venv312"  # made by `make setup` from helm-requirements.txt beside this file
HELM_REQUIREMENTS = Path(__file__).with_name("helm-requirements.txt")


def runs(python: str) -> bool:
    try:
        return subprocess.run([python, "-c", "import sys; assert sys.version_info[:2] == (3, 12)"],
                              capture_output=True, timeout=30).returncode == 0
    except OSError:
        return False


def find_python312() -> str | None:
    pyenv_root = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    candidates = [shutil.which("python3.12"), *sorted(glob.glob(f"{pyenv_root}/versions/3.12*/bin/python3.12"))]
    return next((c for c in candidates if c and runs(c)), None)


if __name__ == "__main__":
    found = find_python312()
    if found is None:
        sys.exit(1)
    print(found)
