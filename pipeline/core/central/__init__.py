"""Central-model w-event mechanisms (trusted aggregator): Kellaris et al., PVLDB 2014."""

from ._base import CentralMechanism
from .budget_absorption import BudgetAbsorption
from .budget_distribution import BudgetDistribution
from .dissimilarity import Dissimilarity, DissimilarityMeasure
from .sample import Sample
from .uniform import Uniform

__all__ = [
    "CentralMechanism",
    "Uniform",
    "Sample",
    "BudgetDistribution",
    "BudgetAbsorption",
    "Dissimilarity",
    "DissimilarityMeasure",
]
