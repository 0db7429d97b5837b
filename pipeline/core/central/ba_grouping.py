"""BA with grouping: Budget Absorption with column partitioning (Kellaris et al. 2014, Section 4.5)."""

from __future__ import annotations

from ..randomness import DerivedRandomness
from ._base import DecisionOverride
from .budget_absorption import BudgetAbsorption
from .column_groups import ColumnGrouping

__all__ = ["GroupedBudgetAbsorption"]


class GroupedBudgetAbsorption(ColumnGrouping, BudgetAbsorption):
    """BA with grouping: BA's budget rule per slot, its publish test per group of similar bins.

    The bins are cut into ``groups`` groups by the root mean square of their releases over the
    last ``period`` slots (:mod:`.column_groups`). M1 measures every group's private mean
    absolute distance to its last release (``eps_1 = epsilon/(2w)`` for all of them together).
    M2 is BA's: at a slot that is not nullified, a publication would absorb the units the slots
    since the last one skipped, ``eps_2 = k u``, and every group whose dissimilarity exceeds
    ``1 / eps_2`` publishes its bins with it; the other groups repeat their last release. If any
    group publishes, the slot spends ``eps_2`` and nullifies the next ``k - 1`` slots for all.

    Parameters
    ----------
    epsilon : float
        The budget of any window of ``window`` consecutive slots, > 0.
    window : int
        ``w``, the window length in slots, >= 1.
    domain_size : int
        ``d``, the bins of a slot's histogram of counts (sensitivity 1 per user and slot).
    groups : int, optional
        ``k``, the groups of bins, in ``[1, d]``; ``max(1, floor(d / 500))`` if omitted (one group is BA).
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
    BA's: ``eps_1`` at every slot and publication budgets of at most ``epsilon/2`` in any window
    (:attr:`window_spend_bound`); groups publishing at the same slot share its budget.

    Notes
    -----
    Kellaris et al. sketch the partitioning and its RMS criterion. The benchmark of Schäler
    et al. lists BA with grouping beside BD with grouping; its period and default number of
    groups (two per thousand bins) are used here for both. Per-group windows of budgets would not
    cover a user who moves between groups; here the window is the stream's (:mod:`.column_groups`).

    Examples
    --------
    >>> from wevent.core.randomness import SecretKey, ZeroNoise
    >>> m = GroupedBudgetAbsorption(1.0, 4, 4, groups=2, randomness=ZeroNoise(SecretKey.from_seed(0)))
    >>> [(r.strategy.value[0], r.release.tolist()) for r in m.run([[100, 100, 0, 0], [100, 100, 5, 0]])]
    [('p', [100.0, 100.0, 0.0, 0.0]), ('a', [100.0, 100.0, 0.0, 0.0])]

    References
    ----------
    G. Kellaris, S. Papadopoulos, X. Xiao, D. Papadias. Differentially Private Event Sequences
    over Infinite Streams. PVLDB 7(12), 2014: Section 4.3 (Algorithm 3, BA) and Section 4.5
    (column partitioning), Figure 10.
    """

    name = "ba-grouped"

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
