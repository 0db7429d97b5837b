"""`wevent reproduce all` at the tiny scale, as a user runs it: every file, every column, reuse."""

from __future__ import annotations

import csv
import json
import math
import shlex
import sys
from pathlib import Path

import pytest

from wevent.cli import main
from wevent.reproduce import PAPERS
from wevent.reproduce.datasets import prepare
from wevent.reproduce.figures import TINY
from wevent.reproduce.cache import aggregate, cell_path, shown
from wevent.reproduce.outputs import draw
from wevent.reproduce.style import DPI, catalogue, method_label
from tests import helpers

pytestmark = pytest.mark.slow  # about a minute on two shared cores: 670 cells and 37 files

# Written out, not read from PAPERS, so that a figure dropped from a paper module fails here.
EXPECTED = {
    "ldp-ids": ["fig3", "fig4", "fig5", "fig6", "fig6c", "fig6d", "fig7a", "fig7b", "fig7c", "fig7d", "table2", "fig8",
                "fig10a", "fig10b", "fig11"],
    "kellaris": ["fig6", "error-vs-epsilon"],
    "benchmark": ["error-vs-epsilon", "error-vs-w"],
    "du": ["fig10", "fig11", "fig12", "fig13"],
    "sun": ["fig7-9", "fig10-12"],
}


def wevent(*args, check=True):
    return helpers.wevent(*args, check=check, timeout=900, env={"WEVENT_REPRODUCE_SCALE": "tiny"})


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce")
    proc = wevent("reproduce", "all", "--out", str(out), "--jobs", "2", "--no-progress", "--thumbnails",
                  str(out / "thumbnails"))
    assert "cells computed, 0 reused" in proc.stderr
    assert "CPU seconds of the cells computed: ldp-ids " in proc.stderr  # per paper, in the papers' order
    return out


def _read(path: Path) -> tuple[list[str], list[dict]]:
    lines = path.read_text().splitlines()
    header = [line for line in lines if line.startswith("#")]
    return header, list(csv.DictReader(line for line in lines if not line.startswith("#")))


def _figures():
    return [(PAPERS[name], PAPERS[name].figure(figure)) for name, figures in EXPECTED.items() for figure in figures]


def test_every_paper_reproduces_the_expected_figures():
    assert {name: [f.name for f in paper.figures] for name, paper in PAPERS.items()} == EXPECTED


def test_every_csv_png_and_the_index_are_written(out):
    index = (out / "index.md").read_text()
    for paper, figure in _figures():
        assert (out / paper.name / f"{figure.name}.csv").is_file()
        png = out / paper.name / f"{figure.name}.png"
        assert png.is_file() != figure.table
        if not figure.table:
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"### {paper.name} {figure.name} " in index
    assert index.count(" distinct cell runs, ") == len(EXPECTED)  # and the CPU seconds they took, per paper
    thumbnails = sorted(p.name for p in (out / "thumbnails").iterdir())
    assert thumbnails == ["du-fig11.png", "kellaris-fig6.png", "ldp-ids-fig3.png", "sun-fig7-9.png"]
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert all(f"pipeline/reproduce/thumbnails/{name}" in readme for name in thumbnails)


def test_every_csv_has_its_columns_rows_and_parameters(out):
    for paper, figure in _figures():
        header, rows = _read(out / paper.name / f"{figure.name}.csv")
        assert list(rows[0]) == ["dataset", "x", "method", "runs", *(c for m in figure.metrics for c in (m, f"{m}_std"))]
        expected = [(d, shown(x), m) for d in figure.datasets for x in figure.points(TINY) for m in figure.methods]
        assert [(r["dataset"], r["x"], r["method"]) for r in rows] == expected
        for row in rows:
            for metric in figure.metrics:
                value = float(row[metric])
                # an ROC curve is undefined on a stream without events; every other metric is a number
                assert math.isfinite(value) or metric == "roc_auc" or metric.startswith("tpr@"), (paper.name, figure.name, row)
        assert any("seed r" in line for line in header) and any(figure.title in line for line in header)


def test_the_printed_values_sit_beside_ours_with_the_ratio(out):
    index = (out / "index.md").read_text()
    section = index.split("### ldp-ids table2 ")[1].split("###")[0]
    line = next(l for l in section.splitlines() if l.startswith("| lns | eps=1,w=20 | lbu |"))
    paper_value, ours, ratio = (float(v) for v in line.strip("|").split("|")[-3:])
    assert paper_value == 1.0 and ours == 1.0 and ratio == 1.0  # LBU: one bit per user per slot
    assert "| lns-bernoulli | avg | pba vs ba | amre | 36.9 |" in index
    kellaris = index.split("### kellaris fig6 ")[1].split("###")[0]
    for printed in ("| ba vs bd | mae | 46 |", "| ba vs bd | mre | 35 |", "| ba vs bd (largest) | mae | 51 |"):
        assert f"| tdrive-personalized | w sweep {printed}" in kellaris


def _command(header: list[str], dataset: str, x: str, method: str) -> list[str]:
    """The arguments of a cell's ``wevent simulate`` command, from its CSV header line, at seed 0."""
    line = next(l for l in header if l.startswith("#   ") and l.split(": ", 1)[0].endswith(f"= {x}, {method}")
                and l[4:].startswith(f"{dataset}, "))
    command = line.split(": ", 1)[1]
    assert command.startswith("wevent simulate ") and command.endswith(" --seed r")
    return shlex.split(command.replace("--seed r", "--seed 0"))[2:]


def test_the_results_tables_are_views_of_the_figures(out):
    results = (out / "results.md").read_text()
    for title in ("Central model", "Local model", "Personalized", "Decayed range queries"):
        assert f"### {title}" in results
    _, rows = _read(out / "ldp-ids" / "fig3.csv")
    row = next(r for r in rows if (r["dataset"], r["x"], r["method"]) == ("sin", "0.5", "lpa"))
    assert f"| sin | lpa | {100 * float(row['mre']):.2f} |" in results  # the first point of the sweep
    assert "the largest per-user window spend is 1.0000 of epsilon" in results


@pytest.mark.parametrize("paper, figure, dataset, method, metric, summary_key", [
    ("ldp-ids", "fig3", "lns", "lpa", "mre", "mre"),
    ("ldp-ids", "fig8", "sin", "lbd", "mre", "mre"),  # the row's --beta, which other methods of fig8 lack
    ("kellaris", "fig6", "tdrive-personalized", "bd", "mae", "mae"),  # BD's --budget-shift
    ("du", "fig12", "lns-bernoulli", "plbu", "amre", "mse"),  # PLBU's own command
    ("du", "fig11", "sin-bernoulli", "bd", "ajsd", "ajsd"),  # BD at the strictest pair, -e and -w
])
def test_a_csv_header_command_recomputes_its_row(out, paper, figure, dataset, method, metric, summary_key):
    header, rows = _read(out / paper / f"{figure}.csv")
    row = next(r for r in rows if r["dataset"] == dataset and r["method"] == method)
    assert row["runs"] == "1"  # one run at the tiny scale: the row is seed 0's value
    summary = json.loads(wevent("simulate", *_command(header, dataset, row["x"], method), "--json").stdout)
    assert summary["mechanism"] == method
    assert summary[summary_key] == pytest.approx(float(row[metric]), rel=1e-5)


def test_figures_sharing_a_command_share_its_cell(out):
    """LDP-IDS Fig. 7(c) draws the bits of Fig. 3's LNS cells: the same command, cached once."""
    bits, errors = (_read(out / "ldp-ids" / f"{name}.csv")[0] for name in ("fig7c", "fig3"))
    arguments = _command(bits, "lns", "0.5", "lbd")
    assert _command(errors, "lns", "0.5", "lbd") == arguments
    assert cell_path(out, "wevent simulate " + shlex.join(arguments)).is_file()


def test_a_rerun_reuses_finished_cells_and_recomputes_a_missing_one(out):
    csv_before = (out / "du" / "fig10.csv").read_text()
    header, _ = _read(out / "du" / "fig10.csv")
    cell = cell_path(out, "wevent simulate " + shlex.join(_command(header, "sin-bernoulli", "0.2", "pba")))
    cell.unlink()
    proc = wevent("reproduce", "du", "--out", str(out), "--jobs", "1", "--no-progress")
    assert "1 cells computed" in proc.stderr and cell.is_file()
    assert (out / "du" / "fig10.csv").read_text() == csv_before
    assert "## ldp-ids" in (out / "index.md").read_text()  # papers of earlier runs stay in the index


def test_without_matplotlib_one_line_and_status_2(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["reproduce", "sun", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "in the wevent checkout, pip install -e '.[reproduce]'" in err


def test_bad_arguments_are_one_line(tmp_path, capsys):
    status, _, err = helpers.run_main(capsys, "reproduce", "nosuchpaper")
    assert status == 2 and err.count("\n") == 1
    status, _, err = helpers.run_main(capsys, "reproduce", "--jobs", "0")
    assert status == 2 and "--jobs must be" in err
    status, _, err = helpers.run_main(capsys, "reproduce", "sun", "--data", tmp_path, "--out", tmp_path / "o")
    assert status == 2 and "neither a tdrive nor a foursquare directory" in err


# --- the pictures ----------------------------------------------------------------------------------

def _drawn(out: Path, runs: int):
    """Every figure of the reproduction in ``out``, drawn in this process: (paper, figure, rows, matplotlib figure)."""
    inputs = prepare({d for p in PAPERS.values() for f in p.figures for d in f.datasets}, out, None, TINY)
    for paper, figure in _figures():
        if not figure.table and (out / paper.name / f"{figure.name}.png").is_file():
            rows = aggregate(paper, figure, TINY, out, runs, inputs)
            yield paper, figure, rows, draw(figure, rows, TINY)


def _curves(fig) -> list:
    """The method curves the drawing made (named by their gid), in every panel."""
    return [line for ax in fig.axes for line in ax.get_lines() if line.get_gid() in catalogue()]


def _hex(colour) -> str:
    from matplotlib.colors import to_hex

    return to_hex(colour)


def _style(artist) -> tuple:
    return _hex(artist.get_color()), artist.get_marker(), artist.get_linestyle()


def test_a_method_has_one_style_in_every_panel_of_every_figure_and_its_legend(out):
    import matplotlib.pyplot as plt

    styles: dict[str, set] = {}
    for paper, figure, _, fig in _drawn(out, runs=1):
        curves = _curves(fig)
        assert {line.get_gid() for line in curves} == set(figure.methods), (paper.name, figure.name)
        for line in curves:
            styles.setdefault(line.get_gid(), set()).add(_style(line))
        colours = {_style(line)[0]: line.get_gid() for line in curves}
        assert len(colours) == len(figure.methods), f"{paper.name} {figure.name}: two methods share a colour"
        legends = fig.legends or [ax.get_legend() for ax in fig.axes if ax.get_legend()]
        for legend in legends:  # every legend entry looks like the curves of the method it names
            for handle, text in zip(legend.legend_handles, legend.get_texts()):
                method = next(m for m in figure.methods if text.get_text().split(":")[0] == method_label(m))
                assert _style(handle) in styles[method], (paper.name, figure.name, method)
        plt.close(fig)
    assert len(styles) == len({m for p in PAPERS.values() for f in p.figures if not f.table for m in f.methods})
    assert all(len(seen) == 1 for seen in styles.values()), {m: s for m, s in styles.items() if len(s) > 1}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Kellaris et al.'s figures (the cheapest paper) with two runs a cell: a spread to draw."""
    out = tmp_path_factory.mktemp("two-runs")
    wevent("reproduce", "kellaris", "--runs", "2", "--out", str(out), "--jobs", "1", "--no-progress")
    return out


def test_the_pngs_are_pictures_of_the_papers_layout(two_runs):
    from matplotlib.image import imread

    for figure in PAPERS["kellaris"].figures:
        picture = imread(two_runs / "kellaris" / f"{figure.name}.png")
        height, width = picture.shape[:2]
        # DPI dots an inch of 3.2 inches a dataset column plus margins; 2.6 a metric row plus title and legend
        assert width == round(DPI * (3.2 * len(figure.datasets) + 0.6))
        assert height == round(DPI * (2.6 * len(figure.metrics) + 1.0))
        assert picture[..., :3].std() > 0.05, figure.name  # not one flat colour


def test_the_spread_over_runs_is_shaded_one_standard_deviation_either_side(two_runs):
    import matplotlib.pyplot as plt

    for paper, figure, rows, fig in _drawn(two_runs, runs=2):
        assert "mean over 2 runs; shaded: ±1 standard deviation" in fig.legends[0].get_title().get_text()
        for ax, (metric, dataset) in zip(fig.axes, [(m, d) for m in figure.metrics for d in figure.datasets]):
            for method in figure.methods:
                band = next(c for c in ax.collections if c.get_gid() == method)
                line = next(line for line in ax.get_lines() if line.get_gid() == method)
                assert _hex(band.get_facecolor()[0]) == _style(line)[0]
                ys = band.get_paths()[0].vertices[:, 1]
                series = [r for r in rows if r["dataset"] == dataset and r["method"] == method]
                assert series and all(r["runs"] == 2 and r[f"{metric}_std"] > 0 for r in series)
                assert ys.max() == pytest.approx(max(r[metric] + r[f"{metric}_std"] for r in series))
                assert ys.min() == pytest.approx(min(r[metric] - r[f"{metric}_std"] for r in series))
        plt.close(fig)


def test_legends_lie_outside_every_panel(out):
    import matplotlib.pyplot as plt

    for paper, figure, _, fig in _drawn(out, runs=1):
        renderer = fig.canvas.get_renderer()
        fig.canvas.draw()
        legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
        assert legends, (paper.name, figure.name)
        for legend in legends:
            box = legend.get_window_extent(renderer)
            assert not any(box.overlaps(ax.get_window_extent(renderer)) for ax in fig.axes), (paper.name, figure.name)
        plt.close(fig)


def test_a_task_is_every_method_of_one_point_of_a_figure(tmp_path):
    """The methods of a point run in one process, so PBD, PBA and PLBU share the point's per-type
    counts there instead of computing them in two processes."""
    from wevent.reproduce.runner import _plan

    du = PAPERS["du"]
    inputs = {name: str(tmp_path / f"{name}.npz") for f in du.figures for name in f.datasets}  # paths only
    plan = _plan([du], TINY, tmp_path, 2, inputs)
    points = [{(c.figure, c.dataset, c.x, c.run) for c, _ in task} for task in plan.todo]
    assert all(len(point) == 1 for point in points)
    assert len(points) == len({p for point in points for p in point})  # each point in one task
    fig10 = [[c.method for c, _ in task] for task in plan.todo if task[0][0].figure == "fig10"]
    assert fig10 and all(methods == list(du.figure("fig10").methods) for methods in fig10)
