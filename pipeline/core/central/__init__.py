"""Central-model w-event mechanisms (trusted aggregator): Kellaris et al., PVLDB 2014."""

from .budget_absorption import BudgetAbsorption
from .budget_distribution import BudgetDistribution
from .dissimilarity import Dissimilarity, DissimilarityMeasure
from .sample import Sample
from .uniform import Uniform
from ._base import CentralMechanism

__all__ = [
    "CentralMechanism",
    "Uniform",
    "Sample",
    "BudgetDistribution",
    "BudgetAbsorption",
    "Dissimilarity",
    "DissimilarityMeasure",
]
