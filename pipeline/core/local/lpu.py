"""LPU, LDP population uniform (LDP-IDS, Section 6.2 of the arXiv version)."""

from __future__ import annotations

import functools

import numpy as np

from ..base import Strategy
from ..randomness import DerivedRandomness, Phase
from ..validation import ParameterError
from ._base import DecisionOverride, LocalMechanism
from .device_reports import Devices
from .protocol import LocalDissimilarity, Request

__all__ = ["LPU"]


class LPU(LocalMechanism):
    """LPU, LDP population uniform: ``w`` disjoint groups take turns, each with the whole ``eps``.

    At start the users are split at random into ``w`` disjoint groups of ``floor(N/w)`` or
    ``ceil(N/w)`` (a permutation from the server's generator at ``(0, SETUP)``, so a restored
    mechanism rebuilds the same groups); at slot t, group ``(t-1) mod w`` reports with the whole
    ``eps`` and the release is its estimate.

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
    ``eps`` per user once every ``w`` slots: each user's report gaps are exactly ``w``.
    Mean squared error about ``V(eps, N/w)``; a user reports in one slot of ``w``.

    Examples
    --------
    >>> import numpy as np
    >>> from wevent.core.local.device_reports import Devices
    >>> m = LPU(1.0, 3, 2, population=10, devices=Devices.from_seed(0))
    >>> results = m.run(np.zeros((4, 10), dtype=int))
    >>> [r.n2 for r in results]
    [4, 3, 3, 4]
    >>> bool((results[0].users2 == results[3].users2).all())
    True

    References
    ----------
    X. Ren, L. Shi, W. Yu, S. Yang, C. Zhao, Z. Xu. LDP-IDS: Local Differential Privacy for
    Infinite Data Streams. SIGMOD 2022 (the SIGMOD version), and its extended arXiv version
    (the arXiv version): Section 5.2 of the SIGMOD version, Section 6.2 of the arXiv version.
    """

    name = "lpu"

    def __init__(
        self,
        epsilon: float,
        window: int,
        domain_size: int,
        population: int,
        *,
        oracle: str = "ada",
        var_mode: str = "exact_avg",
        bound: float | None = None,
        absent: bool = False,
        randomness: DerivedRandomness | None = None,
        devices: Devices | None = None,
        decision_override: DecisionOverride | None = None,
    ) -> None:
        super().__init__(epsilon, window, domain_size, population, oracle=oracle, var_mode=var_mode, bound=bound,
                         absent=absent, randomness=randomness, devices=devices, decision_override=decision_override)
        if self.population < self.window:
            raise ParameterError(f"LPU needs at least one user per group: N >= w; got N = {self.population}, w = {self.window}")

    @functools.cached_property
    def groups(self) -> list[np.ndarray]:
        """The ``w`` groups, drawn when first needed: a restore that publishes nothing draws none."""
        order = self.randomness.generator(0, Phase.SETUP).permutation(self.population)
        return [np.sort(order[g :: self.window]).astype(np.int64) for g in range(self.window)]

    def _decide(self, slot: int, dissimilarity: LocalDissimilarity | None) -> Request | Strategy:
        return self._request(slot, Phase.PUBLICATION, self.epsilon, self.groups[(slot - 1) % self.window])
