"""`wevent simulate` as a user runs it: a subprocess, its stdout, stderr and exit status; its refusals
of bad parameters and input, which stop before any work, in this process."""

import json

import numpy as np
import pytest

from wevent.core.central import BudgetAbsorption, BudgetDistribution
from wevent.core.randomness import DerivedRandomness, SecretKey
from wevent.core.synthetic import synthetic
from wevent.stream.wire.records import ReleaseRecord
from tests.helpers import run_main, wevent


REQUIRED = {"mechanism", "epsilon", "window", "slots", "domain_size", "mae", "mre", "mse", "publications",
            "approximations", "max_window_epsilon"}


def test_json_summary_has_the_required_keys_and_matches_the_library():
    out = wevent("simulate", "-m", "ba", "--dataset", "log", "--users", "5000", "--slots", "120", "-e", "0.5",
                 "-w", "10", "--seed", "9", "--json").stdout
    summary = json.loads(out)
    assert REQUIRED <= summary.keys()
    data = synthetic("log", 5000, 120, 9)
    m = BudgetAbsorption(0.5, 10, 2, randomness=DerivedRandomness(SecretKey.from_seed(9), "default"))
    releases = np.stack([r.release for r in m.run(data.counts)])
    assert summary["mae"] == pytest.approx(np.abs(releases - data.counts).mean(), rel=1e-12)
    assert summary["slots"] == 120 and summary["domain_size"] == 2
    assert summary["max_window_epsilon"] <= 0.5 + 1e-12


def test_runs_average_the_central_errors_over_noise_keys():
    """--runs K repeats a central mechanism on the same counts with the noise keys of seeds 0..K-1 and
    averages the errors (it was ignored: one run, no "runs" in the summary)."""
    summary = json.loads(wevent("simulate", "-m", "bd", "--dataset", "sin", "--users", "3000", "--slots", "80",
                                "-w", "5", "--runs", "3", "--json").stdout)
    counts = synthetic("sin", 3000, 80, 0).counts
    errors = []
    for seed in range(3):
        m = BudgetDistribution(1.0, 5, 2, randomness=DerivedRandomness(SecretKey.from_seed(seed), "default"))
        errors.append(np.abs(np.stack([r.release for r in m.run(counts)]) - counts).mean())
    assert summary["runs"] == 3 and len(set(errors)) == 3
    assert summary["mae"] == pytest.approx(np.mean(errors), rel=1e-12)


def test_all_mechanisms_table_and_release_log(tmp_path):
    log = tmp_path / "releases.jsonl"
    out = wevent("simulate", "-m", "all", "--slots", "60", "--releases", str(log)).stdout
    for name in ("uniform", "sample", "bd", "ba"):
        assert name in out
    records = [ReleaseRecord.from_json(line) for line in log.read_text().splitlines()]
    assert len(records) == 4 * 60
    assert {r.mechanism for r in records} == {"uniform", "sample", "bd", "ba"}
    assert all(r.window_spend <= r.epsilon + 1e-12 for r in records)


def test_csv_input(tmp_path):
    csv = tmp_path / "counts.csv"
    rows = np.random.default_rng(0).poisson(30, (50, 4))
    csv.write_text("a,b,c,d\n" + "\n".join(",".join(map(str, r)) for r in rows) + "\n")
    summary = json.loads(wevent("simulate", "-m", "bd", "--input", str(csv), "--json").stdout)
    assert summary["slots"] == 50 and summary["domain_size"] == 4


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--epsilon", "0"], "epsilon"),
        (["--epsilon", "-1"], "epsilon"),
        (["--epsilon", "nan"], "epsilon"),
        (["--window", "0"], "window"),
        (["--slots", "0"], "slots"),
        (["--users", "0"], "users"),
        (["--input", "/nonexistent/counts.csv"], "not found"),
        (["--mechanism", "nope"], "invalid choice"),
        (["--epsilon", "abc"], "--epsilon must be a finite number"),
    ],
)
def test_invalid_parameters_one_line_exit_2(capsys, args, fragment):
    status, _, err = run_main(capsys, "simulate", *args)
    assert status == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in err


@pytest.mark.parametrize(
    "content, fragment",
    [("1,2\n3\n", "ragged"), ("1,2\n3,-4\n", ">= 0"), ("1,2\nx,4\n", "not a number"), ("", "no rows"),
     ("1,inf\n", "finite")],
)
def test_bad_csv_one_line_exit_2(tmp_path, capsys, content, fragment):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    status, _, err = run_main(capsys, "simulate", "--input", path)
    assert status == 2 and fragment in err and len(err.strip().splitlines()) == 1
