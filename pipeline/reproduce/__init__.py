"""``wevent reproduce``: the tables and figures of the four papers, as CSV, PNG and an index.

One module per paper declares its figures as data (:class:`~wevent.reproduce.figures.Figure`)
and how a cell (dataset, x, method, run) is computed; :mod:`~wevent.reproduce.runner` computes
the cells in parallel and caches each one, and :mod:`~wevent.reproduce.outputs` writes the files,
drawn in the styles of :mod:`~wevent.reproduce.style` (which ``wevent plot`` shares).
"""

from . import du, kellaris, ldp_ids, sun

PAPERS = {paper.name: paper for paper in (ldp_ids.PAPER, kellaris.PAPER, du.PAPER, sun.PAPER)}

__all__ = ["PAPERS"]
