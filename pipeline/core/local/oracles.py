"""Every local randomiser by name: the one factory mechanisms, the collector and queries use.

A stream names its oracle in its configuration and every request carries the name: ``ada`` (the
adaptive choice between GRR and OUE, :func:`~.adaptive.choose`, resolved at each request's
budget), ``grr``, ``oue``, or ``hm`` for means over ``[0, bound]`` (``d = 1``).

Examples
--------
>>> make_oracle("ada", 1.0, 2)
GRR(epsilon=1.0, domain_size=2)
>>> make_oracle("hm", 1.0, 1, bound=10.0)
HybridMechanism(epsilon=1.0, bound=10.0)
"""

from __future__ import annotations

import functools

from ..validation import ParameterError
from .adaptive import choose
from .grr import GRR
from .hybrid import HybridMechanism
from .oracle import LocalOracle
from .oue import OUE

__all__ = ["make_oracle", "ORACLE_NAMES"]

ORACLE_NAMES = ("ada", "grr", "oue", "hm")


@functools.lru_cache(maxsize=1024)
def make_oracle(name: str, epsilon: float, domain_size: int, *, bound: float | None = None,
                var_mode: str = "exact_avg") -> LocalOracle:
    """The oracle ``name`` (``ada`` resolved at ``epsilon``) for a domain of ``domain_size``.

    Oracles hold only what their parameters fix, so one is made per parameters and shared (a
    local slot asks for the same one up to five times, and a stream's budgets recur)."""
    if name == "ada":
        name = choose(epsilon, domain_size)
    if name == "grr":
        return GRR(epsilon, domain_size, var_mode)
    if name == "oue":
        return OUE(epsilon, domain_size, var_mode)
    if name == "hm":
        if domain_size != 1:
            raise ParameterError(f"mean estimation (hm) releases one number: d must be 1, got {domain_size}")
        return HybridMechanism(epsilon, 1.0 if bound is None else bound, var_mode)
    raise ParameterError(f"unknown oracle {name!r}; choose one of {', '.join(ORACLE_NAMES)}")
