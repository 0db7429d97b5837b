"""The files of a reproduction: one CSV per figure or table, one PNG per figure, and ``index.md``.

A PNG has one panel column per dataset and one row per metric (split into stacked axes where the
paper splits its y-axis between method groups). ``index.md`` lists every figure and table with
its files and, where the paper prints numbers, each beside ours and the ratio ours / paper. A
printed reduction "A vs B" is ``1 - error(A) / error(B)`` averaged over the sweep's points, as
the paper averages it; "A vs B (largest)" is its largest over the points, for a printed "up to".
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np

from ..errors import UsageError
from .cells import Paper
from .datasets import DATASETS
from .figures import METRIC_LABELS, ROC_POINTS, TPR, Figure, Scale
from .cache import aggregate, cell_seconds, shown, write_csv

__all__ = ["write_figure", "write_index", "write_thumbnails", "check_matplotlib", "compare_reported", "THUMBNAILS"]

VS = " vs "
LARGEST = " (largest)"  # a printed "up to": the largest reduction over the sweep, not the mean


def check_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("drawing the figures needs matplotlib: pip install 'wevent[reproduce]'") from None


def write_figure(paper_name: str, figure_name: str, scale: Scale, out: Path, runs: int, inputs: dict,
                 data_dir: Path | None) -> list[str]:
    """Write one figure's CSV and (unless it is a table) PNG from its cached cells; the files written."""
    from . import PAPERS

    paper = PAPERS[paper_name]
    figure = paper.figure(figure_name)
    rows = aggregate(paper, figure, scale, out, runs, inputs)
    stem = out / paper.name / figure.name
    stem.parent.mkdir(parents=True, exist_ok=True)
    write_csv(stem.with_suffix(".csv"), _header(paper, figure, scale, runs, inputs, data_dir), rows,
              ["dataset", "x", "method", "runs"] + [c for m in figure.metrics for c in (m, f"{m}_std")])
    if figure.table:
        return [str(stem.with_suffix(".csv"))]
    _plot(figure, rows, stem.with_suffix(".png"), scale)
    return [str(stem.with_suffix(".csv")), str(stem.with_suffix(".png"))]


# The figures README.md shows, one per paper, as (paper, figure).
THUMBNAILS = (("ldp-ids", "fig3"), ("du", "fig11"), ("kellaris", "fig6"), ("sun", "fig7-9"))
THUMBNAIL_WIDTH = 900  # pixels


def write_thumbnails(papers: list[Paper], scale: Scale, out: Path, runs: int, inputs: dict, directory: Path) -> list[str]:
    """Draw the README's figures of ``papers`` into ``directory`` as ``PAPER-FIGURE.png``, 900 pixels wide."""
    from . import PAPERS

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, figure_name in THUMBNAILS:
        if PAPERS[name] in papers:
            figure = PAPERS[name].figure(figure_name)
            path = directory / f"{name}-{figure_name}.png"
            _plot(figure, aggregate(PAPERS[name], figure, scale, out, runs, inputs), path, scale, THUMBNAIL_WIDTH)
            written.append(str(path))
    return written


def write_index(papers: list[Paper], finished: list[Paper], scale: Scale, out: Path, runs: int, inputs: dict) -> str:
    """Write ``index.md``: every figure of ``papers`` and of the ``finished`` papers of earlier runs."""
    from . import PAPERS

    sections = []
    for paper in (p for p in PAPERS.values() if p in papers or p in finished):
        cells, seconds = cell_seconds(paper, scale, out, runs, inputs)
        lines = [f"## {paper.name}: {paper.citation}", "",
                 f"{cells} distinct cell runs, {seconds:.0f} CPU seconds in all.", ""]
        for figure in paper.figures:
            lines += _index_entry(paper, figure, aggregate(paper, figure, scale, out, runs, inputs))
        sections.append("\n".join(lines))
    index = out / "index.md"
    index.write_text(f"# Reproduced figures and tables ({scale.name} scale, {runs} run(s) per cell)\n\n"
                     "Every CSV's header gives the exact command and seeds of its cells.\n\n"
                     + "\n".join(sections))
    return str(index)


def _header(paper: Paper, figure: Figure, scale: Scale, runs: int, inputs: dict, data_dir: Path | None) -> list[str]:
    header = [f"{paper.citation}: {figure.name}, {figure.title}",
              f"x = {figure.x}: {', '.join(map(shown, figure.points(scale)))}; methods: {', '.join(figure.methods)}",
              f"scale {scale.name}; {runs} run(s) per cell, run r = 0..{runs - 1} with seed r (the noise, and the "
              "data of --dataset streams; dumps are drawn once)",
              "mean and sample standard deviation over the runs; every cell is:"]
    for dataset in figure.datasets:
        if dataset in DATASETS:
            header.append(f"  {dataset} is {DATASETS[dataset].describe(data_dir, scale)}")
        for x in figure.points(scale):
            for method in figure.methods:
                header.append(f"  {dataset}, {figure.x} = {shown(x)}, {method}: "
                              f"{paper.describe(figure, dataset, x, method, scale, inputs)} --seed r")
    if figure.note:
        header.append(f"note: {figure.note}")
    return header


