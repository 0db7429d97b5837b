"""`wevent bench stream` end to end at a tiny scale: the embedded broker, a worker and a two-shard
device fleet; every figure it prints is there and parses, and its bad options are one line."""

from __future__ import annotations

import re

import pytest

from tests.helpers import run_main, wevent

pytestmark = pytest.mark.integration

FIGURE = r"([\d,]+(?:\.\d+)?)"


def number(text: str) -> float:
    return float(text.replace(",", ""))


def test_bench_stream_prints_sane_figures_for_both_models():
    run = wevent("bench", "stream", "--users", "2000", "--slots", "4", "--window", "4", check=False, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    blocks = re.split(r"\n(?=(?:central|local) )", run.stdout.strip())[1:]
    assert [b.split()[0] for b in blocks] == ["central", "local"], run.stdout
    for block in blocks:
        p50, p99, worst = map(number, re.search(rf"p50 {FIGURE} ms, p99 {FIGURE} ms, max {FIGURE} ms", block).groups())
        per_slot, rate = map(number, re.search(rf"{FIGURE} per slot, {FIGURE} reports/s", block).groups())
        pipeline, simulate, ratio = map(number, re.search(
            rf"pipeline {FIGURE} ms, simulate {FIGURE} ms \(ratio {FIGURE} x\)", block).groups())
        equal, slots = map(int, re.search(r"releases equal to simulate's: (\d+) of (\d+)", block).groups())
        changelog = number(re.search(rf"changelog bytes per slot: +{FIGURE}", block).group(1))
        assert 0 < p50 <= p99 <= worst < 300_000
        assert per_slot > 0 and rate > 0 and pipeline > 0 and ratio > 0 and simulate >= 0
        assert (equal, slots) == (4, 4)  # same keys, same values: the pipeline releases what simulate does
        assert changelog > 0
    assert number(re.search(rf"{FIGURE} per slot", blocks[0]).group(1)) == 2000  # central: one report per user


@pytest.mark.parametrize("args, message", [
    (["--users", "0"], "--users must be an integer >= 1"),
    (["--mechanism", "nonsense"], "--mechanism must name a mechanism"),
    (["--model", "central", "--mechanism", "lpa"], "local-model mechanism"),
    (["--domain", "1000"], "--domain must be an integer >= 2 and <= 256"),
    (["--users", "100000000", "--slots", "1000"], "cells"),
])
def test_bad_options_are_one_line(capsys, args, message):
    status, _, err = run_main(capsys, "bench", "stream", *args)
    assert status == 2
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
