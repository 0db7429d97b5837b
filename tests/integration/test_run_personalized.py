"""`wevent run` runs personalized streams: the default stream of -m pba / -m pbd, and a config's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.run_helpers import environment, releases, wevent_run

pytestmark = pytest.mark.slow

STREAMS_TOML = Path(__file__).resolve().parents[2] / "docker" / "config" / "streams.toml"
SLOTS = 2


@pytest.mark.parametrize("arguments", [["-m", "pba"], ["-m", "pbd"],
                                       ["--config", str(STREAMS_TOML), "--stream", "taxi-personalized"]],
                         ids=["pba", "pbd", "config"])
def test_a_personalized_stream_runs(tmp_path, arguments):
    log = tmp_path / "releases.jsonl"
    run = wevent_run([*arguments, "--slots", str(SLOTS), "--release-log", str(log)], environment(tmp_path / "tmp"),
                     tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "every user's own (w_i, epsilon_i)" in run.stderr and "Traceback" not in run.stderr
    assert sorted(releases(log)) == list(range(1, SLOTS + 1))
    assert run.stdout.count("\n") == SLOTS  # one line per release
