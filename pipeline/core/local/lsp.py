"""LSP, LDP sampling (LDP-IDS, Section 5.2 of the arXiv version)."""

from __future__ import annotations

from ..base import Strategy
from ..randomness import Phase
from ._base import LocalMechanism
from .protocol import LocalDissimilarity, Request

__all__ = ["LSP"]


class LSP(LocalMechanism):
    """LSP, LDP sampling: every user reports with the whole ``eps`` once per window.

    At slots ``t = 1, w+1, 2w+1, ...`` every user reports; other slots repeat the last release
    (NOT_SAMPLED). The schedule test is ``(t - 1) mod w == 0``, which is what the papers' bit
    counts imply and which also samples every slot at ``w = 1``. Each report is requested (one
    instruction bit).

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
    ``eps`` per user at a sampled slot, 0 elsewhere; every window holds one sampled slot.
    A user reports in ``ceil(T/w)`` of ``T`` slots.

    Examples
    --------
    >>> import numpy as np
    >>> from wevent.core.local.device_reports import Devices
    >>> m = LSP(1.0, 3, 2, population=50, devices=Devices.from_seed(0))
    >>> [r.strategy.value for r in m.run(np.zeros((4, 50), dtype=int))]
    ['publish', 'not_sampled', 'not_sampled', 'publish']

    References
    ----------
    X. Ren, L. Shi, W. Yu, S. Yang, C. Zhao, Z. Xu. LDP-IDS: Local Differential Privacy for
    Infinite Data Streams. SIGMOD 2022 (the SIGMOD version), and its extended arXiv version
    (the arXiv version): Section 4.2.2 of the SIGMOD version, Section 5.2 of the arXiv version.
    """

    name = "lsp"
    instructs = (False, True)

    def _decide(self, slot: int, dissimilarity: LocalDissimilarity | None) -> Request | Strategy:
        if (slot - 1) % self.window == 0:
            return self._request(slot, Phase.PUBLICATION, self.epsilon, None)
        return Strategy.NOT_SAMPLED
