"""Ada, the adaptive frequency oracle (LocSan, Algorithm 1 of the SIGMOD version of LDP-IDS).

A device uses GRR when ``d < 3 e^eps + 2`` (strictly) and OUE otherwise: GRR's approximate
variance ``(d - 2 + e^eps)`` is then below OUE's ``4 e^eps``. The server applies the same rule to
pick the estimator and ``V``; budget-division methods may therefore use different oracles for the
two sub-mechanisms of one slot. :func:`make_oracle` resolves every oracle name a mechanism accepts.

Examples
--------
For example:

>>> choose(0.05, 5), choose(0.05, 6), choose(2.0, 77)
('grr', 'oue', 'oue')
>>> make_oracle("ada", 1.0, 2)
GRR(epsilon=1.0, domain_size=2)
"""

from __future__ import annotations

import math

from ..validation import ParameterError
from .grr import GRR
from .hybrid import HybridMechanism
from .oracle import LocalOracle
from .oue import OUE

__all__ = ["choose", "make_oracle", "ORACLE_NAMES"]

ORACLE_NAMES = ("ada", "grr", "oue", "hm")


def choose(epsilon: float, domain_size: int) -> str:
    """The frequency oracle Ada uses at this budget: ``'grr'`` or ``'oue'``."""
    return "grr" if domain_size < 3 * math.exp(epsilon) + 2 else "oue"


def make_oracle(name: str, epsilon: float, domain_size: int, *, bound: float | None = None,
                var_mode: str = "exact_avg") -> LocalOracle:
    """The oracle ``name`` (``ada`` resolved at ``epsilon``) for a domain of ``domain_size``."""
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
