"""One cell of a figure: (dataset, x, method, run) -> the metrics of that run.

Most cells are one ``wevent simulate`` run: a paper module turns the cell into that command's
arguments, and the ``simulate`` function the run is given (the command's own, in-process) computes
its summary, exactly as the command would. The CSV headers print the same arguments, so any cell
can be rerun by hand.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from typing import Any, Callable

from .figures import TPR, Figure, Scale

__all__ = ["Paper", "metric_value"]

# (figure, dataset, x, method, scale, inputs) -> the cell's ``wevent simulate`` arguments without --seed
Command = Callable[[Figure, str, Any, str, Scale, dict], list[str]]
# (figure, dataset, x, method, run, scale, inputs) -> {metric: value}
Compute = Callable[[Figure, str, Any, str, int, Scale, dict], dict]
# (figure, dataset, x, method, scale, inputs) -> how ``compute`` computes the cell
DescribeCell = Callable[[Figure, str, Any, str, Scale, dict], str]


@dataclass(frozen=True)
class Paper:
    """A paper's figures and how their cells are computed.

    Parameters
    ----------
    name : the command's PAPER argument.
    citation : authors, venue and year.
    figures : the figures and tables reproduced.
    command : ``(figure, dataset, x, method, scale, inputs) -> [simulate arguments]`` without
        ``--seed``, for the cells that are ``wevent simulate`` runs; ``None`` for the others.
    compute : ``(figure, dataset, x, method, run, scale, inputs) -> {metric: value}``, for the others; it
        computes every metric the cell's figures draw.
    describe_cell : ``(figure, dataset, x, method, scale, inputs) -> str``, how ``compute`` computes a cell.
    ranked : its methods are also ranked by their errors over the datasets (:mod:`~wevent.reproduce.ranking`).
    differences : how the set-up differs from the paper's, for the index, after the figures.
    """

    name: str
    citation: str
    figures: tuple[Figure, ...]
    command: Command | None = None
    compute: Compute | None = None
    describe_cell: DescribeCell | None = None
    ranked: bool = False
    differences: str = ""

    def figure(self, name: str) -> Figure:
        return next(f for f in self.figures if f.name == name)

    def describe(self, figure: Figure, dataset: str, x, method: str, scale: Scale, inputs: dict) -> str:
        """How one cell is computed, for the CSV header (the run's ``--seed r`` is appended)."""
        arguments = self._arguments(figure, dataset, x, method, scale, inputs)
        if arguments is None:
            assert self.describe_cell is not None, f"{self.name}: a paper without a command describes its cells"
            return self.describe_cell(figure, dataset, x, method, scale, inputs)
        return "wevent simulate " + shlex.join(arguments)

    def how(self, figure: Figure, dataset: str, x, method: str, run: int, scale: Scale, inputs: dict) -> str:
        """What one run of a cell computes, exactly: its command with its seed. Cells of different
        figures that run the same command are one computation."""
        return f"{self.describe(figure, dataset, x, method, scale, inputs)} --seed {run}"

    def summary(self, figure: Figure, dataset: str, x, method: str, run: int, scale: Scale, inputs: dict,
                simulate: Callable[[list[str]], dict]) -> dict:
        """One run of a cell: the whole ``wevent simulate`` summary (``simulate`` computes it from the
        command's arguments), or what ``compute`` returns."""
        arguments = self._arguments(figure, dataset, x, method, scale, inputs)
        if arguments is None:
            assert self.compute is not None, f"{self.name}: a paper without a command computes its cells"
            return self.compute(figure, dataset, x, method, run, scale, inputs)
        return simulate([*arguments, "--seed", str(run)])

    def _arguments(self, figure: Figure, dataset: str, x, method: str, scale: Scale, inputs: dict) -> list[str] | None:
        return None if self.command is None else self.command(figure, dataset, x, method, scale, inputs)


def metric_value(summary: dict, metric: str) -> float:
    """A metric from a ``wevent simulate`` summary; NaN where the run has none (an AUC without events)."""
    if metric.startswith(TPR):  # a point of the ROC curve: its true positive rate at one false positive rate
        curve = summary.get("roc_tpr")
        fpr = float(metric[len(TPR):])
        return math.nan if curve is None else float(next(t for f, t in zip(summary["roc_fpr"], curve)
                                                         if math.isclose(f, fpr, abs_tol=1e-9)))
    value = summary.get("mse" if metric == "amre" else metric)
    return math.nan if value is None else float(value)
