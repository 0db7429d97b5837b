"""LBU, LDP budget uniform (LDP-IDS, Section 5.2 of the arXiv version)."""

from __future__ import annotations

from ..base import Strategy
from ..exact import divide
from ..randomness import Phase
from ._base import LocalMechanism
from .protocol import LocalDissimilarity, Request

__all__ = ["LBU"]


class LBU(LocalMechanism):
    """LBU, LDP budget uniform: every user reports at every slot with ``eps / w`` (rounded down,
    :func:`~wevent.core.exact.divide`).

    The release is the oracle's estimate. There is no dissimilarity, no decision and no
    instruction traffic: users report on a clock.

    Parameters
    ----------
    epsilon : float
        Every user's budget over any window of ``window`` consecutive slots, > 0.
    window : int
        ``w``, the window length in slots, >= 1.
    domain_size : int
        ``d``, the values a user can hold (1 for means with ``oracle="hm"``).
    population : int
        ``N``, the users, numbered ``0 .. N-1``.
    oracle : {"ada", "grr", "oue", "hm"}, default "ada"
        The devices' perturbation: the adaptive choice between GRR and OUE, one of them, or the
        Hybrid Mechanism for means over ``[0, bound]``.
    var_mode : str, default "exact_avg"
        The form of ``V(eps, n)``: the exact average over the bins by default.
    bound : float, optional
        The top of the value range for ``oracle="hm"`` (1 if omitted); ignored otherwise.
    absent : bool, default False
        Whether a user may have no value in a slot. Every asked user answers all the same: the
        devices answer in ``domain_size + 1`` categories, the last meaning "no value" (the caller
        gives such users that value), and releases keep the other ``domain_size`` bins. For
        frequency oracles only: a mean needs every user's value.
    randomness : DerivedRandomness, optional
        Where the server's draws come from (a fresh random key if omitted).
    devices : Devices, optional
        The simulated devices :meth:`step` asks (the pipeline asks real ones instead).
    decision_override : callable, optional
        ``slot -> bool | None``, a test hook that replaces the publish rule where not None.

    Spend
    -----
    ``eps / w`` per user per slot, rounded down, so every window of ``w`` slots spends at most
    ``eps``, exactly.
    Mean squared error ``V(eps/w, N)``; every user reports at every slot.

    Examples
    --------
    >>> import numpy as np
    >>> from wevent.core.local.device_reports import Devices
    >>> m = LBU(1.0, 4, 2, population=100, devices=Devices.from_seed(0))
    >>> results = m.run(np.zeros((3, 100), dtype=int))
    >>> [(r.strategy.value, r.eps2, r.reports, r.bits) for r in results][0]
    ('publish', 0.25, 100, 100)

    References
    ----------
    X. Ren, L. Shi, W. Yu, S. Yang, C. Zhao, Z. Xu. LDP-IDS: Local Differential Privacy for
    Infinite Data Streams. SIGMOD 2022 (the SIGMOD version), and its extended arXiv version
    (the arXiv version): Section 4.2.1 of the SIGMOD version, Section 5.2 of the arXiv version.
    """

    name = "lbu"
    instructs = (False, False)

    @property
    def fixed_report_budget(self) -> float:
        return divide(self.epsilon, self.window)

    def _decide(self, slot: int, dissimilarity: LocalDissimilarity | None) -> Request | Strategy:
        return self._request(slot, Phase.PUBLICATION, self.fixed_report_budget, None)
