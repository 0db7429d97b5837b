"""`wevent run` refuses bad arguments in one line (exit 2) before it starts anything."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

BAD = [
    (["--speed", "nan"], "argument --speed: must be finite"),
    (["--speed", "inf"], "argument --speed: must be finite"),
    (["--speed", "-1"], "argument --speed: must be >= 0"),
    (["--epsilon", "0"], "argument --epsilon/-e: must be > 0"),
    (["--epsilon", "nan"], "argument --epsilon/-e: must be finite"),
    (["--window", "0"], "argument --window/-w: must be >= 1"),
    (["--slots", "0"], "argument --slots: must be >= 1"),
    (["--slots", "two"], "argument --slots: not an integer"),
    (["--metrics-port", "65536"], "argument --metrics-port: must be <= 65535"),
    (["--truth-port", "-1"], "argument --truth-port: must be >= 0"),
    (["--seed", "1.5"], "argument --seed: not an integer"),
    (["--release-log", "/nonexistent/r.jsonl"], "cannot write /nonexistent/r.jsonl: no directory /nonexistent"),
    (["--audit-log", "/nonexistent/a.jsonl"], "cannot write /nonexistent/a.jsonl: no directory /nonexistent"),
    (["--release-log", "/"], "cannot write /: it is a directory"),
    (["-m", "nope"], "unknown mechanism 'nope'"),
    (["--stream", "nope"], "the config has no stream 'nope'"),
]


def run(arguments, tmp_path, **env):
    environment = {k: v for k, v in os.environ.items() if not k.startswith("WEVENT_")} | {"TMPDIR": str(tmp_path)}
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "run", *arguments], capture_output=True, text=True,
                          env=environment | env, cwd=tmp_path, timeout=60)


@pytest.mark.parametrize("arguments, message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_bad_argument_is_one_line_before_anything_starts(tmp_path, arguments, message):
    result = run(arguments, tmp_path)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr and result.stderr.startswith("wevent run: ")
    assert result.stdout == ""
    assert list(tmp_path.iterdir()) == []  # no working directory: nothing was started


def test_a_malformed_key_in_the_environment_is_one_line_before_anything_starts(tmp_path):
    result = run([], tmp_path, WEVENT_NOISE_KEY="not hex")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "WEVENT_NOISE_KEY" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_external_kafka_needs_keys_that_outlast_the_run(tmp_path):
    """Its streams' state persists: a slot re-processed in a later run must draw the same noise."""
    result = run(["--bootstrap", "127.0.0.1:1"], tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "set WEVENT_NOISE_KEY" in result.stderr
    result = run(["--bootstrap", "127.0.0.1:1", "-m", "lpa"], tmp_path, WEVENT_NOISE_KEY="ab" * 32)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "set WEVENT_DEVICE_KEY" in result.stderr
    assert list(tmp_path.iterdir()) == []
