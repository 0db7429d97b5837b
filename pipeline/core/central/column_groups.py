"""Column partitioning for BD and BA (Kellaris et al. 2014, Section 4.5): groups of bins decide apart.

The bins are partitioned into ``k`` groups by the magnitude of change of their releases: every
``period`` slots they are ranked by the root mean square of their releases over the last period
and cut into ``k`` consecutive groups (of ``d // k`` bins, the last one taking the rest); at
first the groups are consecutive bin numbers. The releases are public, so the partition spends
nothing.

M1 measures one private dissimilarity per group, the mean absolute distance of its bins' counts
to their last release: the groups are disjoint and a user is in one bin per slot, so the vector
costs ``eps_1`` once (parallel composition); each group's distance has sensitivity ``1/|g|``.
M2 keeps the host's budget rule (BD's or BA's) per slot and applies its test per group: every
group whose dissimilarity exceeds the slot's threshold publishes its bins with the slot's
budget, the others repeat theirs. All groups publishing at a slot share its budget, which is
what the window is charged.

Notes
-----
Kellaris et al. run an independent instance of BD or BA per group, each with its own window of
budgets. A user who is in a bin of one group at one slot and of another group at the next
would pay for both instances' publications, which their windows do not add up, so here the
window stays the stream's: the host's rule decides the budget a slot may spend, and the groups
decide only who publishes with it.

>>> from wevent.core.randomness import SecretKey, ZeroNoise
>>> m = ColumnGroupDissimilarity(1.0, 2, 4, groups=2)
>>> m.group_of.tolist()
[0, 0, 1, 1]
>>> dis = m.measure(1, np.array([4.0, 0, 0, 0]), np.zeros(4), ZeroNoise(SecretKey.from_seed(0)))
>>> dis.values.tolist(), dis.value
([2.0, 0.0], 2.0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..options import Option
from ..randomness import DerivedRandomness, Phase
from ..validation import ParameterError, check_positive_int
from ._base import AdaptiveCentralMechanism
from .dissimilarity import _EXACT_DISTANCE, Dissimilarity, DissimilarityMeasure, check_whole

if TYPE_CHECKING:
    from ..base import StepResult

__all__ = ["GroupDissimilarity", "ColumnGroupDissimilarity", "ColumnGrouping"]


@dataclass(frozen=True)
class GroupDissimilarity(Dissimilarity):
    """M1's output for one slot with grouped bins: every group's noisy dissimilarity (``value`` is the largest)."""

    values: np.ndarray | None = None


class ColumnGroupDissimilarity(DissimilarityMeasure):
    """M_{i,1} per group: the private mean absolute distance of every group's counts to its last release.

    Holds the partition (``group_of``: every bin's group) and regroups it from the releases.
    Budgets and the publication pool are :class:`.DissimilarityMeasure`'s.
    """

    def __init__(self, epsilon: float, window: int, domain_size: int, *, groups: int, period: int = 10,
                 budget_shift: bool = False, noise: str = "discrete") -> None:
        super().__init__(epsilon, window, domain_size, budget_shift=budget_shift, noise=noise)
        self.groups = check_positive_int(groups, "groups")
        if self.groups > self.domain_size:
            raise ParameterError(f"{self.groups} groups need at least as many bins, got d = {self.domain_size}")
        self.period = check_positive_int(period, "regrouping period")
        self.group_of = self._cut(np.arange(self.domain_size))
        self.squares = np.zeros(self.domain_size)  # sum of every bin's squared releases since the last regrouping

    def _cut(self, order: np.ndarray) -> np.ndarray:
        """Every bin's group when the bins in ``order`` are cut into consecutive groups."""
        size = self.domain_size // self.groups
        group_of = np.empty(self.domain_size, dtype=np.int64)
        group_of[order] = np.minimum(np.arange(self.domain_size) // size, self.groups - 1)
        return group_of

    def sizes(self) -> np.ndarray:
        return np.bincount(self.group_of, minlength=self.groups)

    def observe(self, slot: int, release: np.ndarray) -> None:
        """Account slot ``slot``'s release; at the end of a period, regroup by the releases' RMS."""
        self.squares += np.square(release)
        if slot % self.period == 0:
            rms = np.sqrt(self.squares / self.period)
            self.group_of = self._cut(np.argsort(rms, kind="stable"))  # ties stay in bin order
            self.squares[:] = 0.0

    def measure(self, slot: int, counts: np.ndarray, last_release: np.ndarray,
                randomness: DerivedRandomness, *, whole: bool = False) -> GroupDissimilarity:
        difference = np.abs(last_release - counts)
        sizes = self.sizes()
        if self.noise == "discrete":
            if not whole:
                check_whole(difference, "counts and releases")
            distance = np.minimum(np.bincount(self.group_of, difference, self.groups), _EXACT_DISTANCE)
            noise = randomness.discrete_laplace(slot, Phase.DISSIMILARITY, self.eps1, self.groups)
            values = (distance.astype(np.int64) + noise) / sizes
        else:
            noise = randomness.laplace(slot, Phase.DISSIMILARITY, 1.0, self.groups)  # Lap(1), scaled per group
            values = (np.bincount(self.group_of, difference, self.groups) + noise / self.eps1) / sizes
        return GroupDissimilarity(slot, float(values.max()), self.eps1, 1.0 / (sizes.min() * self.eps1), values)

    def prefetch(self, slots: np.ndarray, randomness: DerivedRandomness) -> None:
        """Draw the noise of :meth:`measure` at every one of ``slots`` ahead, in one batch."""
        if self.noise == "discrete":
            randomness.prefetch(slots, Phase.DISSIMILARITY, self.groups, epsilon=self.eps1)
        else:
            randomness.prefetch(slots, Phase.DISSIMILARITY, self.groups, scale=1.0)

    def state(self) -> dict[str, Any]:
        return {"group_of": self.group_of.copy(), "squares": self.squares.copy()}

    def load(self, state: dict[str, Any]) -> None:
        self.group_of = np.array(state["group_of"], dtype=np.int64)
        self.squares = np.array(state["squares"], dtype=float)


class ColumnGrouping(AdaptiveCentralMechanism):
    """What BD and BA with grouping add to their host: a test per group and releases per group.

    Listed before its host (:class:`.BudgetDistribution` or :class:`.BudgetAbsorption`), which
    calls :meth:`_decide` with its slot's threshold and :meth:`_fresh` with its slot's budget:
    here the first marks the bins of every group over the threshold and the second releases
    fresh counts on those bins only.
    """

    dissimilarity_measure: ColumnGroupDissimilarity
    OPTIONS = {
        "groups": Option.integer("k, the groups of bins", 1, 10**6, example=2, derived="max(1, floor(d / 500))"),
        "period": Option.integer("the slots between two regroupings", 1, 2**20, example=3),
    }
    _publishing: np.ndarray | None = None  # the bins the current slot's test chose (None: all)

    def _group(self, groups: int | None, period: int) -> None:
        """Replace the host's M1 by the grouped one (``groups`` defaults to ``max(1, floor(d / 500))``)."""
        host = self.dissimilarity_measure
        groups = max(1, host.domain_size // 500) if groups is None else groups
        self.dissimilarity_measure = ColumnGroupDissimilarity(host.epsilon, host.window, host.domain_size,
                                                              groups=groups, period=period,
                                                              budget_shift=host.budget_shift, noise=host.noise)

    def _decide(self, slot: int, dissimilarity, threshold: float) -> bool:
        self._publishing = None
        if self.decision_override is not None:
            forced = self.decision_override(slot)
            if forced is not None:
                return bool(forced)
        if not isinstance(dissimilarity, GroupDissimilarity) or dissimilarity.values is None:
            return False
        over = np.flatnonzero(dissimilarity.values > threshold)
        self._publishing = np.isin(self.dissimilarity_measure.group_of, over)
        return bool(over.size)

    def _fresh(self, slot: int, counts: np.ndarray, epsilon: float) -> np.ndarray:
        noisy = self._noisy(slot, counts, epsilon)
        if self._publishing is not None:
            noisy = np.where(self._publishing, noisy, self.last_release)
        self._publishing = None
        return self._release(noisy)

    def _advance(self, counts: np.ndarray, dissimilarity: Dissimilarity | None) -> StepResult:
        result = super()._advance(counts, dissimilarity)
        self.dissimilarity_measure.observe(result.slot, result.release)
        return result

    def _params(self) -> dict[str, Any]:
        m1 = self.dissimilarity_measure
        return {**super()._params(), "groups": m1.groups, "period": m1.period}

    def _dynamic(self) -> dict[str, Any]:
        return {**super()._dynamic(), "partition": self.dissimilarity_measure.state()}

    def _load(self, dynamic: dict[str, Any]) -> None:
        super()._load(dynamic)
        self.dissimilarity_measure.load(dynamic["partition"])
