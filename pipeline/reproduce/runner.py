"""Run the papers' cells in parallel, cache each one, and write the CSVs, PNGs and the index.

A cell's run is cached under ``OUT/cells`` as a small JSON file named by a digest of exactly what
it computes (its ``wevent simulate`` command and seed, or the description of another computation),
written atomically when it finishes: the whole summary, so that every figure drawing another
metric of the same command reads it, and the seconds it took. Figures that run one command share
its file; an interrupted run resumes where it stopped; a rerun computes only what is missing, and
``--quick`` and full runs share one directory without mixing (their commands differ in size).

The work goes to ``--jobs`` processes one task at a time: the datasets first, then the cells in
groups of one paper, dataset and run (the cells of a group read the same stream, which a process
keeps in memory from one cell to the next), the groups with the most cells first. A task is the
methods of one point of a figure, in one process: they share what a process keeps from one cell to
the next (a personalized point's per-type counts), which two processes would each compute. A
figure's CSV and PNG are written by a worker as soon as its last cell is in, ahead of the cells
still waiting.
"""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .cache import Cell, cell_path, cells_of
from .cells import Paper
from .datasets import prepare
from .figures import Scale

__all__ = ["run"]


def _compute(cells: list[tuple[Cell, Path]], scale: Scale, inputs: dict, simulate: Callable[[list[str]], dict]
             ) -> list[float]:
    """Run the cells one after another and cache each summary as it is done; the CPU seconds of each."""
    from . import PAPERS

    spent = []
    for cell, path in cells:
        paper = PAPERS[cell.paper]  # a worker process finds the paper by name: figures hold no picklable code
        started = time.process_time()
        summary = paper.summary(paper.figure(cell.figure), cell.dataset, cell.x, cell.method, cell.run, scale, inputs,
                                simulate)
        seconds = time.process_time() - started
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        partial.write_text(json.dumps({"how": cell.how(scale, inputs), "summary": summary, "cpu_seconds": seconds}))
        partial.replace(path)
        spent.append(seconds)
    return spent


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


class _InProcess(concurrent.futures.Executor):
    """``--jobs 1``: every task runs where it is submitted."""

    def submit(self, fn, /, *args, **kwargs):
        future: concurrent.futures.Future = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - as an executor does: result() raises it
            future.set_exception(exc)
        return future


@dataclass
class _Plan:
    """What a run computes and writes: the distinct cells missing, and what every figure waits for."""

    todo: list[list[tuple[Cell, Path]]]  # the tasks, in submission order: the methods of one point of a figure each
    waiting: dict[tuple[str, str], set[Path]]  # (paper, figure) -> its cells not yet cached
    figures_of: dict[Path, list[tuple[str, str]]]  # a missing cell -> the figures drawing it
    reused: int


def _plan(papers: list[Paper], scale: Scale, out: Path, runs: int, inputs: dict) -> _Plan:
    owner: dict[Path, Cell] = {}
    waiting: dict[tuple[str, str], set[Path]] = {}
    figures_of: dict[Path, list[tuple[str, str]]] = collections.defaultdict(list)
    reused = set()
    for paper in papers:
        for figure in paper.figures:
            key = (paper.name, figure.name)
            waiting[key] = set()
            for cell in cells_of(paper, figure, scale, runs):
                path = cell_path(out, cell.how(scale, inputs))
                if path.exists():
                    reused.add(path)
                    continue
                owner.setdefault(path, cell)
                waiting[key].add(path)
                figures_of[path].append(key)
    groups: dict[tuple, list[tuple[Cell, Path]]] = {}
    for path, cell in owner.items():
        groups.setdefault((cell.paper, cell.dataset, cell.run), []).append((cell, path))
    ordered = sorted(groups.values(), key=len, reverse=True)  # stable: equal groups keep the papers' order
    # a group's cells are in the figures' order, a point's methods in a row: one task each point
    tasks = [list(point) for group in ordered
             for _, point in itertools.groupby(group, key=lambda entry: (entry[0].figure, entry[0].x))]
    return _Plan(tasks, waiting, figures_of, len(reused))


def run(papers: list[Paper], scale: Scale, out: Path, runs: int, jobs: int, data_dir: Path | None,
        simulate: Callable[[list[str]], dict], progress: bool | None = None, thumbnails: Path | None = None,
        streams: dict[str, str] | None = None) -> dict:
    """Compute every missing cell of ``papers`` and write their outputs (and the README's figures into
    ``thumbnails``); return what was done. ``simulate`` computes the summary of a ``wevent simulate``
    command from its arguments (a function of a module, which the worker processes import). ``streams``
    are the user's streams the benchmark runs on (:func:`~wevent.reproduce.use_streams`, which the
    caller has called, and which every worker process calls as it starts)."""
    from . import PAPERS, use_streams
    from .outputs import write_figure, write_index, write_thumbnails
    from .results import write_results

    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    pool = _InProcess() if jobs == 1 else concurrent.futures.ProcessPoolExecutor(
        max_workers=jobs, initializer=use_streams, initargs=(streams,))
    with pool:
        # every paper's inputs, so the index can also list papers finished by earlier runs
        inputs = prepare({d for p in PAPERS.values() for f in p.figures for d in f.datasets}, out, data_dir, scale,
                         pool.map)
        plan = _plan(papers, scale, out, runs, inputs)
        tasks: collections.deque[tuple[Callable, tuple]] = collections.deque(
            (write_figure, (paper, figure, scale, out, runs, inputs, data_dir))
            for (paper, figure), missing in plan.waiting.items() if not missing)
        tasks.extend((_compute, (cells, scale, inputs, simulate)) for cells in plan.todo)
        seconds: dict[str, float] = collections.defaultdict(float)
        written: list[str] = []
        bar = _progress(sum(map(len, plan.todo)), progress)
        in_flight: dict[concurrent.futures.Future, tuple[Callable, tuple]] = {}
        try:
            while tasks or in_flight:
                while tasks and len(in_flight) < 2 * jobs:  # a few queued per worker: figures can overtake cells
                    fn, args = tasks.popleft()
                    in_flight[pool.submit(fn, *args)] = (fn, args)
                done, _ = concurrent.futures.wait(in_flight, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in done:
                    fn, args = in_flight.pop(future)
                    if fn is write_figure:
                        written += future.result()
                        continue
                    for (cell, path), spent in zip(args[0], future.result()):
                        seconds[cell.paper] += spent
                        bar.update(1)
                        for key in plan.figures_of[path]:
                            plan.waiting[key].discard(path)
                            if not plan.waiting[key]:
                                tasks.appendleft((write_figure, (*key, scale, out, runs, inputs, data_dir)))
        except BaseException:
            for future in in_flight:
                future.cancel()
            raise
        finally:
            bar.close()
    finished = [p for p in PAPERS.values() if p not in papers and all(
        cell_path(out, c.how(scale, inputs)).exists() for f in p.figures for c in cells_of(p, f, scale, runs))]
    written.append(write_index(papers, finished, scale, out, runs, inputs))
    reported = [p for p in PAPERS.values() if p in papers or p in finished]
    written.append(write_results(reported, scale, out, runs, inputs))
    if thumbnails is not None:
        written += write_thumbnails(reported, scale, out, runs, inputs, thumbnails)
    return {"computed": sum(map(len, plan.todo)), "reused": plan.reused, "files": written,
            "cpu_seconds": {p.name: seconds[p.name] for p in papers if p.name in seconds},
            "seconds": time.monotonic() - started}
