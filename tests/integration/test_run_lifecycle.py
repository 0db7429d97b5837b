"""`wevent run` stops everything it started and leaves nothing behind, whichever way it ends.

The run is a real subprocess with its real children (the tansu broker, the worker, the device
fleet); the tests watch them through /proc. Killed outright, a run (or `wevent bench soak`) takes
its children with it, and the next run deletes the directory it left.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.run_helpers import (alive, children, command_of, environment, first_release, kill_leftovers,
                                           start_run, wait_for, wevent_run)

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("signum, mechanism", [(signal.SIGTERM, "lpa"), (signal.SIGHUP, "ba")])
def test_a_signal_stops_every_process_and_removes_the_working_directory(tmp_path, signum, mechanism):
    tmpdir = tmp_path / "tmp"
    env = environment(tmpdir)
    run = start_run(["-m", mechanism, "--speed", "60"], env, tmp_path)
    err = tmp_path / "stderr"
    started = {}
    try:
        assert first_release(tmp_path), err.read_text()
        started = children(run.pid)
        kinds = sorted(command_of(argv) for argv in started.values())
        assert kinds == sorted(["broker", "worker"] + (["devices"] if mechanism == "lpa" else [])), started
        assert len(list(tmpdir.glob("wevent-run-*"))) == 1

        sent = time.monotonic()
        run.send_signal(signum)
        status = run.wait(60)
        assert time.monotonic() - sent < 30  # promptly, not for ever: a whole process on a loaded machine
        assert status == 128 + signum
        assert wait_for(lambda: not any(alive(pid) for pid in started), 5), \
            {pid: started[pid] for pid in started if alive(pid)}
        assert list(tmpdir.iterdir()) == []
        assert "Traceback" not in err.read_text()
        assert f"wevent run: {signal.Signals(signum).name}: stopping" in err.read_text()
    finally:
        kill_leftovers(run, started)


def _processes_using(directory) -> list[str]:
    """Command lines of live processes that mention ``directory`` (the run's children do)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(directory) in text and alive(int(cmdline.parent.name)):
            found.append(text)
    return found


def test_a_finished_run_and_a_failed_run_leave_nothing_behind(tmp_path):
    tmpdir = tmp_path / "tmp"
    env = environment(tmpdir)
    done = wevent_run(["--slots", "2", "--quiet"], env, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert list(tmpdir.iterdir()) == [] and not _processes_using(tmpdir)
    # A failure after the broker and the worker started: the truth port is taken.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        failed = wevent_run(["--slots", "2", "--quiet", "--truth-port", str(taken.getsockname()[1])], env, tmp_path)
    assert failed.returncode == 2 and "cannot serve metrics" in failed.stderr, failed.stderr[-3000:]
    assert "Traceback" not in failed.stderr
    assert list(tmpdir.iterdir()) == [] and not _processes_using(tmpdir)


def _kill_and_watch_children(process: subprocess.Popen, started: dict) -> None:
    """SIGKILL ``process``: nothing of it runs to stop its children, which must end anyway."""
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert wait_for(lambda: not any(alive(pid) for pid in started), 10), \
        {pid: started[pid] for pid in started if alive(pid)}


def test_a_killed_soak_or_run_leaves_no_process_and_the_next_run_removes_its_directory(tmp_path):
    tmpdir = tmp_path / "tmp"
    env = environment(tmpdir)
    soak_dir = tmp_path / "soak"
    soak_dir.mkdir()
    with open(soak_dir / "stderr", "w") as stderr:
        soak = subprocess.Popen([sys.executable, "-m", "wevent.cli", "bench", "soak", "--seconds", "10", "--users",
                                 "100"], stdout=subprocess.DEVNULL, stderr=stderr, env=env, cwd=soak_dir)
    started = {}
    try:
        started = wait_for(lambda: (lambda found: found if len(found) == 2 else None)(children(soak.pid)), 60)
        assert started and sorted(command_of(argv) for argv in started.values()) == ["broker", "worker"], started
        _kill_and_watch_children(soak, started)
    finally:
        kill_leftovers(soak, started)
    [soak_left] = tmpdir.glob("wevent-soak-*")  # nothing of the soak was left to delete it

    run = start_run(["-m", "lpa", "--speed", "60"], env, tmp_path)
    started = {}
    try:
        assert first_release(tmp_path), (tmp_path / "stderr").read_text()
        assert not soak_left.exists()
        started = children(run.pid)
        assert sorted(command_of(argv) for argv in started.values()) == ["broker", "devices", "worker"], started
        [run_left] = tmpdir.iterdir()
        assert (run_left / "values.npz").exists()  # the devices' true values
        _kill_and_watch_children(run, started)
    finally:
        kill_leftovers(run, started)

    assert run_left.exists()
    done = wevent_run(["--slots", "2", "--quiet"], env, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert list(tmpdir.iterdir()) == []
