"""What a reproduced figure or table is: its sweep, methods, metrics and data, declared as data.

A :class:`Figure` names the paper's x-axis and its points, the methods drawn, the metrics (one
panel row each), the datasets (one panel column each) and, where the paper prints numbers, those
numbers. A *cell* is one (dataset, x, method, run): the unit that is computed, cached and reused.
How a cell is computed is the paper module's ``cell_command`` (a ``wevent simulate`` command
line) or ``compute_cell`` (anything else); see :mod:`wevent.reproduce.cells`.

>>> f = Figure("fig3", "MRE vs epsilon", "epsilon", (0.5, 1.0, 1.5, 2.0, 2.5), ("lbu", "lpa"), ("mre",), ("lns",))
>>> f.points(QUICK), f.points(TINY)
((0.5, 1.5, 2.5), (0.5, 2.5))
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Figure", "Scale", "SCALES", "FULL", "QUICK", "TINY", "METRIC_LABELS", "TPR", "ROC_POINTS"]

# A ROC curve is stored as metrics: its true positive rate at each of 21 false positive rates, the
# points ``wevent simulate --roc`` reports (averaged vertically over runs).
TPR = "tpr@"
ROC_POINTS = tuple(f"{TPR}{i / 20:g}" for i in range(21))

METRIC_LABELS = {
    "mre": "MRE",
    "mae": "MAE",
    "mse": "MSE",
    "amre": "AMRE (eq. 15: mean squared error)",
    "ajsd": "AJSD",
    "bits_per_user_per_slot": "bits per user per slot",
    "roc_auc": "ROC AUC",
    "query_mse": "mean squared error of range queries",
}


@dataclass(frozen=True)
class Scale:
    """How much of the papers' experiments to run.

    Parameters
    ----------
    name : ``full`` (the papers' sizes), ``quick`` (all of them in minutes) or ``tiny`` (seconds, for tests).
    runs : repetitions of every cell (seeds 0..runs-1 for the data and the noise).
    points : x-axis points kept per sweep (first, last and evenly spaced ones between); 0 keeps all.
    shrink : divisor of the synthetic streams' users and slots.
    """

    name: str
    runs: int
    points: int
    shrink: int

    def size(self, users: int, slots: int, min_slots: int = 1) -> tuple[int, int]:
        """The (users, slots) of a synthetic stream of the papers' ``users`` x ``slots`` at this scale."""
        return max(100, users // self.shrink), max(min_slots, slots // self.shrink)


FULL = Scale("full", runs=10, points=0, shrink=1)
QUICK = Scale("quick", runs=2, points=3, shrink=10)
TINY = Scale("tiny", runs=1, points=2, shrink=200)
SCALES = {s.name: s for s in (FULL, QUICK, TINY)}


@dataclass(frozen=True)
class Figure:
    """One figure (or table) of a paper, as the axes, methods and data it is drawn from.

    Parameters
    ----------
    name : file stem, e.g. ``fig3``; the paper's own figure or table number.
    title : the paper's caption.
    x : the x-axis (``epsilon``, ``w``, ``beta``, ``decay`` ...).
    xs : the paper's x-axis points.
    methods : the methods drawn, by the names the paper module computes.
    metrics : one panel row per metric (keys of :data:`METRIC_LABELS`).
    datasets : one panel column per dataset.
    log_y, log_x : logarithmic axes where the paper uses them.
    groups : methods drawn on separate stacked axes within a panel (the paper's split y-axes).
    table : a table, not a figure: written as CSV and in the index, never drawn.
    reported : the paper's printed numbers, ``{(dataset, x, method, metric): value}``.
    note : what differs from the paper (datasets we do not have, a missing baseline).
    roc : drawn as ROC curves, one panel per dataset, from the :data:`ROC_POINTS` metrics.
    """

    name: str
    title: str
    x: str
    xs: tuple
    methods: tuple[str, ...]
    metrics: tuple[str, ...]
    datasets: tuple[str, ...]
    log_y: bool = False
    log_x: bool = False
    groups: tuple[tuple[str, ...], ...] = ()
    table: bool = False
    reported: dict = field(default_factory=dict)
    note: str = ""
    roc: bool = False

    def points(self, scale: Scale) -> tuple:
        """The x-axis points run at ``scale``: all of them (always for a table), or ``scale.points`` spread
        over the sweep."""
        if self.table or scale.points == 0 or len(self.xs) <= scale.points:
            return tuple(self.xs)
        step = (len(self.xs) - 1) / (scale.points - 1)
        return tuple(self.xs[round(i * step)] for i in range(scale.points))
