"""A paper's methods ranked by their errors: each method's rank among all of them at one (dataset,
x), 1 the smallest error and ties sharing their mean rank, averaged over the datasets.

A paper that declares itself ``ranked`` (the benchmark of every central mechanism) gets, beside
its figures, ``ranking.csv`` (the mean rank and its standard deviation over the datasets, for
every sweep, point, metric and method), ``ranking.png`` (a panel per sweep and metric, rank 1 at
the top) and a table in the index of each method's mean rank over every point of every sweep.
Every figure of such a paper draws the same methods and metrics.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from .cache import aggregate, shown
from .cells import Paper
from .figures import METRIC_LABELS, Scale
from .style import method_label, method_style, pyplot, save

__all__ = ["rank", "write_ranking"]


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
    plt = pyplot()
    from matplotlib.lines import Line2D

    sweeps, methods, metrics = paper.figures, paper.figures[0].methods, paper.figures[0].metrics
    fig, axes = plt.subplots(len(metrics), len(sweeps), figsize=(4.2 * len(sweeps) + 0.6, 2.8 * len(metrics) + 1.2),
                             squeeze=False, layout="constrained")
    for col, figure in enumerate(sweeps):
        xs = figure.points(scale)
        for row, metric in enumerate(metrics):
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
            if row == len(metrics) - 1:
                ax.set_xlabel(figure.x)
    handles = [Line2D([], [], label=method_label(m), **method_style(m)) for m in methods]
    datasets = len(paper.figures[0].datasets)
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 6), fontsize=8,
               title=f"each point: a method's rank by its mean error over the runs, averaged over {datasets} "
               "dataset(s)", title_fontsize=8)
    fig.suptitle(f"{paper.name} ranking: every method's mean rank over the datasets", fontsize=10)
    save(fig, path)


def write_ranking(paper: Paper, scale: Scale, out: Path, runs: int, inputs: dict) -> list[str]:
    """Write ``OUT/PAPER/ranking.csv`` and ``ranking.png`` from the cached cells; the index's lines on them."""
    rows = _rankings(paper, scale, out, runs, inputs)
    metrics = paper.figures[0].metrics
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
               for m in paper.figures[0].methods for metric in metrics}
    order = sorted(paper.figures[0].methods, key=lambda m: overall[m, metrics[0]])
    lines = [f"### {paper.name} ranking: mean rank over the datasets", "",
             f"![ranking]({paper.name}/ranking.png) [CSV]({paper.name}/ranking.csv)", "",
             "A method's rank at one (dataset, x) orders the mean errors of all methods there (1 = smallest); "
             "the table averages it over the datasets and over every point of both sweeps.", "",
             "| method | " + " | ".join(f"mean rank by {METRIC_LABELS[m]}" for m in metrics) + " |",
             "|---|" + "---:|" * len(metrics)]
    lines += [f"| {m} | " + " | ".join(f"{overall[m, metric]:.2f}" for metric in metrics) + " |" for m in order]
    return lines + [""]
