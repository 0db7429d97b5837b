"""The dissimilarity sub-mechanism M_{i,1} shared by BD and BA (Kellaris et al. 2014, Alg. 2-3 line 1-3).

``dis = (1/d) * sum_j |r_l[j] - c_i[j]|`` is the mean absolute distance between the slot's counts
and the last release. Adding or removing one user changes one bin by one, so ``dis`` has
sensitivity ``1/d`` and ``dis + Lap(lambda_1)`` with ``lambda_1 = (1/d) / eps_1`` is ``eps_1``-DP.
It is charged at every slot, nullified ones included, as Algorithm 3 computes it before it
checks for nullification: every window spends ``w * eps_1`` on it.

Spend: ``eps_1 = epsilon / (2w)`` per slot; with ``budget_shift`` (the optimisation of Section
4.5), ``eps_1 = epsilon / d`` and the publication pool grows to ``epsilon - w * eps_1``. The
shift applies only when ``d > 2w``: otherwise it would leave the publications less than half.
Both quotients are rounded down onto epsilon's grid (:func:`~wevent.core.exact.divide`), so the
pool, and every budget a publication takes of it, is exact.

Noise. With ``noise="discrete"`` the counts and the last release are whole numbers (releases
carry integer noise), so the L1 distance ``S = d * dis`` is an integer query of sensitivity 1:
``dis~ = (min(S, 2^52) + X) / d`` with X exact two-sided geometric at ``eps_1``, exactly
``eps_1``-DP (the cap is 1-Lipschitz and keeps every float sum exact; the division is
post-processing). Its noise has the same scale in ``dis`` units as ``Lap(lambda_1)`` and variance
``2a/(1-a)^2 / d^2``, ``a = exp(-eps_1)``. With ``noise="laplace"`` it is ``dis + Lap(lambda_1)``.

>>> from wevent.core.randomness import ZeroNoise, SecretKey
>>> m = DissimilarityMeasure(epsilon=1.0, window=2, domain_size=4)
>>> m.eps1, m.publication_pool
(0.25, 0.5)
>>> d = m.measure(1, np.array([4.0, 0, 0, 0]), np.zeros(4), ZeroNoise(SecretKey.from_seed(0)))
>>> d.value, d.epsilon
(1.0, 0.25)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import compiled
from ..exact import divide
from ..noise import check_noise
from ..randomness import DerivedRandomness, Phase
from ..validation import ParameterError, check_domain, check_epsilon, check_window

__all__ = ["Dissimilarity", "DissimilarityMeasure", "check_whole", "private_mean_distance"]

# Every L1 distance below this is an exact float sum of whole numbers; larger ones are capped here.
_EXACT_DISTANCE = 2.0**52


def check_whole(values: np.ndarray, what: str) -> None:
    """Discrete noise perturbs integer queries only: ``values`` must be whole numbers.

    (Magnitudes need no check: every double of magnitude 2^52 or more is whole, and distances
    that large are capped; counts are summed with their noise in int64.)
    """
    if values.dtype.kind in "iu":
        return
    if not (values == np.rint(values)).all():
        raise ParameterError(f"noise 'discrete' needs whole-number {what} (use noise 'laplace' for real-valued input)")


def private_mean_distance(counts: np.ndarray, last_release: np.ndarray, epsilon: float, noise: str,
                          randomness: DerivedRandomness, slot: int, whole: bool = False) -> float:
    """``(1/d) sum_j |r[j] - c[j]|`` plus ``epsilon``-DP noise for sensitivity ``1/d`` (module docstring);
    ``whole``: the caller knows counts and releases to be whole numbers (discrete noise checks them otherwise)."""
    domain_size = counts.size
    if noise == "discrete" and not whole:
        check_whole(last_release - counts, "counts and releases")
    kernel = compiled.whole_distance() if noise == "discrete" else None  # whole numbers: the same sum in one loop
    if kernel is not None:
        distance = kernel(last_release, counts)
    else:
        difference = last_release - counts
        distance = float(np.add.reduce(np.abs(difference, out=difference)))  # ndarray.sum's own reduction
    if noise == "discrete":
        noise_value = randomness.discrete_laplace(slot, Phase.DISSIMILARITY, epsilon)
        return (int(min(distance, _EXACT_DISTANCE)) + noise_value) / domain_size
    scale = (1.0 / domain_size) / epsilon
    return distance / domain_size + float(randomness.laplace(slot, Phase.DISSIMILARITY, scale))


@dataclass(frozen=True)
class Dissimilarity:
    """M1's output for one slot: the noisy dissimilarity, its budget and its Laplace scale."""

    slot: int
    value: float
    epsilon: float
    scale: float


class DissimilarityMeasure:
    """M_{i,1}: the private mean absolute distance of a slot's counts to the last release."""

    def __init__(self, epsilon: float, window: int, domain_size: int, *, budget_shift: bool = False,
                 noise: str = "discrete") -> None:
        self.epsilon = check_epsilon(epsilon)
        self.noise = check_noise(noise)
        self.window = check_window(window)
        self.domain_size = check_domain(domain_size)
        self.budget_shift = bool(budget_shift)
        share = divide(self.epsilon, 2 * self.window)
        # Shifting only ever lowers eps1, so the pool for publications only grows.
        self.eps1 = min(divide(self.epsilon, self.domain_size), share) if self.budget_shift else share
        # Half of epsilon (w eps1 is at most the other half), or what the shifted eps1 leaves
        self._pool = divide(self.epsilon, 2) if self.eps1 == share else self.epsilon - self.window * self.eps1
        self.scale = (1.0 / self.domain_size) / self.eps1

    @property
    def publication_pool(self) -> float:
        """What every window leaves for publications: ``epsilon / 2``, or with a shifted ``eps_1``
        ``epsilon - w * eps_1`` (exact: both are multiples of epsilon's grid)."""
        return self._pool

    def distance(self, counts: np.ndarray, last_release: np.ndarray) -> float:
        """The exact (non-private) dissimilarity; the divisor is d even where bins are zero."""
        return float(np.abs(last_release - counts).sum()) / self.domain_size

    def measure(self, slot: int, counts: np.ndarray, last_release: np.ndarray, randomness: DerivedRandomness, *,
                whole: bool = False) -> Dissimilarity:
        value = private_mean_distance(counts, last_release, self.eps1, self.noise, randomness, slot, whole)
        return Dissimilarity(slot, value, self.eps1, self.scale)

    def prefetch(self, slots: np.ndarray, randomness: DerivedRandomness) -> None:
        """Draw the noise of :meth:`measure` at every one of ``slots`` ahead, in one batch."""
        if self.noise == "discrete":
            randomness.prefetch(slots, Phase.DISSIMILARITY, epsilon=self.eps1)
        else:
            randomness.prefetch(slots, Phase.DISSIMILARITY, scale=self.scale)
