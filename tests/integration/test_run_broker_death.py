"""`wevent run` whose embedded broker dies exits promptly with one line (issue 14, item 4)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tests.integration.run_helpers import (alive, children, command_of, environment, first_release, kill_leftovers,
                                           start_run, wait_for)

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
