"""Ada, the adaptive frequency oracle (LocSan, Algorithm 1 of the SIGMOD version of LDP-IDS).

A device uses GRR when ``d < 3 e^eps + 2`` (strictly) and OUE otherwise: GRR's approximate
variance ``(d - 2 + e^eps)`` is then below OUE's ``4 e^eps``. The server applies the same rule to
pick the estimator and ``V``; budget-division methods may therefore use different oracles for the
two sub-mechanisms of one slot. :func:`~.oracles.make_oracle` resolves ``ada`` with :func:`choose`.

Examples
--------
>>> choose(0.05, 5), choose(0.05, 6), choose(2.0, 77)
('grr', 'oue', 'oue')
"""

from __future__ import annotations

import math

__all__ = ["choose"]


def choose(epsilon: float, domain_size: int) -> str:
    """The frequency oracle Ada uses at this budget: ``'grr'`` or ``'oue'``."""
    return "grr" if domain_size < 3 * math.exp(epsilon) + 2 else "oue"
