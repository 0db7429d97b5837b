"""Dissimilarity Calculation (DC): Du et al., PVLDB 18(6) 2025, Algorithm 3 (M1 of PBD and PBA).

Every user of type k holds the dissimilarity budget ``e1_k = eps_k / (2 w_k)`` at every slot.
OBS picks the SM threshold ``theta_1`` among them (with sensitivity 1 by default, as Algorithm 3
does, though the proof of Theorem 4.2 uses 1/d;
``obs_sensitivity`` changes only that error model, not the noise), SM_s draws a fresh sample,
and the private dissimilarity is the mean absolute distance of the sampled histogram to the last
release plus ``Lap((1/d) / theta_1)``: adding or removing one sampled user moves the mean by 1/d.
The budgets never change, so ``theta_1`` and the keep probabilities are computed once.

Randomness: the sample's coins at ``(slot, SAMPLE_DISSIMILARITY)`` (only if some ``p < 1``), the
noise at ``(slot, DISSIMILARITY)``: with identical users this is exactly BD/BA's M1, discrete
(exact two-sided geometric on the integer L1 distance, the default) or continuous Laplace.

A slot's sample depends on the key, the slot, the counts and the budgets only, never on what
earlier slots decided, so a run draws a chunk's samples ahead (:meth:`~DissimilarityCalculation.sample_ahead`),
and PBD and PBA of one key, stream and requirements share them: the last chunks drawn are kept
in the process (``wevent reproduce`` runs both on the same counts in a row).

Spend: ``e1_k = eps_k / (2 w_k)`` for every user of type k, at every slot (null slots included),
so ``w_k e1_k = eps_k / 2`` per window of that user's own ``w_k``.

>>> from wevent.core.randomness import SecretKey, ZeroNoise
>>> from wevent.core.personalized.requirements import RequirementTypes
>>> types = RequirementTypes([4, 2], [1.0, 1.0], [3, 1])
>>> dc = DissimilarityCalculation(types, domain_size=2)
>>> dc.budgets.tolist(), dc.theta, dc.probabilities.round(4).tolist()  # OBS prefers sampling 3 users
([0.125, 0.25], 0.25, [0.4688, 1.0])
>>> dc.measure(1, np.array([[0, 0], [0, 1]]), np.zeros(2), ZeroNoise(SecretKey.from_seed(0))).value
0.5
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Callable

import numpy as np

from ..central.dissimilarity import Dissimilarity, private_mean_distance
from ..noise import check_noise
from ..randomness import DerivedRandomness, Phase
from ..validation import ParameterError, check_domain, check_positive
from .obs import obs
from .requirements import RequirementTypes
from .sampling import keep_probabilities, sample_counts

__all__ = ["DissimilarityCalculation"]

Sampler = Callable[[np.ndarray, np.ndarray, DerivedRandomness, int, int], np.ndarray]

_CHUNKS_KEPT = 64  # chunks of samples kept per process: a run's, at up to 64 chunks
_samples_drawn: OrderedDict[bytes, np.ndarray] = OrderedDict()  # digest of what a chunk's samples depend on -> them


class DissimilarityCalculation:
    """M1 of the personalized mechanisms: the private, sampled dissimilarity to the last release.

    ``measure`` returns the central model's :class:`Dissimilarity`; its ``epsilon`` is the SM
    threshold ``theta_1`` (what the comparison's noise is calibrated to), while each type is
    charged its own ``budgets[k]``.
    """

    def __init__(self, types: RequirementTypes, domain_size: int, *, obs_sensitivity: float = 1.0,
                 sampler: Sampler = sample_counts, noise: str = "discrete") -> None:
        self.domain_size = check_domain(domain_size)
        self.noise = check_noise(noise)
        self.obs_sensitivity = check_positive(obs_sensitivity, "DC's OBS sensitivity")
        self.budgets = types.dissimilarity_budgets
        self.budgets.flags.writeable = False  # shared by every slot's result
        selection = obs(self.budgets, types.sizes, self.obs_sensitivity)
        if selection is None:  # budgets are eps/(2w) > 0, so only an underflow gets here
            raise ParameterError("every dissimilarity budget eps_i/(2 w_i) underflows to 0")
        self.theta = selection.theta
        self.probabilities = keep_probabilities(self.budgets, self.theta)
        self.scale = (1.0 / self.domain_size) / self.theta
        self.sampler = sampler
        self._ahead: dict[int, np.ndarray] = {}  # slot -> the histogram of its sample, drawn ahead

    def distance(self, kept: np.ndarray, last_release: np.ndarray) -> float:
        """The mean absolute distance of the kept users' histogram to the last release (over all d bins)."""
        return float(np.abs(last_release - kept.sum(axis=0)).sum()) / self.domain_size

    def measure(self, slot: int, counts: np.ndarray, last_release: np.ndarray, randomness: DerivedRandomness, *,
                whole: bool = False) -> Dissimilarity:
        kept = self._ahead.pop(slot, None)
        if kept is None:
            kept = self.sampler(counts, self.probabilities, randomness, slot, Phase.SAMPLE_DISSIMILARITY).sum(axis=0)
        value = private_mean_distance(kept, last_release, self.theta, self.noise, randomness, slot, whole)
        return Dissimilarity(slot, value, self.theta, self.scale)

    def sample_ahead(self, slots: np.ndarray, counts: np.ndarray, randomness: DerivedRandomness) -> None:
        """Draw the samples :meth:`measure` takes with :func:`sample_counts` at ``slots`` of the ``(slots,
        types, d)`` integer ``counts``, each from its own slot's generator as :meth:`measure` would: the
        same coins. Kept until :meth:`forget` or measured."""
        parts = [type(randomness).__qualname__.encode(), bytes(randomness.key), randomness.stream.encode(), slots.tobytes(),
                 self.probabilities.tobytes(), str(counts.shape).encode(), counts.tobytes()]
        key = hashlib.blake2b(b"\0".join(parts), digest_size=32).digest()  # the samples are a function of these
        kept = _samples_drawn.get(key)
        if kept is None:
            kept = np.stack([sample_counts(row, self.probabilities, randomness, slot, Phase.SAMPLE_DISSIMILARITY).sum(axis=0)
                             for row, slot in zip(counts, slots.tolist())])
            kept.flags.writeable = False
            _samples_drawn[key] = kept
            if len(_samples_drawn) > _CHUNKS_KEPT:
                _samples_drawn.popitem(last=False)
        self._ahead = dict(zip(slots.tolist(), kept))

    def forget(self) -> None:
        """Drop the samples :meth:`sample_ahead` drew."""
        self._ahead = {}

    def prefetch(self, slots: np.ndarray, randomness: DerivedRandomness) -> None:
        """Draw the noise of :meth:`measure` at every one of ``slots`` ahead, in one batch."""
        if self.noise == "discrete":
            randomness.prefetch(slots, Phase.DISSIMILARITY, epsilon=self.theta)
        else:
            randomness.prefetch(slots, Phase.DISSIMILARITY, scale=self.scale)
