"""Working directories of runs (``wevent run``, ``wevent bench soak``), and the removal of those
whose run is gone.

A run deletes its directory when it ends, whichever way it ends, except when it is killed outright
(SIGKILL, a crash of the machine): then nothing of it runs to clean up, and the directory (for a
local-model stream: the devices' true values) stays. So each directory records its owner: the
process id, the process's start time (clock ticks since boot, from ``/proc``) and the boot's id.
A process id can be reused; the three together cannot. A later run removes every directory whose
owner is gone, never one whose owner still runs. Where ``/proc`` cannot be read, no owner can be
told apart from another and nothing is removed.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

__all__ = ["make_workdir", "remove_stale_workdirs", "OWNER_FILE", "PREFIX"]

PREFIX = "wevent-"  # every run's directory: wevent-run-..., wevent-soak-...
OWNER_FILE = "owner.json"


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), or None if there is no such live process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    # after the command name: state (a zombie has ended), then the 20th field is the start time
    return None if fields[0] in ("Z", "X") else int(fields[19])


def _owner() -> dict | None:
    """This process as an owner: pid, start time, boot id (None where /proc does not tell)."""
    pid = os.getpid()
    start, boot = _start_time(pid), _boot_id()
    return None if start is None or boot is None else {"pid": pid, "start": start, "boot": boot}


def _gone(owner: dict, boot: str) -> bool:
    return owner["boot"] != boot or _start_time(int(owner["pid"])) != owner["start"]


def make_workdir(kind: str) -> Path:
    """A new directory (mode 0700) for a run of ``kind`` ("run", "soak") in the temporary
    directory, recording this process as its owner, after removing the directories of runs that
    are gone (:func:`remove_stale_workdirs`)."""
    remove_stale_workdirs()
    path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{kind}-"))
    owner = _owner()
    if owner is not None:
        draft = path / f".{OWNER_FILE}"
        draft.write_text(json.dumps(owner))
        draft.replace(path / OWNER_FILE)  # whole or absent: a half-written record is never read
    return path


def remove_stale_workdirs(parent: str | Path | None = None) -> list[Path]:
    """Remove the run directories in ``parent`` (default: the temporary directory) whose owner is
    gone, and return them. Only real directories of this user named ``wevent-*`` that hold an
    owner record count: anything else, a directory still being made included, is left alone."""
    boot = _boot_id()
    if boot is None or _owner() is None:
        return []
    removed = []
    for path in Path(parent or tempfile.gettempdir()).glob(f"{PREFIX}*"):
        try:
            info = path.lstat()
            owner = json.loads((path / OWNER_FILE).read_text())
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or not _gone(owner, boot):
                continue
        except (OSError, ValueError, KeyError, TypeError):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed
