"""Schäler, Hütter and Schäler's benchmark of w-event mechanisms (PVLDB 16(8), 2023), on our data.

The benchmark runs every central w-event mechanism over count streams and compares their errors,
over epsilon at w = 120 and over w at epsilon = 1, and ranks them: its finding is that the simple
baselines (Uniform, Sample) often beat the adaptive mechanisms. Here every central mechanism of
the registry runs with its defaults and the paper's Lap(1/eps) noise, scored by MAE and MRE; the
ranking is each method's rank by error among all of them at one (dataset, x), averaged over the
datasets (ties share their mean rank). The data is ours, or the user's (``--streams DIR``);
:data:`DIFFERENCES` says how the set-up differs from the paper's.
"""

from __future__ import annotations

import csv
import functools
from pathlib import Path

import numpy as np

from ..core.data import is_dump, load_input
from ..core.registry import mechanisms
from ..errors import UsageError
from .cache import aggregate, shown
from .cells import Paper
from .figures import METRIC_LABELS, Figure, Scale

__all__ = ["PAPER", "METHODS", "paper", "read_streams", "rank", "DIFFERENCES"]

SYNTHETIC = ("lns", "sin", "log")
DATASETS = (*SYNTHETIC, "tdrive-personalized", "foursquare-personalized")
# Kellaris et al.'s four first (the baselines Uniform and Sample among them), then the others by name.
METHODS = ("uniform", "sample", "bd", "ba",
           *sorted(n for n, cls in mechanisms().items() if cls.model == "central"
                   and n not in ("uniform", "sample", "bd", "ba")))
EPSILONS = (0.1, 0.3, 0.5, 0.7, 0.9, 1.0)
WINDOWS = (40, 80, 120, 160, 200)
# The paper's synthetic streams have 1,000 slots and maxima up to 10,000; ours are counts of 10,000
# users. A central mechanism's cost does not grow with the users: only the slots shrink at smaller
# scales, never below two of the longest window.
USERS, SLOTS = 10_000, 1_000
METRICS = ("mae", "mre")
STREAM_SUFFIXES = (".csv", ".npz")

DIFFERENCES = (
    "How this differs from the paper. The paper runs each mechanism 100 times on real count streams (single "
    "series of flu outpatients, unemployment and flu deaths; flu cases by US state, d = 51; T-Drive taxis on a "
    "10 x 10 grid, d = 100; an online retail log and the World Cup log sampled to d = 1,289) and on periodic "
    "synthetic streams of 1,000 slots scaled to maxima of 10 to 10,000; over epsilon in 0.1, 0.3, 0.5, 0.7, 0.9, "
    "1.0 at w = 120 and over w in 40, 80, 120, 160, 200 at epsilon = 1. Ours keeps the sweeps, the mechanisms' "
    "published parameters, the Laplace noise and MAE, but: (1) the data are ours (the LNS, Sin and Log streams "
    "as two-bin counts of 10,000 users, the bundled T-Drive sample on the same 10 x 10 grid and the bundled "
    "Foursquare sample by country), far smaller and of other shapes than the paper's real streams, so the "
    "absolute errors and the order of close competitors differ; (2) MRE divides by max(c, 1), where the paper's "
    "relative error floors each bin's denominator at 1% of that bin's total over the stream, which weighs "
    "sparse bins less; (3) releases are not clamped to non-negative integers (the paper clamps them on its "
    "real streams only; `--clamp-round` does it here); (4) 10 runs a cell (2 with --quick, which also runs "
    "3 points of each sweep and 400-slot synthetic streams), not 100; (5) the mechanisms run at their defaults "
    "(BD and BA without the budget shift), untuned per dataset."
)


def read_streams(directory: Path) -> dict[str, str]:
    """The streams of ``directory`` by name (file stem): each a CSV of counts (T rows, d columns, an
    optional header row) or a dump of user values (``wevent replay --dump``), as ``wevent simulate
    --input`` reads them. Every file is read once here, so a bad one is one line before any work."""
    if not directory.is_dir():
        raise UsageError(f"--streams {directory} is not a directory")
    files = sorted(p for p in directory.iterdir() if p.is_file() and p.suffix.lower() in STREAM_SUFFIXES)
    if not files:
        raise UsageError(f"--streams {directory} holds no stream: give CSV files of counts (T rows, d columns) "
                         "or .npz dumps of user values (`wevent replay --dump`)")
    streams: dict[str, str] = {}
    for path in files:
        if path.stem in streams:
            raise UsageError(f"--streams {directory}: two streams are named {path.stem!r}")
        if path.suffix.lower() == ".npz" and not is_dump(path):
            raise UsageError(f"{path} is not a wevent dump (.npz from `wevent replay --dump`)")
        load_input(path)  # a ParameterError (one line, exit status 2) names what is wrong with it
        streams[path.stem] = str(path.resolve())
    return streams


def _command(streams: dict[str, str] | None, figure: Figure, dataset: str, x, method: str, scale: Scale,
             inputs: dict) -> list[str]:
    epsilon, window = (x, 120) if figure.x == "epsilon" else (1.0, x)
    if streams:
        data = ["--input", streams[dataset]]
    elif dataset in SYNTHETIC:
        data = ["--dataset", dataset, "--users", str(USERS),
                "--slots", str(max(2 * max(WINDOWS), SLOTS // scale.shrink))]
    else:
        data = ["--input", inputs[dataset]]
    return [*data, "-m", method, "-e", f"{epsilon:g}", "-w", str(window), "--noise", "laplace"]


def rank(errors: np.ndarray) -> np.ndarray:
    """Each method's rank by error along the last axis, 1 the smallest; ties share their mean rank.

    >>> rank(np.array([3.0, 1.0, 3.0, 2.0])).tolist()
    [3.5, 1.0, 3.5, 2.0]
    """
    errors = np.asarray(errors, dtype=float)
    below = (errors[..., None, :] < errors[..., :, None]).sum(axis=-1)
    equal = (errors[..., None, :] == errors[..., :, None]).sum(axis=-1)
    return below + (equal + 1) / 2


def _rankings(paper: Paper, scale: Scale, out: Path, runs: int, inputs: dict) -> list[dict]:
    """One row per (sweep, x, metric, method): the mean rank over the datasets and its standard deviation."""
    rows = []
    for figure in paper.figures:
        by_cell = {(r["dataset"], r["x"], r["method"]): r for r in aggregate(paper, figure, scale, out, runs, inputs)}
        for x in figure.points(scale):
            for metric in figure.metrics:
                errors = np.array([[by_cell[d, x, m][metric] for m in figure.methods] for d in figure.datasets])
                ranks = rank(errors)  # (datasets, methods)
                for i, method in enumerate(figure.methods):
                    rows.append({"sweep": figure.x, "x": x, "metric": metric, "method": method,
                                 "mean_rank": float(ranks[:, i].mean()),
                                 "rank_std": float(ranks[:, i].std(ddof=1)) if len(ranks) > 1 else float("nan")})
    return rows


def _draw_rankings(paper: Paper, rows: list[dict], scale: Scale, path: Path) -> None:
    """The mean rank of every method over each sweep: a panel column per sweep, a row per metric."""
    from .style import method_label, method_style, pyplot, save

    plt = pyplot()
    from matplotlib.lines import Line2D

    sweeps, methods = paper.figures, paper.figures[0].methods
    fig, axes = plt.subplots(len(METRICS), len(sweeps), figsize=(4.2 * len(sweeps) + 0.6, 2.8 * len(METRICS) + 1.2),
                             squeeze=False, layout="constrained")
    for col, figure in enumerate(sweeps):
        xs = figure.points(scale)
        for row, metric in enumerate(METRICS):
            ax = axes[row][col]
            for method in methods:
                series = {r["x"]: r["mean_rank"] for r in rows if r["sweep"] == figure.x and r["metric"] == metric
                          and r["method"] == method}
                ax.plot(xs, [series[x] for x in xs], gid=method, markersize=5, linewidth=1.3, **method_style(method))
            ax.set_ylim(len(methods) + 0.5, 0.5)  # rank 1, the smallest error, at the top
            ax.set_xticks(xs, [shown(x) for x in xs])
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=7)
            ax.set_title(f"({chr(97 + row * len(sweeps) + col)}) by {METRIC_LABELS[metric]}, over {figure.x}",
                         fontsize=9)
            if col == 0:
                ax.set_ylabel("mean rank (1 = smallest error)", fontsize=8)
            if row == len(METRICS) - 1:
                ax.set_xlabel(figure.x)
    handles = [Line2D([], [], label=method_label(m), **method_style(m)) for m in methods]
    datasets = len(paper.figures[0].datasets)
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 6), fontsize=8,
               title=f"each point: a method's rank by its mean error over the runs, averaged over {datasets} "
               "dataset(s)", title_fontsize=8)
    fig.suptitle("ranking: every central mechanism's mean rank over the datasets", fontsize=10)
    save(fig, path)


def _overview(paper: Paper, scale: Scale, out: Path, runs: int, inputs: dict) -> list[str]:
    """Write ``ranking.csv`` and ``ranking.png``; the index's lines on them and on the differences."""
    rows = _rankings(paper, scale, out, runs, inputs)
    stem = out / paper.name / "ranking"
    stem.parent.mkdir(parents=True, exist_ok=True)
    with open(stem.with_suffix(".csv"), "w", newline="") as fh:
        fh.write(f"# {paper.citation}: ranking, each method's rank by mean error at every (dataset, x), "
                 "1 = smallest, ties sharing their mean rank; mean and standard deviation over the datasets\n")
        writer = csv.DictWriter(fh, fieldnames=["sweep", "x", "metric", "method", "mean_rank", "rank_std"])
        writer.writeheader()
        writer.writerows({k: shown(v) for k, v in r.items()} for r in rows)
    _draw_rankings(paper, rows, scale, stem.with_suffix(".png"))
    overall = {(m, metric): np.mean([r["mean_rank"] for r in rows if r["method"] == m and r["metric"] == metric])
               for m in paper.figures[0].methods for metric in METRICS}
    order = sorted(paper.figures[0].methods, key=lambda m: overall[m, METRICS[0]])
    lines = [f"### {paper.name} ranking: mean rank over the datasets", "",
             f"![ranking]({paper.name}/ranking.png) [CSV]({paper.name}/ranking.csv)", "",
             "A method's rank at one (dataset, x) orders the mean errors of all methods there (1 = smallest); "
             "the table averages it over the datasets and over every point of both sweeps.", "",
             "| method | " + " | ".join(f"mean rank by {METRIC_LABELS[m]}" for m in METRICS) + " |",
             "|---|" + "---:|" * len(METRICS)]
    lines += [f"| {m} | " + " | ".join(f"{overall[m, metric]:.2f}" for metric in METRICS) + " |" for m in order]
    return lines + ["", DIFFERENCES, ""]


def paper(streams: dict[str, str] | None = None) -> Paper:
    """The benchmark on our datasets, or on ``streams`` (name -> CSV of counts or dump) instead."""
    datasets = tuple(streams) if streams else DATASETS
    data_note = ("the user's streams (--streams)" if streams else
                 "our LNS, Sin and Log streams as counts and the bundled T-Drive and Foursquare samples")
    figures = (
        Figure("error-vs-epsilon", "Error of every central mechanism vs. epsilon (w = 120)", "epsilon", EPSILONS,
               METHODS, METRICS, datasets, log_y=True,
               note=f"The benchmark's sweep over epsilon on {data_note}; Lap(1/eps) noise, defaults, untuned."),
        Figure("error-vs-w", "Error of every central mechanism vs. w (epsilon = 1)", "w", WINDOWS, METHODS, METRICS,
               datasets, log_y=True, note=f"The benchmark's sweep over w on {data_note}."),
    )
    return Paper("benchmark", "Schäler, Hütter and Schäler, Benchmarking the utility of w-event differential "
                 "privacy mechanisms: when baselines become mighty competitors, PVLDB 2023", figures,
                 command=functools.partial(_command, streams), overview=_overview)


PAPER = paper()
