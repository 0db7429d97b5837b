"""PLBU: personalized LDP Budget Uniform, the local-model baseline of Du et al. (PVLDB 2025), Section 5.2."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..exact import divide
from ..validation import ParameterError, check_domain
from .requirements import RequirementTypes

__all__ = ["PersonalizedLBU"]

# Reports drawn at once (slots x users): bounds the memory of the per-report draws when d > 2.
_REPORTS_PER_CHUNK = 4_000_000


class PersonalizedLBU:
    """Every user reports every slot by GRR at ``eps_i / w_i``; the server sums unbiased estimates.

    LBU (LDP-IDS, Section 4.1) with each user's own requirement: at every slot, user i reports
    their value through generalized randomized response at ``e_i = eps_i / w_i`` (rounded down,
    :func:`~wevent.core.exact.divide`), so any ``w_i`` consecutive slots spend at most ``eps_i``. The server adds the users' unbiased estimates of
    the indicator of each bin, ``(1[y_i = j] - q_i) / (p_i - q_i)`` with
    ``p_i = e^{e_i} / (e^{e_i} + d - 1)`` and ``q_i = 1 / (e^{e_i} + d - 1)``. The paper does not
    name the oracle; GRR is LBU's with d <= 3 e^eps + 2, and the one that takes a budget per user
    without per-user vectors.

    Users of one requirement type share ``p`` and ``q``, so a slot's reports are drawn from its
    ``(types, d)`` count matrix, exactly in distribution: of the ``c[k, j]`` users of type k
    holding j, ``Binomial(c[k, j], p_k)`` keep j and each of the others reports one of the d - 1
    other values uniformly (the last value when d = 2). Nothing carries over between slots, so
    :meth:`releases` draws any number of slots at once. Users absent from a slot (fewer than the
    type's size) do not report in it.

    Parameters
    ----------
    windows, epsilons, sizes : array_like
        Every requirement type's window ``w_k`` (>= 1), budget ``eps_k`` (> 0) and number of
        registered users.
    domain_size : int
        ``d`` >= 2, the values a user can hold.
    rng : numpy.random.Generator
        Where the reports are drawn from (the devices' randomness, simulated).

    Spend
    -----
    ``eps_k / w_k`` per user of type k per slot, rounded down, so any window of ``w_k`` slots
    spends at most ``eps_k``, exactly. Each bin's estimate has variance ``sum_i q_i (1 - q_i) / (p_i - q_i)^2`` for a
    bin no user holds (:attr:`variance`); a bin user i holds adds ``p_i (1 - p_i)`` in place of
    ``q_i (1 - q_i)``.

    Examples
    --------
    >>> plbu = PersonalizedLBU([2, 4], [1.0, 2.0], [1, 1], domain_size=3, rng=np.random.default_rng(0))
    >>> plbu.slot_epsilons.tolist()                       # eps_k / w_k
    [0.5, 0.5]
    >>> plbu.releases(np.array([[[1, 0, 0], [0, 0, 1]]])).shape  # one slot, two types
    (1, 3)

    References
    ----------
    Y. Du, Y. Hu, Z. Zhang, Z. Fang, L. Chen, B. Zheng, Y. Gao. Personalized w-event private
    publishing for infinite data streams. PVLDB 18(6), 2025, Section 5.2. X. Ren et al.
    LDP-IDS: Local Differential Privacy for Infinite Data Streams. SIGMOD 2022, Section 4.1.
    """

    name = "plbu"

    def __init__(self, windows: ArrayLike, epsilons: ArrayLike, sizes: ArrayLike, domain_size: int, *,
                 rng: np.random.Generator) -> None:
        self.types = RequirementTypes(np.asarray(windows), np.asarray(epsilons), np.asarray(sizes))
        self.domain_size = check_domain(domain_size)
        if self.domain_size < 2:
            raise ParameterError("PLBU needs a domain of at least 2 values")
        self.slot_epsilons = divide(self.types.epsilons, self.types.windows)
        e = np.exp(self.slot_epsilons)
        self._keep = e / (e + self.domain_size - 1)  # p_k
        self._other = 1.0 / (e + self.domain_size - 1)  # q_k
        self._weights = 1.0 / (self._keep - self._other)
        self.variance = float((self.types.sizes * self._other * (1.0 - self._other) * self._weights**2).sum())
        self._rng = rng

    def releases(self, type_counts) -> np.ndarray:
        """The estimated histograms (counts) of slots given their ``(..., types, d)`` count matrices."""
        counts = np.asarray(type_counts)
        shape = (self.types.count, self.domain_size)
        if counts.shape[-2:] != shape or counts.dtype.kind not in "iu":
            raise ParameterError(f"expected integer counts of {shape[0]} types x {shape[1]} values per slot, "
                                 f"got {counts.dtype} of shape {counts.shape}")
        if counts.size and (counts.min() < 0 or (counts.sum(axis=-1) > self.types.sizes).any()):
            raise ParameterError("type counts must be >= 0 and at most each type's size")
        slots = counts.reshape(-1, *shape)
        releases = np.empty((slots.shape[0], self.domain_size))
        step = max(1, _REPORTS_PER_CHUNK // int(self.types.sizes.sum()))
        for start in range(0, slots.shape[0], step):  # chunks of slots bound the memory of the reports
            chunk = slots[start : start + step]
            kept = self._rng.binomial(chunk, self._keep[:, None])
            reports = kept + self._moved(chunk - kept)
            # each report adds w_k 1[y = j] - w_k q_k: the offset counts the users present in the slot
            releases[start : start + step] = (np.einsum("skj,k->sj", reports, self._weights)
                                              - (chunk.sum(axis=2) @ (self._weights * self._other))[:, None])
        return releases.reshape(*counts.shape[:-2], self.domain_size)

    def _moved(self, moved: np.ndarray) -> np.ndarray:
        """Where the users who do not keep their value report: one of the d - 1 others, uniformly."""
        d = self.domain_size
        if d == 2:
            return moved[..., ::-1]
        flat = moved.reshape(-1)
        origin = np.repeat(np.arange(flat.size), flat)  # one entry per moved report: its (slot, type, value)
        value = origin % d
        shifted = origin - value + (value + self._rng.integers(1, d, origin.size)) % d
        return np.bincount(shifted, minlength=flat.size).reshape(moved.shape)
