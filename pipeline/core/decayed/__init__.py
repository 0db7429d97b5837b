"""Private decayed sliding-window range queries (Sun et al. 2019).

An index per stream ingests one slot at a time (``insert``) and answers any number of
``query(from_slot, to_slot, decay) -> (answer, standard_error)`` over the last W slots, each
slot weighted ``p^(t - i)``, in O(1) per insert and per query (two or three prefix reads).

* :class:`ReleaseIndex` (Mode A, default): over released w-event histograms; no extra budget.
* :class:`RTPDMM` (Mode B, and the paper's event-level algorithm): over raw counts, with its own
  budget; ``privacy_window=w`` calibrates its noise to w-event neighbours.
* :class:`CombinedIndex` (Mode C): inverse-variance combination of the two.

Building blocks: :class:`DecayedFenwick` (the block store), :func:`lambda_table` and
:func:`get_lambda` (Algorithm 2), :func:`column_norms` and :func:`window_sensitivity`.
State: ``to_bytes()``/``to_json()`` and :func:`restore_index`.

Measured error
--------------

Exact MSE of decayed range queries (epsilon = 1, event level, W = 65,536, p = 0.9995, l uniform
in the window and r uniform in [l, t]), from `wevent bench decayed --accuracy`:

| configuration | L | MSE |
|---|---:|---:|
| Algorithm 1 (no Λ), exact Δ | 65,536 | 103 |
| Algorithm 1, H/ε as printed | 65,536 | 234 |
| paper Λ, exact Δ | 65,536 | 78 |
| cai Λ, exact Δ | 65,536 | 51 |
| LP-item (every slot with Lap(1/ε)) | - | 114 |

These variances were checked against explicit node sets and 10^5-sample empirical variances
(`tests/core/decayed`).
"""

from ._base import INDEXES, DecayedRangeIndex, check_decay, restore_index
from .combined import CombinedIndex, inverse_variance
from .fenwick import DecayedFenwick
from .lambdas import LAMBDA_VARIANTS, get_lambda, lambda_table
from .release_index import ReleaseIndex, laplace_release_variance
from .rtp_dmm import NOISE_MODES, RTPDMM, host_epsilon
from .sensitivity import column_norms, window_sensitivity

__all__ = [
    "DecayedRangeIndex",
    "ReleaseIndex",
    "RTPDMM",
    "CombinedIndex",
    "DecayedFenwick",
    "INDEXES",
    "restore_index",
    "check_decay",
    "inverse_variance",
    "laplace_release_variance",
    "host_epsilon",
    "get_lambda",
    "lambda_table",
    "LAMBDA_VARIANTS",
    "NOISE_MODES",
    "column_norms",
    "window_sensitivity",
]
