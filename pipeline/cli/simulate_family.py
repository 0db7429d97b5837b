"""What every model family of ``wevent simulate`` provides, and what its runner returns.

The front end (:mod:`wevent.cli.simulate`) dispatches to the per-model modules
(``simulate_central``, ``simulate_local``, ``simulate_personalized``); they import this module,
never the front end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Protocol

import numpy as np

__all__ = ["Family", "Outcome", "average_runs"]


@dataclass
class Outcome:
    """What a family's runner returns: the JSON summary and the release records."""

    summary: dict
    records: list


class Family(Protocol):
    """A model family: its mechanism names, its own settings (the mechanisms' options are flags made
    from their declarations), and a runner of one mechanism."""

    name: str

    @property
    def mechanisms(self) -> tuple[str, ...]: ...

    def add_arguments(self, parser) -> None: ...

    def run(self, mechanism: str, args) -> Outcome: ...


def average_runs(summaries: list[dict], means: Iterable[str], maxima: Iterable[str]) -> dict:
    """``--runs``: run 1's summary with the runs' means of ``means`` and the largest of ``maxima``, and
    ``runs``, their number."""
    first = dict(summaries[0], runs=len(summaries))
    if len(summaries) > 1:
        for key in means:
            first[key] = float(np.mean([s[key] for s in summaries]))
        for key in maxima:
            first[key] = max(s[key] for s in summaries)
    return first
