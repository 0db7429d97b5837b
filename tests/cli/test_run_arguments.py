"""`wevent run` refuses bad arguments in one line (exit 2) before it starts anything."""

from __future__ import annotations

import os
import tempfile

import pytest

from tests.helpers import run_main

BAD = [
    (["--speed", "nan"], "--speed must be a finite number >= 0"),
    (["--speed", "inf"], "--speed must be a finite number >= 0"),
    (["--speed", "-1"], "--speed must be a finite number >= 0"),
    (["--epsilon", "0"], "--epsilon must be a finite number >= 1e-290"),
    (["--epsilon", "nan"], "--epsilon must be a finite number >= 1e-290"),
    (["--epsilon", "1e-320"], "--epsilon must be a finite number >= 1e-290 and <= 1,000,000, got 1e-320"),
    (["--window", "0"], "--window must be an integer >= 1"),
    (["--slots", "0"], "--slots must be an integer >= 1"),
    (["--slots", "two"], "--slots must be an integer >= 1"),
    (["--metrics-port", "65536"], "--metrics-port must be an integer >= 0 and <= 65,535"),
    (["--truth-port", "-1"], "--truth-port must be an integer >= 0"),
    (["--seed", "1.5"], "--seed must be an integer >= 0"),
    (["--release-log", "/nonexistent/r.jsonl"], "there is no directory '/nonexistent'"),
    (["--audit-log", "/nonexistent/a.jsonl"], "there is no directory '/nonexistent'"),
    (["--truth-log", "/nonexistent/t.jsonl"], "there is no directory '/nonexistent'"),
    (["--release-log", "/"], "'/' is a directory"),
    (["-m", "nope"], "unknown mechanism 'nope'"),
    (["--stream", "a/b"], "--stream must be 1 to 100 letters, digits"),  # the name of the stream it makes
    (["--config", "{config}", "--stream", "nope"], "the config has no stream 'nope'"),  # a stream of the config
]


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    path = tmp_path_factory.mktemp("config") / "streams.json"
    path.write_text('{"streams": [{"name": "s", "model": "central", "mechanism": "ba", "epsilon": 1, "window": 5, '
                    '"domain": 16, "users": 400, "slot_seconds": 300, "start": 0}]}')
    return str(path)


@pytest.fixture
def run(tmp_path, monkeypatch, capsys):
    """`wevent run ARGUMENTS` in this process, in an empty ``tmp_path`` that is also its temporary
    directory (where it would make its working directory), with no WEVENT_ variable but ``env``:
    exit status, stdout, stderr."""
    for name in [name for name in os.environ if name.startswith("WEVENT_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    monkeypatch.chdir(tmp_path)

    def run(arguments, **env):
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return run_main(capsys, "run", *arguments)

    return run


@pytest.mark.parametrize("arguments, message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_bad_argument_is_one_line_before_anything_starts(tmp_path, run, config, arguments, message):
    status, out, err = run([argument.format(config=config) for argument in arguments])
    assert status == 2
    assert err.count("\n") == 1 and message in err and err.startswith("wevent run: ")
    assert out == ""
    assert list(tmp_path.iterdir()) == []  # no working directory: nothing was started


def test_a_malformed_key_in_the_environment_is_one_line_before_anything_starts(tmp_path, run):
    status, _, err = run([], WEVENT_NOISE_KEY="not hex")
    assert status == 2 and err.count("\n") == 1 and "WEVENT_NOISE_KEY" in err
    assert list(tmp_path.iterdir()) == []


def test_an_external_kafka_needs_keys_that_outlast_the_run(tmp_path, run):
    """Its streams' state persists: a slot re-processed in a later run must draw the same noise."""
    status, _, err = run(["--bootstrap", "127.0.0.1:1"])
    assert status == 2 and err.count("\n") == 1 and "set WEVENT_NOISE_KEY" in err
    status, _, err = run(["--bootstrap", "127.0.0.1:1", "-m", "lpa"], WEVENT_NOISE_KEY="ab" * 32)
    assert status == 2 and err.count("\n") == 1 and "set WEVENT_DEVICE_KEY" in err
    assert list(tmp_path.iterdir()) == []
