"""``wevent reproduce``: the tables and figures of the papers, as CSV, PNG and an index.

One module per paper declares its figures as data (:class:`~wevent.reproduce.figures.Figure`)
and how a cell (dataset, x, method, run) is computed; :mod:`~wevent.reproduce.runner` computes
the cells in parallel and caches each one, and :mod:`~wevent.reproduce.outputs` writes the files,
drawn in the styles of :mod:`~wevent.reproduce.style` (which ``wevent plot`` shares). Four papers
are reproduced, and the benchmark of all central mechanisms (:mod:`~wevent.reproduce.benchmark`),
which can run on the user's streams instead of ours (:func:`use_streams`).
"""

from __future__ import annotations

from . import benchmark, du, kellaris, ldp_ids, sun

# Kellaris et al.'s mechanisms before the benchmark's others: each method's style follows its first
# figure in this order (:func:`~wevent.reproduce.style.catalogue`).
PAPERS = {paper.name: paper for paper in (ldp_ids.PAPER, kellaris.PAPER, benchmark.PAPER, du.PAPER, sun.PAPER)}


def use_streams(streams: dict[str, str] | None) -> None:
    """Run the benchmark on ``streams`` (name -> CSV of counts or dump) instead of our datasets, in this
    process (the runner's worker processes call it too, as they start)."""
    PAPERS[benchmark.PAPER.name] = benchmark.paper(streams) if streams else benchmark.PAPER


__all__ = ["PAPERS", "use_streams"]
