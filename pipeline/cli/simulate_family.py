"""What every model family of ``wevent simulate`` provides, and what its runner returns.

The front end (:mod:`wevent.cli.simulate`) dispatches to the per-model modules
(``simulate_central``, ``simulate_local``, ``simulate_personalized``); they import this module,
never the front end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["Family", "Outcome"]


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
