"""Personalized w-event privacy (Du et al., PVLDB 18(6) 2025): every user i keeps their own (w_i, eps_i).

The Sampling Mechanism (:mod:`.sampling`), OBS (:mod:`.obs`), DC (:mod:`.dissimilarity`), the
PWSM framework (:mod:`.pwsm`), PBD and PBA; requirements per user, grouped into types, with
generation and a CSV format (:mod:`.requirements`); the per-user ledger (:mod:`.ledger`).
"""

from .budget_absorption import PersonalizedBudgetAbsorption
from .budget_distribution import PersonalizedBudgetDistribution
from .dissimilarity import DissimilarityCalculation
from .ledger import PersonalizedLedger
from .obs import BudgetSelection, candidate_errors, obs
from .pwsm import PersonalizedMechanism, PersonalizedStepResult
from .requirements import Requirements, RequirementTypes, generate, grouped, two_type, type_histogram
from .sampling import keep_probabilities, sample_counts
from .simulation import PersonalizedRun, simulate_personalized

__all__ = [
    "PersonalizedMechanism",
    "PersonalizedStepResult",
    "PersonalizedBudgetDistribution",
    "PersonalizedBudgetAbsorption",
    "DissimilarityCalculation",
    "PersonalizedLedger",
    "BudgetSelection",
    "candidate_errors",
    "obs",
    "keep_probabilities",
    "sample_counts",
    "Requirements",
    "RequirementTypes",
    "generate",
    "grouped",
    "two_type",
    "type_histogram",
    "PersonalizedRun",
    "simulate_personalized",
]
