"""`wevent reproduce benchmark --quick` in-process on two tiny streams of the user's, and LDP-IDS
Fig. 11's central competitors."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from wevent.cli import main
from wevent.core.data import UserValues
from wevent.reproduce import PAPERS, benchmark
from wevent.reproduce.benchmark import DIFFERENCES, METHODS, USER_DATA
from wevent.reproduce.ranking import rank
from wevent.reproduce.figures import QUICK

SCALE_ENV = "WEVENT_REPRODUCE_SCALE"


def _rows(path: Path) -> list[dict]:
    return list(csv.DictReader(line for line in path.read_text().splitlines() if not line.startswith("#")))


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    """The benchmark at --quick on a CSV of counts (400 slots, 2 bins) and a dump (400 slots of 30
    users, 3 values): small enough to run in seconds."""
    streams = tmp_path_factory.mktemp("streams")
    rng = np.random.default_rng(0)
    np.savetxt(streams / "counts.csv", rng.poisson(20.0, size=(400, 2)), fmt="%d", delimiter=",",
               header="a,b", comments="")
    UserValues(rng.integers(-1, 3, size=(400, 30)), domain_size=3).save(streams / "users.npz")
    (streams / "notes.txt").write_text("not a stream: ignored")
    out = tmp_path_factory.mktemp("benchmark")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(SCALE_ENV, raising=False)  # --quick, whatever the environment says
        code = main(["reproduce", "benchmark", "--quick", "--streams", str(streams), "--out", str(out), "--jobs", "1",
                     "--no-progress"])
    assert code == 0
    yield out
    PAPERS["benchmark"] = benchmark.PAPER  # the next test's reproduction runs on our datasets again


def test_the_figures_and_the_ranking_are_written_and_open(out):
    from matplotlib.image import imread

    for name in ("error-vs-epsilon", "error-vs-w", "ranking"):
        picture = imread(out / "benchmark" / f"{name}.png")
        assert picture.shape[0] > 200 and picture[..., :3].std() > 0.05, name  # a picture, not one flat colour
    rows = _rows(out / "benchmark" / "error-vs-w.csv")
    assert {r["dataset"] for r in rows} == {"counts", "users"}  # the user's streams, named by their files
    assert {r["method"] for r in rows} == set(METHODS)
    assert {r["x"] for r in rows} == {"40", "120", "200"}  # --quick: three points of the sweep


def test_every_central_mechanism_is_benchmarked():
    from wevent.core.registry import mechanisms

    assert set(METHODS) == {n for n, cls in mechanisms().items() if cls.model == "central"}


def test_the_ranking_is_the_mean_rank_of_the_errors_over_the_datasets(out):
    errors = _rows(out / "benchmark" / "error-vs-epsilon.csv")
    ranking = [r for r in _rows(out / "benchmark" / "ranking.csv") if r["sweep"] == "epsilon"]
    for x in ("0.1", "1"):
        for metric in ("mae", "mre"):
            table = np.array([[float(next(r[metric] for r in errors if (r["dataset"], r["x"], r["method"]) == (d, x, m)))
                               for m in METHODS] for d in ("counts", "users")])
            expected = rank(table).mean(axis=0)
            got = [float(next(r["mean_rank"] for r in ranking if (r["x"], r["metric"], r["method"]) == (x, metric, m)))
                   for m in METHODS]
            # the CSV prints 6 significant digits, so equal errors may print equal where they differ
            # below that; the mean ranks of one point still sum to 1 + 2 + ... + n
            assert sum(got) == pytest.approx(len(METHODS) * (len(METHODS) + 1) / 2)
            assert got == pytest.approx(expected.tolist(), abs=0.5)


def test_the_index_says_how_it_differs_from_the_paper(out):
    index = (out / "index.md").read_text()
    section = index.partition("\n## benchmark: ")[2]
    assert DIFFERENCES.format(data=USER_DATA) in section
    assert "![ranking](benchmark/ranking.png)" in section
    assert all(f"| {m} | " in section for m in METHODS)


def test_streams_are_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "broken.csv").write_text("1,2\n3\n")
    for arguments, says in ((["sun", "--streams", str(tmp_path / "empty")], "--streams runs the benchmark only"),
                            (["benchmark", "--streams", str(tmp_path / "empty")], "holds no stream"),
                            (["benchmark", "--streams", str(tmp_path / "bad")], "ragged rows")):
        assert main(["reproduce", *arguments, "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and says in err, err
    PAPERS["benchmark"] = benchmark.PAPER


def test_ldp_ids_fig11_runs_pegasus_and_fast_on_the_frequencies_scale():
    """Their counts' MRE floor is 1e-3 times the users: |r - c| / max(c, 1e-3 N) is the frequencies'
    |r/N - c/N| / max(c/N, 1e-3), the local methods' MRE."""
    from wevent.cli.simulate import summary

    paper = PAPERS["ldp-ids"]
    figure = paper.figure("fig11")
    assert {"pegasus", "fast-w"} <= set(figure.methods)
    for method in ("pegasus", "fast-w"):
        arguments = paper.command(figure, "lns", figure.xs[0], method, QUICK, {})
        result = summary([*arguments, "--seed", "0"])
        users = int(arguments[arguments.index("--users") + 1])
        assert result["mechanism"] == method and result["mre_floor"] == pytest.approx(users * 1e-3)
        assert result["max_window_epsilon"] <= 1.0 + 1e-9
    assert "--mre-floor" not in paper.command(figure, "lns", figure.xs[0], "lpa", QUICK, {})
