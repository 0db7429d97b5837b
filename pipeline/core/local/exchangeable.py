"""A slot of a binary stream whose ones sit on a uniformly random set of users: only counts matter."""

from __future__ import annotations

import numpy as np

from ..validation import ParameterError, check_positive_int

__all__ = ["ExchangeableBinarySlot"]


class ExchangeableBinarySlot:
    """The values of one slot in which ``ones`` of the ``population`` users, a uniformly random set
    drawn independently of everything else, hold 1 and the others 0.

    The synthetic streams of LDP-IDS are such slots (:mod:`wevent.core.synthetic`): at every slot
    exactly ``round(p_t N)`` users, chosen uniformly and independently of other slots, hold 1. A
    simulation drawing the reports' sufficient statistic needs of a request only how many of its
    users hold 1, and no mechanism chooses whom to ask from the values of the slot it asks about, so
    that number can be drawn instead of the N values:

    * a request of every user holds exactly ``ones``;
    * requests of sampled users in one slot are disjoint (population division takes users out of
      the available set when it asks them), and given how many ones the earlier ones held, the ones
      left lie on a uniform random set of the users not yet asked, so the next request holds
      ``Hypergeometric(ones left, users left - ones left, its size)`` of them.

    The draws are therefore exact in distribution, request after request, at ``O(1)`` per request
    instead of ``O(N)`` values per slot. A request that overlaps an earlier one of the slot is
    refused rather than drawn wrongly.

    Parameters
    ----------
    population : int
        ``N``, the users, numbered ``0 .. N-1``.
    ones : int
        How many of them hold 1 in this slot, ``0 <= ones <= N``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> slot = ExchangeableBinarySlot(population=1000, ones=100)
    >>> len(slot), slot.counts(None, rng).tolist()   # every user: the slot's histogram
    (1000, [900, 100])
    >>> first = slot.counts(np.arange(0, 500), rng)   # half the users: Hypergeometric(100, 900, 500)
    >>> second = slot.counts(np.arange(500, 1000), rng)  # the other half holds the rest
    >>> int(first[1] + second[1])
    100

    References
    ----------
    X. Ren, L. Shi, W. Yu, S. Yang, C. Zhao, Z. Xu. LDP-IDS: Local Differential Privacy for
    Infinite Data Streams. SIGMOD 2022, Section 7.1.1 (the synthetic streams) and Section 5
    (population division's samples).
    """

    def __init__(self, population: int, ones: int) -> None:
        self.population = check_positive_int(population, "population N")
        self.ones = int(ones)
        if not 0 <= self.ones <= self.population:
            raise ParameterError(f"{ones} ones among {population} users")
        self._asked: list[np.ndarray] = []  # the sampled requests of this slot, each sorted
        self._users_left, self._ones_left = self.population, self.ones

    def __len__(self) -> int:
        return self.population

    def counts(self, users: np.ndarray | None, rng: np.random.Generator) -> np.ndarray:
        """``[zeros, ones]`` among ``users`` (sorted ids; None for every user), drawn from ``rng``."""
        if users is None:
            return np.array([self.population - self.ones, self.ones], dtype=np.int64)
        users = np.asarray(users)
        for earlier in self._asked:
            at = np.searchsorted(earlier, users).clip(max=earlier.size - 1)
            if earlier.size and (earlier[at] == users).any():
                raise ParameterError("a request asks users an earlier request of the slot asked: their values "
                                     "are not drawn independently of it")
        self._asked.append(users)
        ones = int(rng.hypergeometric(self._ones_left, self._users_left - self._ones_left, users.size)) \
            if users.size else 0
        self._users_left -= users.size
        self._ones_left -= ones
        return np.array([users.size - ones, ones], dtype=np.int64)
