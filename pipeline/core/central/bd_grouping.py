"""BD with grouping: Budget Distribution with column partitioning (Kellaris et al. 2014, Section 4.5)."""

from __future__ import annotations

from ..randomness import DerivedRandomness
from ._base import DecisionOverride
from .budget_distribution import BudgetDistribution
from .column_groups import ColumnGrouping

__all__ = ["GroupedBudgetDistribution"]


class GroupedBudgetDistribution(ColumnGrouping, BudgetDistribution):
    """BD with grouping: BD's budget rule per slot, its publish test per group of similar bins.

    The bins are cut into ``groups`` groups by the root mean square of their releases over the
    last ``period`` slots (:mod:`.column_groups`). M1 measures every group's private mean
    absolute distance to its last release (``eps_1 = epsilon/(2w)`` for all of them together).
    M2 is BD's: a publication would get half of what the window's publication pool has left,
    ``eps_2 = eps_rm / 2``, and every group whose dissimilarity exceeds ``1 / eps_2`` publishes its
    bins with it; the other groups repeat their last release. The slot spends ``eps_2`` if any
    group publishes.

    Parameters
    ----------
    epsilon : float
        The budget of any window of ``window`` consecutive slots, > 0.
    window : int
        ``w``, the window length in slots, >= 1.
    domain_size : int
        ``d``, the bins of a slot's histogram of counts (sensitivity 1 per user and slot).
    groups : int, optional
        ``k``, the groups of bins, in ``[1, d]``; ``max(1, floor(d / 500))`` if omitted (one group is BD).
    period : int, default 10
        The slots between two regroupings, >= 1.
    budget_shift : bool, default False
        Give M1 ``epsilon / d`` instead of ``epsilon / (2w)`` when ``d > 2w`` and the rest to the
        publications (Section 4.5).
    force_first_publish : bool, default False
        Publish slot 1 whatever its dissimilarity (every bin).
    randomness : DerivedRandomness, optional
        Where every draw comes from (a fresh random key if omitted).
    clamp_round : bool, default False
        Round fresh releases to non-negative integers (post-processing, no budget).
    noise : {"discrete", "laplace"}, default "discrete"
        Exact two-sided geometric noise on integer queries, or the paper's ``Lap(1/eps)``.
    decision_override : callable, optional
        ``slot -> bool | None``, a test hook that replaces the publish rule where not None (True
        publishes every group).

    Spend
    -----
    BD's: ``eps_1`` at every slot and at most ``(epsilon/2)(1 - 2^-w)`` on publications in any
    window (:attr:`window_spend_bound`); groups publishing at the same slot share its budget.

    Notes
    -----
    Kellaris et al. sketch the partitioning and its RMS criterion; the period and the default
    number of groups (two per thousand bins) are the benchmark of Schäler et al.'s. That
    benchmark keeps a window of budgets per bin; here the window is the stream's
    (:mod:`.column_groups` says why).

    Examples
    --------
    >>> from wevent.core.randomness import SecretKey, ZeroNoise
    >>> m = GroupedBudgetDistribution(1.0, 4, 4, groups=2, randomness=ZeroNoise(SecretKey.from_seed(0)))
    >>> r = m.step([100, 100, 0, 0])
    >>> r.release.tolist(), r.eps2
    ([100.0, 100.0, 0.0, 0.0], 0.25)
    >>> m.step([100, 100, 1, 0]).release.tolist()  # group 2's change is below 1 / eps_2
    [100.0, 100.0, 0.0, 0.0]

    References
    ----------
    G. Kellaris, S. Papadopoulos, X. Xiao, D. Papadias. Differentially Private Event Sequences
    over Infinite Streams. PVLDB 7(12), 2014: Section 4.2 (Algorithm 2, BD) and Section 4.5
    (column partitioning), Figure 10.
    """

    name = "bd-grouped"

    def __init__(
        self,
        epsilon: float,
        window: int,
        domain_size: int,
        *,
        groups: int | None = None,
        period: int = 10,
        budget_shift: bool = False,
        force_first_publish: bool = False,
        randomness: DerivedRandomness | None = None,
        clamp_round: bool = False,
        noise: str = "discrete",
        decision_override: DecisionOverride | None = None,
    ) -> None:
        super().__init__(epsilon, window, domain_size, budget_shift=budget_shift,
                         force_first_publish=force_first_publish, randomness=randomness, clamp_round=clamp_round,
                         noise=noise, decision_override=decision_override)
        self._group(groups, period)
