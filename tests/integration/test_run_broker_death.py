"""`wevent run` whose embedded broker dies exits promptly with one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.integration.run_helpers import (alive, children, command_of, environment, first_release, kill_leftovers,
                                           start_run, wait_for, wevent_run)

pytestmark = pytest.mark.slow


def test_a_dead_broker_ends_the_run_with_one_line(tmp_path):
    env = environment(tmp_path / "tmp")
    run = start_run(["--speed", "60"], env, tmp_path)
    err = tmp_path / "stderr"
    started = {}
    try:
        assert first_release(tmp_path), err.read_text()
        started = children(run.pid)
        broker = next(pid for pid, argv in started.items() if command_of(argv) == "broker")
        before = len(err.read_text().splitlines())
        killed = time.monotonic()
        os.kill(broker, signal.SIGKILL)
        try:
            status = run.wait(60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the run still runs 60 s after its broker died; stderr ends with {err.read_text()[-2000:]}")
        assert time.monotonic() - killed < 15
        assert status == 1
        after = err.read_text().splitlines()[before:]
        assert len(after) == 1 and after[0].startswith("wevent run: failed: the embedded broker stopped (killed by "
                                                       "SIGKILL); its topics"), after[:20]
        assert wait_for(lambda: not any(alive(pid) for pid in started), 5)
    finally:
        kill_leftovers(run, started)


def test_a_broker_at_its_memory_limit_ends_the_run_with_one_line_saying_so(tmp_path):
    """The embedded broker keeps every record: past WEVENT_BROKER_MEMORY_MB its watchdog stops it,
    and the run ends with that reason in one line (before the watchdog, the run hung)."""
    env = environment(tmp_path / "tmp", WEVENT_BROKER_MEMORY_MB="60")  # an empty tansu holds about 20 MiB
    feed = tmp_path / "feed.npz"  # 5 million reports: several times what 60 MiB can hold
    dump = subprocess.run([sys.executable, "-m", "wevent.cli", "replay", "synthetic", "--profile", "ldp-ids",
                           "--model", "sin", "--users", "50000", "--slots", "100", "--dump", str(feed),
                           "--no-progress"], capture_output=True, text=True, env=env, timeout=120)
    assert dump.returncode == 0, dump.stderr
    result = wevent_run(["--feed", str(feed), "--speed", "0", "--quiet"], env, tmp_path, timeout=120)
    failures = [line for line in result.stderr.splitlines() if line.startswith("wevent run: failed")]
    assert result.returncode == 1 and len(failures) == 1, result.stderr[-2000:]
    assert "its memory limit of 60 MiB (WEVENT_BROKER_MEMORY_MB)" in failures[0]
    assert "Traceback" not in result.stderr and list((tmp_path / "tmp").iterdir()) == []
