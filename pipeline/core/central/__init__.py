"""Central-model w-event mechanisms (trusted aggregator): Kellaris et al., PVLDB 2014, and the others of
the benchmark of Schäler et al. (PVLDB 2023): FAST_w, RescueDP, DSAT, PeGaSus, AdaPub, BD and BA with grouping.

Orderings the statistics tests assert
-------------------------------------

`tests/core/test_central_statistics.py` (seed-averaged, d = 1000) asserts each ordering of the
central mechanisms in the regime where their design predicts it: MAE(Uniform) = w/epsilon; on a
smooth stream BD <= Uniform and Sample < Uniform; on a moderately changing stream BA <= BD; on an
i.i.d. volatile stream Sample > Uniform and BA <= BD. On a smooth stream (changing by about 0.1
count per slot) BA is not below BD: BA settles where a candidate's noise scale equals its last
release's own noise (k of about 10 units at w = 40, a release every ~2k slots) and needs about w^2
slots to get there from its first 1-unit release, while BD republishes at epsilon/4 once per
window. Every worked example of the paper holds for both mechanisms, so this is the algorithms'
behaviour, not a deviation.
"""

from ._base import CentralMechanism
from .adapub import AdaPub
from .ba_grouping import GroupedBudgetAbsorption
from .bd_grouping import GroupedBudgetDistribution
from .budget_absorption import BudgetAbsorption
from .budget_distribution import BudgetDistribution
from .dissimilarity import Dissimilarity, DissimilarityMeasure
from .dsat import DSAT
from .fast import FASTw
from .pegasus import PeGaSus
from .rescuedp import RescueDP
from .sample import Sample
from .uniform import Uniform

__all__ = [
    "CentralMechanism",
    "Uniform",
    "Sample",
    "BudgetDistribution",
    "BudgetAbsorption",
    "FASTw",
    "DSAT",
    "RescueDP",
    "PeGaSus",
    "AdaPub",
    "GroupedBudgetDistribution",
    "GroupedBudgetAbsorption",
    "Dissimilarity",
    "DissimilarityMeasure",
]
