"""A stream's ``query`` table, parsed (:class:`QuerySettings`): which decayed range-query index it opts into.

The index itself is an agent (:mod:`wevent.stream.agents.index`); the settings are part of the
stream's config, which checks them when it loads (a mode B or C index takes its budget out of the
stream's, :attr:`QuerySettings.reserved_epsilon`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.decayed import check_decay
from ..core.registry import mechanisms
from ..core.validation import ParameterError, check_epsilon, check_positive_int

__all__ = ["MODES", "QuerySettings", "unindexable"]

MODES = ("A", "B", "C")


@dataclass(frozen=True)
class QuerySettings:
    mode: str
    window: int
    decay: float
    epsilon: float = 0.0  # RTP_DMM's own budget (modes B and C)
    lambda_variant: str = "paper"

    @classmethod
    def parse(cls, raw: dict, where: str) -> "QuerySettings":
        if not isinstance(raw, dict):
            raise ParameterError(f"{where}: query must be a table/mapping")
        unknown = set(raw) - {"mode", "window", "decay", "epsilon", "lambda_variant"}
        if unknown:
            raise ParameterError(f"{where}: unknown query field(s) {', '.join(sorted(unknown))}")
        mode = str(raw.get("mode", "A")).upper()
        if mode not in MODES:
            raise ParameterError(f"{where}: query mode must be one of {', '.join(MODES)}, got {raw.get('mode')!r}")
        settings = cls(mode, check_positive_int(raw.get("window", 1024), f"{where}: query window"),
                       check_decay(raw.get("decay", 1.0), f"{where}: query decay"),
                       float(raw.get("epsilon", 0.0)), str(raw.get("lambda_variant", "paper")))
        if mode != "A":
            check_epsilon(settings.epsilon, f"{where}: query epsilon (RTP_DMM's budget, modes B and C)")
        elif "epsilon" in raw:
            raise ParameterError(f"{where}: mode A spends nothing; query epsilon is only for modes B and C")
        return settings

    @property
    def reserved_epsilon(self) -> float:
        """What the index takes from the stream's w-event budget."""
        return self.epsilon if self.mode != "A" else 0.0


def unindexable(mechanism: str) -> str | None:
    """Why releases of ``mechanism`` cannot be indexed with standard errors (None: they can)."""
    return getattr(mechanisms().get(mechanism), "no_release_variance", None)
