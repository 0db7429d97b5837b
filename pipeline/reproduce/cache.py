"""The cache of cell runs, and what the figures read from it.

A cell's run is cached under ``OUT/cells`` as a small JSON file named by a digest of exactly what
it computes (:func:`cell_path`): its whole summary and the CPU seconds it took. A figure's rows are
the runs' means and standard deviations (:func:`aggregate`), written as CSV (:func:`write_csv`).
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .cells import Paper, metric_value
from .figures import Figure, Scale

__all__ = ["Cell", "cells_of", "cell_path", "aggregate", "cell_seconds", "shown", "write_csv"]


@dataclass(frozen=True)
class Cell:
    """One run of one point of a figure: (dataset, x, method, run)."""

    paper: str
    figure: str
    dataset: str
    x: object
    method: str
    run: int

    def how(self, scale: Scale, inputs: dict) -> str:
        from . import PAPERS

        paper = PAPERS[self.paper]
        return paper.how(paper.figure(self.figure), self.dataset, self.x, self.method, self.run, scale, inputs)


def cells_of(paper: Paper, figure: Figure, scale: Scale, runs: int) -> list[Cell]:
    return [Cell(paper.name, figure.name, d, x, m, r) for d in figure.datasets for x in figure.points(scale)
            for m in figure.methods for r in range(runs)]


def cell_path(out: Path, how: str) -> Path:
    """Where the run that ``how`` describes is cached."""
    digest = hashlib.blake2b(how.encode(), digest_size=8).hexdigest()
    return out / "cells" / digest[:2] / f"{digest}.json"


def aggregate(paper: Paper, figure: Figure, scale: Scale, out: Path, runs: int, inputs: dict) -> list[dict]:
    """One row per (dataset, x, method): each metric's mean and standard deviation over the runs."""
    rows = []
    for dataset in figure.datasets:
        for x in figure.points(scale):
            for method in figure.methods:
                summaries = [json.loads(cell_path(out, paper.how(figure, dataset, x, method, r, scale, inputs))
                                        .read_text())["summary"] for r in range(runs)]
                row = {"dataset": dataset, "x": x, "method": method, "runs": runs}
                for metric in figure.metrics:
                    series = np.array([metric_value(s, metric) for s in summaries], dtype=float)
                    finite = series[np.isfinite(series)]
                    row[metric] = float(finite.mean()) if finite.size else math.nan
                    row[f"{metric}_std"] = float(finite.std(ddof=1)) if finite.size > 1 else math.nan
                rows.append(row)
    return rows


def cell_seconds(paper: Paper, scale: Scale, out: Path, runs: int, inputs: dict) -> tuple[int, float]:
    """The distinct cells of a paper and the CPU seconds they took, from the cache."""
    paths = {cell_path(out, c.how(scale, inputs)) for f in paper.figures for c in cells_of(paper, f, scale, runs)}
    return len(paths), sum(json.loads(p.read_text()).get("cpu_seconds", 0.0) for p in paths)


def shown(value) -> str:
    """A value as the CSVs print it: floats to 6 significant digits."""
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def write_csv(path: Path, header: list[str], rows: list[dict], columns: list[str]) -> None:
    with open(path, "w", newline="") as fh:
        for line in header:
            fh.write(f"# {line}\n")
        writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: shown(v) for k, v in row.items()})