def _plot(figure: Figure, rows: list[dict], path: Path, scale: Scale, width: int | None = None) -> None:
    """Draw ``figure`` into ``path``: at 110 dots an inch, or ``width`` pixels wide."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if figure.roc:
        _plot_roc(plt, figure, rows, path, width)
        return
    groups = figure.groups or (figure.methods,)
    nrows, ncols = len(figure.metrics) * len(groups), len(figure.datasets)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols + 0.6, 2.6 * nrows + 0.4), squeeze=False,
                             sharex="col")
    xs = figure.points(scale)
    positions = np.arange(len(xs)) if isinstance(xs[0], str) else np.asarray(xs, dtype=float)
    for col, dataset in enumerate(figure.datasets):
        for m, metric in enumerate(figure.metrics):
            for g, group in enumerate(groups):
                ax = axes[m * len(groups) + g][col]
                for method in group:
                    ys = [next(r[metric] for r in rows if r["dataset"] == dataset and r["x"] == x
                               and r["method"] == method) for x in xs]
                    ax.plot(positions, ys, marker="o", markersize=3, label=method.upper())
                if figure.log_y:
                    ax.set_yscale("log")
                if figure.log_x:
                    ax.set_xscale("log")
                # ticks at the points run, labelled as the CSV prints them (long labels slanted)
                labels = [shown(x) for x in xs]
                ax.set_xticks(positions, labels, rotation=30 if max(map(len, labels)) * len(xs) > 24 else 0)
                ax.grid(alpha=0.3)
                ax.legend(fontsize=6, ncol=min(4, len(group)))
                if col == 0:
                    ax.set_ylabel(METRIC_LABELS[metric], fontsize=8)
                if m == 0 and g == 0:
                    ax.set_title(f"({chr(97 + col)}) {dataset}", fontsize=9)
                if m * len(groups) + g == nrows - 1:
                    ax.set_xlabel(figure.x)
                ax.tick_params(labelsize=7)
    fig.suptitle(_wrapped(f"{figure.name}: {figure.title}", fig), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110 if width is None else width / fig.get_figwidth())
    plt.close(fig)


def _plot_roc(plt, figure: Figure, rows: list[dict], path: Path, width: int | None) -> None:
    """One panel per dataset: every method's ROC curve (vertically averaged), its area in the legend."""
    ncols = len(figure.datasets)
    fig, axes = plt.subplots(1, ncols, figsize=(3.2 * ncols + 0.6, 3.4), squeeze=False)
    fpr = [float(metric[len(TPR):]) for metric in ROC_POINTS]
    for col, dataset in enumerate(figure.datasets):
        ax = axes[0][col]
        ax.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=0.8)
        for row in (r for r in rows if r["dataset"] == dataset):
            ax.plot(fpr, [row[metric] for metric in ROC_POINTS], label=f"{row['method'].upper()} ({row['roc_auc']:.2f})")
        ax.set_title(f"({chr(97 + col)}) {dataset}", fontsize=9)
        ax.set_xlabel("false positive rate", fontsize=8)
        if col == 0:
            ax.set_ylabel("true positive rate", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, title="method (AUC)", title_fontsize=6)
        ax.tick_params(labelsize=7)
    fig.suptitle(_wrapped(f"{figure.name}: {figure.title}", fig), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110 if width is None else width / fig.get_figwidth())
    plt.close(fig)


def _wrapped(title: str, fig) -> str:
    """The title in lines that fit the figure's width (about 13 characters an inch at 10 points)."""
    return textwrap.fill(title, width=max(30, int(13 * fig.get_figwidth())))


def compare_reported(figure: Figure, rows: list[dict]) -> list[tuple]:
    """``(dataset, x, method, metric, paper, ours, ratio)`` for every number the paper prints."""
    compared = []
    for (dataset, x, method, metric), printed in figure.reported.items():
        if VS in method:
            method_vs, largest = method.removesuffix(LARGEST), method.endswith(LARGEST)
            ours = _reduction(rows, dataset, metric, *method_vs.split(VS), largest=largest)
        else:
            ours = next((r[metric] for r in rows if r["dataset"] == dataset and r["x"] == x
                         and r["method"] == method), math.nan)
        ratio = ours / printed if printed and math.isfinite(ours) else math.nan
        compared.append((dataset, x, method, metric, printed, ours, ratio))
    return compared


def _reduction(rows: list[dict], dataset: str, metric: str, method: str, baseline: str, largest: bool) -> float:
    """``1 - error(method) / error(baseline)`` in percent: averaged over the sweep's points, or its largest."""
    def series(name):
        return {r["x"]: r[metric] for r in rows if r["dataset"] == dataset and r["method"] == name}

    ours, base = series(method), series(baseline)
    reductions = [1.0 - ours[x] / base[x] for x in ours if x in base and base[x] > 0]
    if not reductions:
        return math.nan
    return 100.0 * float(np.max(reductions) if largest else np.mean(reductions))


def _index_entry(paper: Paper, figure: Figure, rows: list[dict]) -> list[str]:
    kind = "Table" if figure.table else "Figure"
    files = f"[CSV]({paper.name}/{figure.name}.csv)"
    if not figure.table:
        files = f"![{figure.name}]({paper.name}/{figure.name}.png) " + files
    lines = [f"### {paper.name} {figure.name} ({kind}): {figure.title}", "", files, ""]
    if figure.note:
        lines += [figure.note, ""]
    compared = compare_reported(figure, rows)
    if not compared:
        lines += ["The paper prints no numbers for this one (its values are read off plots).", ""]
        return lines
    lines += ["| dataset | x | method | metric | paper | ours | ours / paper |", "|---|---|---|---|---:|---:|---:|"]
    for dataset, x, method, metric, printed, ours, ratio in compared:
        lines.append(f"| {dataset} | {x} | {method} | {metric} | {printed:.4g} | {ours:.4g} | {ratio:.3g} |")
    return lines + [""]
