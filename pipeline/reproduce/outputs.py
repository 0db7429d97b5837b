"""The files of a reproduction: one CSV per figure or table, one PNG per figure, and ``index.md``.

A PNG has one panel column per dataset and one row per metric (split into stacked axes where the
paper splits its y-axis between method groups), each method in its one style
(:mod:`~wevent.reproduce.style`), the mean over the runs as the line and one standard deviation
either side shaded, and one legend under the panels that says so. ``index.md`` lists every
figure and table with its files and, where the paper prints numbers, each beside ours and the
ratio ours / paper. A printed reduction "A vs B" is ``1 - error(A) / error(B)`` averaged over
the sweep's points, as the paper averages it; "A vs B (largest)" is its largest over the points,
for a printed "up to".
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np

from .cells import Paper
from .datasets import DATASETS
from .figures import METRIC_LABELS, ROC_POINTS, TPR, Figure, Scale
from .cache import aggregate, cell_seconds, shown, write_csv
from .ranking import write_ranking
from .style import DASHES, method_label, method_style, pyplot, save

__all__ = ["write_figure", "write_index", "write_thumbnails", "draw", "compare_reported", "THUMBNAILS"]

VS = " vs "
LARGEST = " (largest)"  # a printed "up to": the largest reduction over the sweep, not the mean


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
        if paper.ranked:
            lines += write_ranking(paper, scale, out, runs, inputs)
        if paper.differences:
            lines += [paper.differences, ""]
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
    """Draw ``figure`` into ``path``: at :data:`~wevent.reproduce.style.DPI` dots an inch, or ``width`` pixels wide."""
    save(draw(figure, rows, scale), path, width)


def draw(figure: Figure, rows: list[dict], scale: Scale):
    """The matplotlib figure of ``figure`` from its aggregated rows (:func:`~wevent.reproduce.runner.aggregate`).

    One panel column per dataset and one row per metric (and method group), every method in its
    :func:`~wevent.reproduce.style.method_style`, the spread over the runs shaded, and one legend
    under the panels saying what the lines and the shading are.
    """
    plt = pyplot()
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullFormatter

    if figure.roc:
        return _draw_roc(plt, figure, rows)
    groups = figure.groups or (figure.methods,)
    nrows, ncols = len(figure.metrics) * len(groups), len(figure.datasets)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols + 0.6, 2.6 * nrows + 1.0), squeeze=False,
                             sharex="col", layout="constrained")
    xs = figure.points(scale)
    positions = np.arange(len(xs)) if isinstance(xs[0], str) else np.asarray(xs, dtype=float)
    row_of = {(r["dataset"], r["x"], r["method"]): r for r in rows}
    for col, dataset in enumerate(figure.datasets):
        for m, metric in enumerate(figure.metrics):
            for g, group in enumerate(groups):
                ax = axes[m * len(groups) + g][col]
                for method in group:
                    series = [row_of[dataset, x, method] for x in xs]
                    _curve(ax, positions, [r[metric] for r in series], [r[f"{metric}_std"] for r in series], method)
                if figure.log_y:
                    ax.set_yscale("log")
                    _log_limits_of_curves(ax)
                if figure.log_x:
                    ax.set_xscale("log")
                    ax.xaxis.set_minor_formatter(NullFormatter())  # only the points run are labelled
                # ticks at the points run, labelled as the CSV prints them (long labels slanted)
                labels = [shown(x) for x in xs]
                ax.set_xticks(positions, labels, rotation=30 if max(map(len, labels)) * len(xs) > 24 else 0)
                ax.grid(alpha=0.3)
                if col == 0:
                    ax.set_ylabel(METRIC_LABELS[metric], fontsize=8)
                if m == 0 and g == 0:
                    ax.set_title(f"({chr(97 + col)}) {dataset}", fontsize=9)
                if m * len(groups) + g == nrows - 1:
                    ax.set_xlabel(figure.x)
                ax.tick_params(labelsize=7)
    handles = [Line2D([], [], label=method_label(m), **method_style(m)) for m in figure.methods]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), _columns(fig)), fontsize=8,
               title=_fitted(_spread_caption(rows[0]["runs"]), fig, 8), title_fontsize=8)
    fig.suptitle(_fitted(f"{figure.name}: {figure.title}", fig, 10), fontsize=10)
    return fig


def _curve(ax, x, means, stds, method: str, within=(-np.inf, np.inf), markevery=None) -> None:
    """One method's means over ``x``, and a band of one standard deviation either side (cut to the
    range ``within`` the metric can take) where there is one."""
    style = method_style(method)
    # solid lines lowest, dotted highest: a coinciding curve shows through the gaps of the one above it
    ax.plot(x, means, label=method_label(method), gid=method, markersize=5, linewidth=1.3, markevery=markevery,
            zorder=2 + 0.1 * DASHES.index(style["linestyle"]), **style)
    means, stds = np.asarray(means, dtype=float), np.asarray(stds, dtype=float)
    if np.isfinite(stds).any():
        ax.fill_between(x, np.clip(means - stds, *within), np.clip(means + stds, *within), color=style["color"],
                        alpha=0.15, linewidth=0, gid=method)


def _log_limits_of_curves(ax) -> None:
    """A log axis spanning the curves with matplotlib's 5% margins, whatever the bands: a band reaching
    down to zero or near it would squash the curves into the top of the axis. The axes cut it."""
    values = np.concatenate([line.get_ydata() for line in ax.get_lines()]).astype(float)
    values = values[np.isfinite(values) & (values > 0)]
    if values.size:
        pad = (values.max() / values.min()) ** 0.05 if values.max() > values.min() else 2.0
        ax.set_ylim(values.min() / pad, values.max() * pad)


def _spread_caption(runs: int) -> str:
    if runs < 2:
        return "one run per point: no spread over runs to show"
    return f"lines: mean over {runs} runs; shaded: ±1 standard deviation over the runs"


def _draw_roc(plt, figure: Figure, rows: list[dict]):
    """One panel per dataset: every method's ROC curve (vertically averaged), its area under the panel."""
    ncols = len(figure.datasets)
    fig, axes = plt.subplots(1, ncols, figsize=(3.2 * ncols + 0.6, 4.6), squeeze=False, layout="constrained")
    fpr = [float(metric[len(TPR):]) for metric in ROC_POINTS]
    runs = rows[0]["runs"]
    for col, dataset in enumerate(figure.datasets):
        ax = axes[0][col]
        ax.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=0.8)
        for row in (r for r in rows if r["dataset"] == dataset):
            _curve(ax, fpr, [row[m] for m in ROC_POINTS], [row[f"{m}_std"] for m in ROC_POINTS], row["method"],
                   within=(0.0, 1.0), markevery=4)  # a marker every 0.2 of the false positive rate
            spread = f" ± {row['roc_auc_std']:.2f}" if math.isfinite(row["roc_auc_std"]) else ""
            ax.lines[-1].set_label(f"{method_label(row['method'])}: {row['roc_auc']:.2f}{spread}")
        ax.set_title(f"({chr(97 + col)}) {dataset}", fontsize=9)
        ax.set_xlabel("false positive rate", fontsize=8)
        if col == 0:
            ax.set_ylabel("true positive rate", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), fontsize=7, ncol=2, title="method: area under curve",
                  title_fontsize=7)
        ax.tick_params(labelsize=7)
    caption = _spread_caption(runs) + ("; areas: mean ± standard deviation" if runs > 1 else "")
    fig.legend(handles=[], loc="outside lower center", frameon=False, title=_fitted(caption, fig, 8), title_fontsize=8)
    fig.suptitle(_fitted(f"{figure.name}: {figure.title}", fig, 10), fontsize=10)
    return fig


def _fitted(text: str, fig, points: float) -> str:
    """``text`` in lines that fit the figure's width (about 13 characters an inch at 10 points)."""
    return textwrap.fill(text, width=max(30, int(130 / points * fig.get_figwidth())))


def _columns(fig) -> int:
    """How many legend entries fit side by side across the figure (about an inch each)."""
    return max(1, int(fig.get_figwidth()))


def compare_reported(figure: Figure, rows: list[dict]) -> list[tuple]:
    """``(dataset, x, method, metric, paper, ours, ratio)`` for every number the paper prints."""
    compared = []
    for (dataset, x, method, metric), printed in figure.reported.items():
        if VS in method:
            compared_method, baseline = method.removesuffix(LARGEST).split(VS)
            ours = _reduction(rows, dataset, metric, compared_method, baseline, largest=method.endswith(LARGEST))
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
