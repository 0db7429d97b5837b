"""Run a paper's cells in parallel, cache each one, and write the CSVs, PNGs and the index.

Every cell's metrics are a small JSON file under ``OUT/cells``, named by the cell and a digest
of everything it depends on (scale, input file), written atomically when the cell finishes. A
rerun reads the finished cells and computes only the rest, so an interrupted run resumes where
it stopped, and ``--quick`` and full runs share one directory without mixing.
"""

from __future__ import annotations

import concurrent.futures
import csv
import hashlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .cells import Paper
from .datasets import prepare
from .figures import Figure, Scale

__all__ = ["Cell", "cells_of", "run", "aggregate", "shown", "write_csv"]


@dataclass(frozen=True)
class Cell:
    paper: str
    figure: str
    dataset: str
    x: object
    method: str
    run: int

    def path(self, paper: Paper, out: Path, scale: Scale, inputs: dict) -> Path:
        """Where the cell is cached: named by the cell and a digest of how it is computed (its exact
        command or description, the scale) and of the metrics kept, so a cell computed another way is
        never reused."""
        figure = paper.figure(self.figure)
        how = paper.describe(figure, self.dataset, self.x, self.method, scale, inputs)
        digest = hashlib.blake2b(json.dumps([scale.name, how, figure.metrics]).encode(), digest_size=6).hexdigest()
        return (out / "cells" / self.paper / self.figure / self.dataset / self.method
                / f"{_slug(self.x)}-run{self.run}-{digest}.json")


def _slug(x) -> str:
    return "".join(c if c.isalnum() or c in ".-" else "_" for c in str(x))


def cells_of(paper: Paper, figure: Figure, scale: Scale, runs: int) -> list[Cell]:
    return [Cell(paper.name, figure.name, d, x, m, r) for d in figure.datasets for x in figure.points(scale)
            for m in figure.methods for r in range(runs)]


def _compute(paper: Paper, cell: Cell, scale: Scale, inputs: dict, path: Path) -> None:
    figure = paper.figure(cell.figure)
    metrics = paper.cell(figure, cell.dataset, cell.x, cell.method, cell.run, scale, inputs)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    partial.write_text(json.dumps({"metrics": metrics}))
    partial.replace(path)


def _compute_by_name(paper_name: str, group: list[tuple[Cell, Path]], scale: Scale, inputs: dict) -> int:
    from . import PAPERS  # a worker process finds the paper by name: figures hold no picklable code

    for cell, path in group:
        _compute(PAPERS[paper_name], cell, scale, inputs, path)
    return len(group)


def _by_stream(todo: list[tuple[Paper, Cell, Path]]) -> list[list[tuple[Paper, Cell, Path]]]:
    """The cells in groups of one paper, dataset and run, in figure order: most of a group's cells
    read the same stream (the x-axis changes epsilon, w or a method's parameter, not the data), and
    one process running them in a row generates it once."""
    groups: dict[tuple, list] = {}
    for paper, cell, path in todo:
        groups.setdefault((paper.name, cell.dataset, cell.run), []).append((paper, cell, path))
    return list(groups.values())


class _Counter:
    """A one-line counter on stderr, when tqdm is not installed."""

    def __init__(self, total: int, disable: bool) -> None:
        self.total, self.done, self.disable = total, 0, disable

    def update(self, n: int = 1) -> None:
        self.done += n
        if not self.disable:
            print(f"\rcells {self.done}/{self.total}", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if not self.disable and self.total:
            print(file=sys.stderr)


def _progress(total: int, enabled: bool | None):
    disable = (not sys.stderr.isatty()) if enabled is None else not enabled
    try:
        from tqdm import tqdm
    except ImportError:
        return _Counter(total, disable)
    return tqdm(total=total, unit="cell", desc="cells", file=sys.stderr, disable=disable, mininterval=0.5)


def run(papers: list[Paper], scale: Scale, out: Path, runs: int, jobs: int, data_dir: Path | None,
        progress: bool | None = None) -> dict:
    """Compute every missing cell of ``papers`` and write their outputs; return what was done."""
    from .outputs import write_outputs

    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    from . import PAPERS

    # every paper's inputs, so the index can also list papers finished by earlier runs
    inputs = prepare({d for p in PAPERS.values() for f in p.figures for d in f.datasets}, out, data_dir, scale)
    todo, reused = [], 0
    for paper in papers:
        for figure in paper.figures:
            for cell in cells_of(paper, figure, scale, runs):
                path = cell.path(paper, out, scale, inputs)
                if path.exists():
                    reused += 1
                else:
                    todo.append((paper, cell, path))
    bar = _progress(len(todo), progress)
    try:
        if jobs == 1:
            for paper, cell, path in (entry for group in _by_stream(todo) for entry in group):
                _compute(paper, cell, scale, inputs, path)
                bar.update(1)
        else:
            with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
                futures = [pool.submit(_compute_by_name, group[0][0].name, [(c, p) for _, c, p in group], scale, inputs)
                           for group in _by_stream(todo)]
                try:
                    for future in concurrent.futures.as_completed(futures):
                        bar.update(future.result())
                except BaseException:
                    for future in futures:
                        future.cancel()
                    raise
    finally:
        bar.close()
    finished = [p for p in PAPERS.values() if p not in papers and all(
        c.path(p, out, scale, inputs).exists() for f in p.figures for c in cells_of(p, f, scale, runs))]
    written = write_outputs(papers, finished, scale, out, runs, inputs, data_dir)
    return {"computed": len(todo), "reused": reused, "files": written, "seconds": time.monotonic() - started}


def aggregate(paper: Paper, figure: Figure, scale: Scale, out: Path, runs: int, inputs: dict) -> list[dict]:
    """One row per (dataset, x, method): each metric's mean and standard deviation over the runs."""
    rows = []
    for dataset in figure.datasets:
        for x in figure.points(scale):
            for method in figure.methods:
                values = [json.loads(Cell(paper.name, figure.name, dataset, x, method, r).path(paper, out, scale, inputs)
                                     .read_text())["metrics"] for r in range(runs)]
                row = {"dataset": dataset, "x": x, "method": method, "runs": runs}
                for metric in figure.metrics:
                    series = np.array([v[metric] for v in values], dtype=float)
                    finite = series[np.isfinite(series)]
                    row[metric] = float(finite.mean()) if finite.size else math.nan
                    row[f"{metric}_std"] = float(finite.std(ddof=1)) if finite.size > 1 else math.nan
                rows.append(row)
    return rows


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
