"""`wevent advise`, in-process: the ranking of a small dump, its picture, its warning, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wevent.cli import main
from wevent.cli.advise import WARNING, Standing
from wevent.cli.simulate import FAMILIES, summary
from wevent.core.data import UserValues

CENTRAL = next(f for f in FAMILIES if f.name == "central").mechanisms


@pytest.fixture
def dump(tmp_path):
    """60 slots of 40 users, each at one of 3 values or absent, drawn once (seed 0)."""
    values = np.random.default_rng(0).integers(-1, 3, size=(60, 40))
    path = tmp_path / "small.npz"
    UserValues(values, domain_size=3).save(path)
    return str(path)


def _table(out: str) -> list[tuple[int, str, float, str]]:
    """The printed ranking: (rank, mechanism, mean, standard error) per line."""
    rows = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0].isdigit():
            rows.append((int(parts[0]), parts[1], float(parts[2]), parts[3]))
    return rows


def test_the_ranking_of_a_small_dump_is_printed_and_drawn(dump, tmp_path, capsys):
    from matplotlib.image import imread

    png = tmp_path / "advice.png"
    assert main(["advise", "--input", dump, "-e", "1", "-w", "5", "--runs", "3", "--out", str(png)]) == 0
    out = capsys.readouterr().out
    assert WARNING in out and "standard error of the mean over 3 runs" in out
    rows = _table(out)
    assert [r[0] for r in rows] == list(range(1, len(CENTRAL) + 1))
    assert sorted(r[1] for r in rows) == sorted(CENTRAL)
    means = [r[2] for r in rows]
    assert means == sorted(means)  # from the smallest mean error to the largest
    # each line is the mean of what `wevent simulate` computes for the three seeds (printed to 4 digits)
    for _, name, mean, error in rows[:3]:
        errors = [summary(["--input", dump, "-e", "1.0", "-w", "5", "-m", name, "--seed", str(s)])["mae"]
                  for s in range(3)]
        assert mean == pytest.approx(np.mean(errors), rel=5e-4)
        assert float(error) == pytest.approx(np.std(errors, ddof=1) / math.sqrt(3), rel=5e-4)
    picture = imread(png)
    assert picture.shape[0] > 100 and picture.shape[1] > 100
    assert picture[..., :3].std() > 0.05  # not one flat colour


def test_the_help_says_the_ranking_is_a_function_of_the_data(capsys):
    assert main(["advise", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "public, synthetic or retired data" in help_text and "does not cover" in help_text
    assert "Examples:" in help_text and "wevent advise --input" in help_text


def test_a_mechanism_that_does_not_fit_is_listed_apart(dump, capsys):
    """40 users: population division needs 2w of them, so at w = 30 LPD, LPA and their kin do not fit."""
    assert main(["advise", "--input", dump, "--model", "local", "-w", "30", "--runs", "2",
                 "--mechanisms", "lbu,lpa"]) == 0
    out = capsys.readouterr().out
    assert [r[1] for r in _table(out)] == ["lbu"]
    assert "lpa" in out and "does not fit: population division needs N >= 2w users" in out


def test_standard_error_is_the_sample_deviation_over_the_root_of_the_runs():
    assert Standing("x", (1.0, 2.0, 3.0)).standard_error == pytest.approx(1 / math.sqrt(3))
    assert math.isnan(Standing("x", (1.0,)).standard_error)


@pytest.mark.parametrize("arguments, says", [
    (["--input", "{missing}"], "--input must be an existing file"),
    (["--input", "{csv}", "--model", "local"], "the local model needs every user's values"),
    (["--input", "{csv}", "--mechanisms", "ba,lpa"], "lpa not of the central model"),
    (["--input", "{csv}", "--mechanisms", "ba,,bd"], "--mechanisms must be mechanism names"),
    (["--input", "{fake}"], "is not a wevent dump"),
    (["--input", "{csv}", "--runs", "0"], "--runs must be"),
    (["--input", "{csv}", "--metric", "auc"], "invalid choice"),
])
def test_bad_input_is_one_line_and_status_2(tmp_path, capsys, arguments, says):
    (tmp_path / "counts.csv").write_text("1,2\n3,4\n5,6\n")
    (tmp_path / "fake.npz").write_bytes(b"PK\x03\x04 not really a zip archive")
    paths = {"missing": str(tmp_path / "nope.npz"), "csv": str(tmp_path / "counts.csv"),
             "fake": str(tmp_path / "fake.npz")}
    assert main(["advise", *(a.format(**paths) for a in arguments)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err
