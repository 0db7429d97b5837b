"""RTP_DMM (Algorithm 4 of Sun et al. 2019): private decayed range queries over a sliding window.

Each slot's value enters a decayed Fenwick tree (one per block of L slots); the insert releases
one new node with Laplace noise of scale ``σ_k = Δ / (ε λ_k)`` (Algorithm 3, λ from GetLambda,
Algorithm 2) and its noisy prefix. Every range answer is assembled from released prefixes only,
so any number of queries is post-processing.

Options (the defaults are our readings of Algorithms 2-3, each stated below):

* ``lambda_variant``: ``"paper"`` (default, Algorithm 2 as resolved), ``"cai"`` (lower error in
  our error model), ``"none"`` (Algorithm 1).
* ``noise_mode``: ``"exact"`` (default, ``Δ`` computed exactly for the chosen Λ: keeping ``H/ε`` as the
  base scale on the Λ-scaled nodes is private but adds needless noise) or
  ``"paper_literal"`` (``H`` per event as printed; refused when it would not be private, p < 1/H).
* ``privacy_window`` w: 1 is the paper's event-level ε-DP; w > 1 is Mode B (:mod:`wevent.core.decayed`), noise
  calibrated to the w-event sensitivity ``Δ_w`` (``paper_literal``: the crude ``w·m·c·H``).
  ``neighbours`` m = 1 (add/remove one user's per-slot event) or 2 (replacement: two bins
  change); ``contribution_bound`` c: one user changes one slot's value of a bin by at most c
  (clip per-user contributions before counting, else no bound holds).

Spend: ``epsilon`` for w-event neighbours (w = ``privacy_window``; event level when w = 1) over
the whole unbounded stream, stated as :attr:`RTPDMM.window_spend_bound`; queries spend nothing.
Released alongside w-event histograms of budget ε_H, the joint release is ``(ε_H + ε)`` w-event
DP (:func:`host_epsilon` gives the host its share of a total).

Noise: one draw (a d-vector) per insert, derived from ``(stream + "/rtp_dmm", slot,
PUBLICATION)`` so that it can never coincide with a host mechanism's noise on the same stream.

* ``noise="discrete"`` (default): node values are real (decayed sums), so each node is snapped
  to a grid ``g`` (a power of two) before it gets integer noise: ``S̃_k = g (q_k + X_k)`` with
  ``q_k = clamp(rint(T_k / g), ±2^46)``, ``T_k`` the slot's value plus the children's *snapped*
  values, and X_k exact two-sided geometric with ``a_k = exp(-eps_k)``,
  ``eps_k = (1 - 2^-40) eps λ_k g / Δ'``, ``Δ' = Δ + 2 g R``, ``R = window_sensitivity(h, w, m)``
  (:func:`.rounding_weights`). A changed node moves by at most its exact change plus two grid
  units: one for rounding to the grid, one for the float rounding of its sum (at most H
  additions of terms below ``2^46 g``), and both reach its ancestors with weights ``<= 1``; so
  the released nodes are exactly ``epsilon``-DP for the same neighbours (the ``1 - 2^-40``
  absorbs the float rounding of these O(L)-term bounds), with no floating-point artefact: the
  output grid does not depend on the data. ``g`` is the largest power of two with
  ``2 g R <= 2^-12 Δ``, so the noise is at most 2^-12 wider than the Laplace scale ``σ_k``;
  its variance is ``g² 2a_k/(1-a_k)²``. A node beyond ``±2^46 g`` (:attr:`RTPDMM.node_clamp`,
  about ``2^33 Δ/R``) is clamped; the rounding itself is a bias below ``g/2`` per node.
* ``noise="laplace"``: ``S̃_k = S_k + Lap(σ_k)``, the paper's mechanism (floating point).

>>> from wevent.core.randomness import SecretKey
>>> index = RTPDMM(epsilon=1.0, window=8, decay=0.9, randomness=DerivedRandomness(SecretKey.from_seed(1)))
>>> for count in [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]:
...     _ = index.insert(count)
>>> answer, standard_error = index.query(4, 9)          # Σ_{i=4..9} 0.9^(10-i) D_i, noisy
>>> answer.shape, round(float(standard_error[0]), 4)
((1,), 6.9203)
>>> index.query(1, 9)
Traceback (most recent call last):
wevent.core.validation.ParameterError: range 1..9 is outside the window: slots 3..10 can be queried (W = 8)
"""

from __future__ import annotations

import hashlib
from fractions import Fraction
from typing import Any

import numpy as np

