"""Local-model (LDP) w-event mechanisms: LDP-IDS (Ren et al., SIGMOD 2022; arXiv long version).

The server is untrusted: each device perturbs its own value with a frequency oracle (GRR, OUE,
Ada) or the Hybrid Mechanism for means, and the server only sees the reports of the users it
asked. Budget division (LBU, LSP, LBD, LBA) splits each user's window budget over slots;
population division (LPU, LPD, LPA and the LP-DSAT_w and LP-RescueDP extensions) gives every report the whole
budget and splits the users. LB-DSAT_w and LB-RescueDP are the extensions' budget-division variants.
"""

from ._base import AdaptiveMechanism, BudgetDivision, LocalMechanism, PopulationDivision
from .adaptive import choose
from .clipping import ClippingThreshold
from .device_reports import DEFAULT_BLOCK_SIZE, MODES, Devices, block_reports
from .grr import GRR
from .hybrid import HybridMechanism
from .lb_dsat import LBDSAT
from .lb_rescue import LBRescueDP
from .lba import LBA
from .lbd import LBD
from .lbu import LBU
from .lp_dsat import LPDSAT
from .lp_rescue import LPRescueDP
from .lpa import LPA
from .lpd import LPD
from .lpu import LPU
from .lsp import LSP
from .oracle import VAR_MODES, LocalOracle
from .oracles import ORACLE_NAMES, make_oracle
from .oue import OUE
from .population import PopulationLedger
from .protocol import LocalDissimilarity, LocalStepResult, Request
from .user_ledger import UserLedger

MECHANISMS = {cls.name: cls for cls in (LBU, LSP, LBD, LBA, LPU, LPD, LPA, LBDSAT, LBRescueDP, LPDSAT, LPRescueDP)}

__all__ = [
    "LocalMechanism", "AdaptiveMechanism", "BudgetDivision", "PopulationDivision",
    "LBU", "LSP", "LBD", "LBA", "LPU", "LPD", "LPA", "LBDSAT", "LBRescueDP", "LPDSAT", "LPRescueDP",
    "MECHANISMS",
    "LocalOracle", "GRR", "OUE", "HybridMechanism", "ClippingThreshold", "choose", "make_oracle", "ORACLE_NAMES", "VAR_MODES",
    "Devices", "block_reports", "MODES", "DEFAULT_BLOCK_SIZE",
    "Request", "LocalDissimilarity", "LocalStepResult", "PopulationLedger", "UserLedger",
]
