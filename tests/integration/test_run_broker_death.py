"""`wevent run` whose embedded broker or worker dies exits promptly with one line saying why."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.integration.run_helpers import environment, kill_a_child, started_ports, wevent_run

pytestmark = pytest.mark.slow


def test_a_dead_broker_ends_the_run_with_one_line(tmp_path):
    status, after, seconds, _ = kill_a_child(tmp_path, "broker", ["--speed", "60"])
    assert seconds < 30  # promptly, not for ever: a whole process on a loaded machine
    assert status == 3  # the broker's state is gone: a new run starts from scratch
    assert len(after) == 1 and after[0].startswith("wevent run: failed: the embedded broker stopped (killed by "
                                                   "SIGKILL); its topics"), after[:20]


def test_a_dying_worker_ends_the_run_with_its_last_line_quoted(tmp_path):
    status, after, _, err = kill_a_child(tmp_path, "worker", ["--speed", "60"])
    assert status == 1  # killed: no documented status of its own
    assert len(after) == 1 and after[0].startswith(
        "wevent run: failed: the worker stopped (killed by SIGKILL); the last line of its log: wevent worker: app "
        "wevent, streams taxi (central ba); Kafka at 127.0.0.1:"), after
    assert after[0].endswith(f"(tansu); web http://127.0.0.1:{started_ports(err)[0]} (/metrics, /livez, /readyz, "
                             "/query); stops on SIGTERM"), after


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
    assert result.returncode == 2 and len(failures) == 1, result.stderr[-2000:]  # the same run would stop again
    assert "its memory limit of 60 MiB (WEVENT_BROKER_MEMORY_MB)" in failures[0]
    assert "Traceback" not in result.stderr and list((tmp_path / "tmp").iterdir()) == []