from ..exact import round_down
from ..noise import check_noise, discrete_laplace_variance
from ..randomness import DerivedRandomness, Phase, SecretKey
from ..validation import ParameterError, check_epsilon, check_positive, check_positive_int
from ._base import DecayedRangeIndex
from .fenwick import DecayedFenwick
from .lambdas import lambda_table
from .sensitivity import column_norms, rounding_weights, window_sensitivity

__all__ = ["RTPDMM", "NOISE_MODES", "NODE_NOISE_STREAM", "host_epsilon"]

NOISE_MODES = ("exact", "paper_literal")
NODE_NOISE_STREAM = "/rtp_dmm"  # appended to the stream name: node noise has a stream of its own
_GRID_SHARE = 2.0**-12  # discrete noise: the roundings add at most this share of the sensitivity
_FLOAT_MARGIN = 1.0 - 2.0**-40  # covers the float rounding of the O(L)-term sensitivity sums
_NODE_UNITS = 2**46  # |q_k| <= 2^46 grid units: node sums err by under one unit, q_k + X_k stays exact


class RTPDMM(DecayedRangeIndex):
    """Private decayed range queries from one noisy tree node per slot (Algorithms 2-4)."""

    name = "rtp_dmm"
    randomised = True

    def __init__(
        self,
        epsilon: float,
        window: int,
        decay: float,
        *,
        bins: int = 1,
        privacy_window: int = 1,
        neighbours: int = 1,
        contribution_bound: float = 1.0,
        block_size: int | None = None,
        lambda_variant: str = "paper",
        noise_mode: str = "exact",
        noise: str = "discrete",
        randomness: DerivedRandomness | None = None,
        first_slot: int = 1,
    ) -> None:
        super().__init__(window, decay, bins=bins, block_size=block_size, first_slot=first_slot)
        self.epsilon = check_epsilon(epsilon)
        self.privacy_window = check_positive_int(privacy_window, "privacy window w")
        if neighbours not in (1, 2):
            raise ParameterError(f"neighbours must be 1 (add/remove) or 2 (replacement), got {neighbours!r}")
        self.neighbours = int(neighbours)
        self.contribution_bound = check_positive(contribution_bound, "contribution bound")
        if noise_mode not in NOISE_MODES:
            raise ParameterError(f"noise_mode must be one of {', '.join(NOISE_MODES)}, got {noise_mode!r}")
        self.noise_mode = noise_mode
        self.noise = check_noise(noise)
        self.lambda_variant = lambda_variant
        self.lambdas = lambda_table(self.block_size, self.decay, lambda_variant)
        self.sensitivity = self._sensitivity()
        grid, calibrated = 0.0, self.sensitivity  # Δ' of the module docstring (Δ for Laplace)
        if self.noise == "discrete":
            # two grid units per changed node: rounding to the grid, and the float rounding of its sum
            rounding = 2.0 * window_sensitivity(rounding_weights(self.lambdas), self.privacy_window, self.neighbours)
            grid = float(2.0 ** np.floor(np.log2(_GRID_SHARE * self.sensitivity / rounding)))
            calibrated = self.sensitivity + grid * rounding
        self.grid: float | None = grid if self.noise == "discrete" else None  # None: no grid under Laplace noise
        self.node_scales = np.zeros(self.block_size + 1)  # σ_k (the Laplace scale, or g / eps_k); index 0 unused
        self.node_scales[1:] = calibrated / (self.epsilon * self.lambdas[1:])
        if self.noise == "discrete":
            self.node_epsilons = np.zeros(self.block_size + 1)  # eps_k of each node's integer noise
            self.node_epsilons[1:] = _FLOAT_MARGIN * grid / self.node_scales[1:]
            node_variance = grid**2 * np.array([0.0] + [discrete_laplace_variance(e) for e in self.node_epsilons[1:]])
        else:
            node_variance = 2.0 * self.node_scales**2
        if (self.first_slot - 1) % self.block_size:
            # A slot's node and its noise scale follow from its position in a block: blocks must be
            # aligned on absolute slots, or an index rebuilt from a later slot would release a
            # slot's noise draw again at another scale (two such answers give the raw counts).
            raise ParameterError(f"RTP_DMM must start at a block boundary (slot 1 + a multiple of "
                                 f"{self.block_size}), got first slot {self.first_slot}")
        self.randomness = randomness if randomness is not None else DerivedRandomness(SecretKey.generate())
        # The noise stream also names every parameter that sets node scales: an index configured
        # differently never reuses a draw (same parameters, same draws, for identical rebuilds).
        self.node_noise = self.randomness.for_stream(f"{self.randomness.stream}{NODE_NOISE_STREAM}/{self._scales_digest()}")
        self._store = DecayedFenwick(self.decay, self.window, self.block_size, self.bins,
                                     node_variance=node_variance, grid=self.grid, grid_units=_NODE_UNITS)

    def _scales_digest(self) -> str:
        spec = repr((self.block_size, self.decay, self.lambda_variant, self.noise_mode, self.epsilon,
                     self.privacy_window, self.neighbours, self.contribution_bound)
                    + ((self.noise,) if self.noise != "laplace" else ()))  # Laplace keeps its original streams
        return hashlib.blake2b(spec.encode(), digest_size=8).hexdigest()

    def _sensitivity(self) -> float:
        """L1 sensitivity of all released nodes for w-event neighbours (Mode B, :mod:`.sensitivity`)."""
        norms = column_norms(self.lambdas, self.decay)
        scale = self.contribution_bound * self.neighbours
        if self.noise_mode == "exact":
            return window_sensitivity(norms, self.privacy_window, self.neighbours, self.contribution_bound)
        height = self.block_size.bit_length()
        exact = window_sensitivity(norms, 1)
        if exact > height:  # Δ < 1/p for Λ: H covers it whenever p >= 1/H
            raise ParameterError(f"noise_mode 'paper_literal' is not private for decay {self.decay}: the exact "
                                 f"sensitivity {exact:.4g} exceeds H = {height}; use noise_mode 'exact'")
        return scale * self.privacy_window * height

    @property
    def node_clamp(self) -> float | None:
        """Discrete noise: the largest node value kept as is (``2^46 g``); None for Laplace noise."""
        return None if self.grid is None else _NODE_UNITS * self.grid

    @property
    def window_spend_bound(self) -> float:
        """The budget of every window of ``privacy_window`` slots: ``epsilon`` (queries spend nothing)."""
        return self.epsilon

    @property
    def _time(self) -> int:
        return self._store.time

    def insert(self, counts, slot: int | None = None) -> np.ndarray:
        """Ingest the next slot's raw values (``d`` of them) and return the released node ``S̃``."""
        self._check_next(slot)
        values = self._row(counts)
        return self._vector(self._store.insert(values, self._noise(self._store.time + 1)))

    def _noise(self, i: int):
        """The node noise of internal time ``i``: one derived draw, the same on every call."""
        slot = self.first_slot - 1 + i
        k = (i - 1) % self.block_size + 1
        size = None if self.bins == 1 else self.bins  # scalars for d = 1: the stores keep scalar rows
        if self.grid is not None:  # discrete noise, in grid units
            units = self.node_noise.discrete_laplace(slot, Phase.PUBLICATION, float(self.node_epsilons[k]), size)
            return self.grid * (float(units) if size is None else np.asarray(units, dtype=float))
        return self.node_noise.laplace(slot, Phase.PUBLICATION, self.node_scales[k], size)

    def _answer(self, l: int, r: int):
        return self._store.decayed_sum(l, r), self._store.noise_variance(l, r)

    def node(self, slot: int) -> np.ndarray:
        """The released node of ``slot`` while its block is open (S̃ of unreleased nodes is never readable)."""
        return self._vector(self._store.node(slot - self.first_slot + 1))

    # --- state -------------------------------------------------------------------------------
    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "epsilon": self.epsilon, "privacy_window": self.privacy_window,
                "neighbours": self.neighbours, "contribution_bound": self.contribution_bound,
                "lambda_variant": self.lambda_variant, "noise_mode": self.noise_mode, "noise": self.noise}

    def _dynamic(self) -> dict[str, Any]:
        return self._store.state_dict()

    def _load(self, dynamic: dict[str, Any]) -> None:
        self._store.load_state(dynamic, noise_of=self._noise)


def host_epsilon(epsilon_total: float, reserved: "float | RTPDMM") -> float:
    """The host mechanism's budget when RTP_DMM reserves its own out of a w-event total (Mode B).

    By sequential composition the histograms (``ε_H``) and the decayed structure (``ε_D``) are
    jointly ``(ε_H + ε_D)`` w-event DP, so the host gets ``ε_total - ε_D``, rounded down: the
    largest float whose exact sum with ``ε_D`` is at most ``ε_total``. ``reserved`` is ``ε_D`` or
    the RTP_DMM index itself.

    >>> host_epsilon(1.0, 0.25), host_epsilon(1.0, 0.1), 1.0 - 0.1  # 1 - 0.1 rounds up to 0.9
    (0.75, 0.8999999999999999, 0.9)
    """
    total = check_epsilon(epsilon_total, "total epsilon")
    spent = reserved.window_spend_bound if isinstance(reserved, RTPDMM) else check_epsilon(reserved, "RTP_DMM's epsilon")
    if spent >= total:
        raise ParameterError(f"RTP_DMM's epsilon {spent:g} leaves nothing of the total {total:g}")
    return round_down(Fraction(total) - Fraction(spent))
