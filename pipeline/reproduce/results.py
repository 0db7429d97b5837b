"""``results.md``: the README's tables of results, each a view of a reproduction's cells.

One section per paper whose cells are all in: Kellaris et al.'s mechanisms at w = 120 (Fig. 6),
LDP-IDS's errors over epsilon (Fig. 3), its communication (CFPU and bits at epsilon = 1) and its
extensions beside the central PeGaSus and FAST (Fig. 11), Du et al.'s mechanisms at the strictest pair (0.6, 120) of Fig. 10, and Sun
et al.'s range-query errors over epsilon (Figs. 7-9). Values are means over the runs; spends are
their largest. At a scale whose sweep leaves out the paper's default, the nearest point run is used.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from .cells import Paper
from .figures import Figure, Scale
from .cache import aggregate, cell_path, shown

__all__ = ["write_results"]


class _Cells:
    """The cached cells of one reproduction, read by figure."""

    def __init__(self, scale: Scale, out: Path, runs: int, inputs: dict) -> None:
        self.scale, self.out, self.runs, self.inputs = scale, out, runs, inputs

    def rows(self, paper: Paper, figure: Figure) -> dict[tuple, dict]:
        return {(r["dataset"], r["x"], r["method"]): r
                for r in aggregate(paper, figure, self.scale, self.out, self.runs, self.inputs)}

    def summaries(self, paper: Paper, figure: Figure, dataset: str, x, method: str) -> list[dict]:
        return [json.loads(cell_path(self.out, paper.how(figure, dataset, x, method, run, self.scale, self.inputs))
                           .read_text())["summary"] for run in range(self.runs)]

    def every_summary(self, paper: Paper, figure: Figure, methods=None) -> list[dict]:
        return [s for d in figure.datasets for x in figure.points(self.scale) for m in methods or figure.methods
                for s in self.summaries(paper, figure, d, x, m)]

    def nearest(self, figure: Figure, value):
        """The point run closest to the paper's ``value``."""
        return min(figure.points(self.scale), key=lambda x: abs(float(x) - value))


def _table(header: list[str], rows: list[list[str]], left: int = 1) -> list[str]:
    """A markdown table, its first ``left`` columns left-aligned and the others right-aligned."""
    rule = ["---" if i < left else "---:" for i in range(len(header))]
    return ["| " + " | ".join(line) + " |" for line in (header, rule, *rows)] + [""]


def _percent(value: float) -> str:
    return f"{100 * value:.2f}%" if math.isfinite(value) else "-"


def _reduction(ours: float, baseline: float) -> float:
    return 1.0 - ours / baseline if baseline > 0 else math.nan


def _cfpu(summaries: list[dict]) -> str:
    """The mean CFPU of a local method's runs; "-" for a central one, whose users send their data."""
    values = [s["cfpu"] for s in summaries if "cfpu" in s]
    return f"{np.mean(values):.3f}" if values else "-"


def _central(cells: _Cells, paper: Paper) -> list[str]:
    figure = paper.figure("fig6")
    w = cells.nearest(figure, 120)
    rows = cells.rows(paper, figure)
    lines = [f"MAE and MRE at w = {w}, epsilon = 1 ({paper.name} {figure.name}), the slots published (mean over the "
             "runs) and the largest window spend of any run:", ""]
    body = []
    for d in figure.datasets:
        for method in figure.methods:
            runs = cells.summaries(paper, figure, d, w, method)
            body.append([d, method, shown(rows[d, w, method]["mae"]), _percent(rows[d, w, method]["mre"]),
                         f"{np.mean([s['publications'] for s in runs]):.0f}/{runs[0]['slots']}",
                         f"{max(s['max_window_epsilon'] for s in runs):.3f}"])
    return lines + _table(["data", "mechanism", "MAE", "MRE", "published", "max window eps"], body, left=2)


