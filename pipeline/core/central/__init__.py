"""Central-model w-event mechanisms (trusted aggregator): Kellaris et al., PVLDB 2014, and the others of
the benchmark of Schäler et al. (PVLDB 2023): FAST_w, RescueDP, DSAT, PeGaSus, AdaPub, BD and BA with grouping."""

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