def _local(cells: _Cells, paper: Paper, synthetic: tuple[str, ...]) -> list[str]:
    figure = paper.figure("fig3")
    rows, points = cells.rows(paper, figure), figure.points(cells.scale)
    lines = [f"MRE (%) over epsilon at w = 20 ({paper.name} {figure.name}, the synthetic streams):", ""]
    lines += _table(["data", "method", *(f"eps={shown(x)}" for x in points)],
                    [[d, m, *(f"{100 * rows[d, x, m]['mre']:.2f}" for x in points)]
                     for d in synthetic for m in figure.methods], left=2)
    eps = cells.nearest(figure, 1.0)
    lines += [f"CFPU and bits per user per slot at epsilon = {shown(eps)} (the same cells):", ""]
    communication = []
    for method in figure.methods:
        means = [np.mean([s[key] for s in cells.summaries(paper, figure, d, eps, method)])
                 for d in synthetic for key in ("cfpu", "bits_per_user_per_slot")]
        communication.append([method, *(f"{value:.4f}" for value in means)])
    lines += _table(["method", *(f"{d} {k}" for d in synthetic for k in ("CFPU", "bits"))], communication)
    extensions = paper.figure("fig11")
    setting = extensions.points(cells.scale)[0]
    ext_rows = cells.rows(paper, extensions)
    lines += [f"The extensions at {setting} ({paper.name} {extensions.name}), defaults, not tuned:", ""]
    lines += _table(["method", *(f"{d} MRE (%)" for d in synthetic), "CFPU (" + " / ".join(synthetic) + ")"],
                    [[m, *(f"{100 * ext_rows[d, setting, m]['mre']:.2f}" for d in synthetic),
                      " / ".join(_cfpu(cells.summaries(paper, extensions, d, setting, m)) for d in synthetic)]
                     for m in extensions.methods])
    every = [s for f in paper.figures for s in cells.every_summary(paper, f)]
    spend = max(s["max_window_epsilon"] / s["epsilon"] for s in every)
    population = [s for s in every if s["mechanism"].startswith("lp")]
    reports = max(s["max_reports_per_user_in_window"] for s in population)
    return lines + [f"Privacy over all {len(every)} runs of the cells above and of every other {paper.name} figure: "
                    f"the largest per-user window spend is {spend:.4f} of epsilon, and no user of a population "
                    f"method reported more than {reports} time(s) in a window.", ""]


def _personalized(cells: _Cells, paper: Paper) -> list[str]:
    figure = paper.figure("fig10")
    eps = cells.nearest(figure, 0.6)
    rows = cells.rows(paper, figure)
    lines = [f"AMRE (Equation 15, a mean squared error) at the strictest pair (epsilon = {shown(eps)}, w = 120) "
             f"({paper.name} {figure.name}); BD and BA run at that pair. A reduction is 1 - AMRE(new) / "
             "AMRE(baseline) of the means, and in ln(AMRE) in brackets:", ""]
    body = []
    for d in figure.datasets:
        amre = {m: rows[d, eps, m]["amre"] for m in figure.methods}
        reductions = [f"{-100 * _reduction(amre[new], amre[base]):.1f}% "
                      f"({-100 * _reduction(math.log(amre[new]), math.log(amre[base])):.1f}%)"
                      for new, base in (("pbd", "bd"), ("pba", "ba"))]
        body.append([d, f"{amre['pbd']:.3g}", f"{amre['bd']:.3g}", reductions[0], f"{amre['pba']:.3g}",
                     f"{amre['ba']:.3g}", reductions[1], f"{amre['plbu']:.3g}"])
    lines += _table(["stream", "PBD", "BD", "PBD vs BD", "PBA", "BA", "PBA vs BA", "PLBU"], body)
    ratio = max(s["max_user_window_spend_ratio"] for f in paper.figures
                for s in cells.every_summary(paper, f, ("pbd", "pba", "plbu")))
    return lines + [f"The largest spend of any user's own window, over every PBD, PBA and PLBU run of {paper.name}'s "
                    f"figures, is {ratio:.4f} of their epsilon_i.", ""]


def _decayed(cells: _Cells, paper: Paper) -> list[str]:
    figure = paper.figure("fig7-9")
    rows, points = cells.rows(paper, figure), figure.points(cells.scale)
    lines = [f"Mean squared error of one random range query per slot, decay 0.9995, W = T ({paper.name} "
             f"{figure.name}):", ""]
    return lines + _table(["stream", "method", *(f"eps={shown(x)}" for x in points)],
                          [[d, m, *(f"{rows[d, x, m]['query_mse']:.4g}" for x in points)]
                           for d in figure.datasets for m in figure.methods], left=2)


def write_results(papers: list[Paper], scale: Scale, out: Path, runs: int, inputs: dict) -> str:
    """Write ``results.md`` for the ``papers`` whose cells are all in; its path."""
    from . import PAPERS, ldp_ids

    cells = _Cells(scale, out, runs, inputs)
    sections = {"kellaris": ("Central model (Kellaris et al.)", lambda p: _central(cells, p)),
                "ldp-ids": ("Local model (LDP-IDS)", lambda p: _local(cells, p, ldp_ids.SYNTHETIC)),
                "du": ("Personalized (Du et al.)", lambda p: _personalized(cells, p)),
                "sun": ("Decayed range queries (Sun et al.)", lambda p: _decayed(cells, p))}
    lines = [f"Produced by `wevent reproduce` at the {scale.name} scale, {runs} run(s) per cell (seeds 0..{runs - 1}); "
             "every value is a mean over the runs. Each cell's command is in its figure's CSV.", ""]
    for name, (title, section) in sections.items():
        if PAPERS[name] in papers:
            lines += [f"### {title}", "", *section(PAPERS[name])]
    path = out / "results.md"
    path.write_text("\n".join(lines))
    return str(path)
