"""Shared plumbing of the central-model mechanisms (trusted aggregator, Laplace noise)."""

from __future__ import annotations

import itertools
from typing import Any, Callable, Iterable, Protocol

import numpy as np

from ..base import Mechanism, StepResult, Strategy
from ..noise import check_noise
from ..options import Option
from ..randomness import DerivedRandomness, Phase
from ..validation import ParameterError, check_counts, check_domain
from .dissimilarity import Dissimilarity, DissimilarityMeasure, check_whole

__all__ = ["CentralMechanism", "AdaptiveCentralMechanism"]

DecisionOverride = Callable[[int], "bool | None"]

# run() steps a stream in chunks of about this many counts, each chunk's noise drawn ahead in one batch
_CHUNK_VALUES = 1 << 16


class SlotDissimilarity(Protocol):
    """M1 of a central mechanism: a slot's private dissimilarity to the last release (``whole``: both are
    known to be whole numbers, so discrete noise need not check them)."""

    def measure(self, slot: int, counts: np.ndarray, last_release: np.ndarray,
                randomness: DerivedRandomness, *, whole: bool = False) -> Dissimilarity: ...

    def prefetch(self, slots: np.ndarray, randomness: DerivedRandomness) -> None:
        """Draw the noise ``measure`` takes at every one of ``slots`` ahead (in one batch)."""


class CentralMechanism(Mechanism):
    """A central w-event mechanism over count histograms ``c_t`` of ``d`` bins (sensitivity 1).

    A slot runs in two sub-mechanisms so that a pipeline can host them in separate processors:
    :meth:`measure` (M1, the private dissimilarity; None for mechanisms without one) and
    :meth:`publish` (M2, the decision and the release). ``step(c)`` is ``publish(c, measure(c))``.

    ``noise`` is ``"discrete"`` (default): every release and dissimilarity is an integer query
    with exact two-sided geometric noise, ``P(x) ∝ exp(-eps |x|)`` at the slot's budget ``eps``,
    so the budgets recorded are exactly what is spent and no floating-point bit depends on the
    data (counts must then be whole numbers); or ``"laplace"``, the papers' continuous
    ``Lap(1/eps)`` drawn in floating point, for parity with published results.
    ``clamp_round`` post-processes fresh releases to non-negative integers; post-processing
    spends nothing. It is off by default because the papers apply no post-processing.
    ``decision_override(slot) -> bool | None`` is a test hook that replaces the publish rule.
    """

    model = "central"
    dissimilarity_measure: SlotDissimilarity | None = None
    OPTIONS = {
        "clamp_round": Option.boolean("round fresh releases to non-negative integers (post-processing, no budget)"),
        "noise": Option.choice("exact two-sided geometric noise on integer queries, or the paper's Lap(1/eps)",
                               ("discrete", "laplace"), example="laplace"),
    }

    def __init__(
        self,
        epsilon: float,
        window: int,
        domain_size: int,
        *,
        randomness: DerivedRandomness | None = None,
        clamp_round: bool = False,
        noise: str = "discrete",
        decision_override: DecisionOverride | None = None,
    ) -> None:
        super().__init__(epsilon, window, randomness=randomness)
        self.domain_size = check_domain(domain_size)
        self.noise = check_noise(noise)
        self.clamp_round = bool(clamp_round)
        self.decision_override = decision_override
        self.last_release = self._freeze(np.zeros(self.domain_size))  # r_0: the virtual release before slot 1

    # --- one slot ----------------------------------------------------------------------------
    def measure(self, counts) -> Dissimilarity | None:
        """M1 for the next slot: the private dissimilarity to the last release (None if unused)."""
        return self._measure(self._check(counts))

    def publish(self, counts, dissimilarity: Dissimilarity | None) -> StepResult:
        """M2 for the next slot: decide, release, and advance the mechanism by one slot."""
        slot = self.slot + 1
        if self.dissimilarity_measure is not None and dissimilarity is None:
            raise ParameterError(f"{self.name} needs the dissimilarity of slot {slot} (from measure)")
        if dissimilarity is not None and dissimilarity.slot != slot:
            raise ParameterError(f"dissimilarity is for slot {dissimilarity.slot}, the mechanism is at slot {slot}")
        return self._advance(self._check(counts), dissimilarity)

    def step(self, counts) -> StepResult:
        counts = self._check(counts)
        return self._advance(counts, self._measure(counts))

    def run(self, stream: Iterable) -> list[StepResult]:
        """``step`` over every slot of a finite stream, with the same releases, faster: the slots are
        checked a chunk at a time, and the noise the chunk will certainly draw is drawn ahead in one
        batch (:meth:`~wevent.core.randomness.DerivedRandomness.prefetch`, value for value what each
        slot's own draw gives)."""
        results: list[StepResult] = []
        rows = max(1, _CHUNK_VALUES // self.domain_size)
        if isinstance(stream, np.ndarray):
            chunks: Iterable = (stream[i:i + rows] for i in range(0, len(stream), rows))
        else:
            slots = iter(stream)
            chunks = iter(lambda: list(itertools.islice(slots, rows)), [])
        for chunk in chunks:
            counts = self._check_slots(chunk)
            self._draw_ahead(np.arange(self.slot + 1, self.slot + 1 + len(counts)), counts)
            try:
                for row in counts:
                    results.append(self._advance(row, self._measure(row)))
            finally:
                self._forget_ahead()
        return results

    def _check(self, counts) -> np.ndarray:
        """One slot's input, validated (a histogram of ``d`` finite counts here; whole ones for discrete noise)."""
        counts = check_counts(counts, self.domain_size)
        self._check_values(counts)
        return counts

    def _check_slots(self, counts) -> np.ndarray:
        """The inputs of consecutive slots, validated together: :meth:`_check` of each."""
        try:
            array = np.asarray(counts, dtype=float)
        except (TypeError, ValueError):  # rows of different lengths, or not numbers
            array = np.zeros(0)
        if array.ndim != 2 or array.shape[1] != self.domain_size or not np.isfinite(array.sum()):
            return np.stack([self._check(row) for row in counts])  # one at a time: the error names the problem
        self._check_values(array)
        return array

    def _check_values(self, counts: np.ndarray) -> None:
        if self.noise == "discrete":
            check_whole(counts, "counts")
            if counts.size and max(counts.max(), -counts.min()) >= 2.0**62:  # their sum with the noise is int64
                raise ParameterError("noise 'discrete' needs counts below 2^62 in magnitude")

    def _draw_ahead(self, slots: np.ndarray, counts: np.ndarray) -> None:
        """Before :meth:`run` steps the chunk ``counts`` of ``slots``: draw what it will certainly draw
        (:meth:`_prefetch`'s noise, by default)."""
        self._prefetch(slots)

    def _forget_ahead(self) -> None:
        """After :meth:`run` stepped a chunk, or gave up on it: drop what :meth:`_draw_ahead` drew."""
        self.randomness.forget()

    def _prefetch(self, slots: np.ndarray) -> None:
        """Draw ahead the noise that ``slots`` will certainly draw (M1's, by default)."""
        if self.dissimilarity_measure is not None:
            self.dissimilarity_measure.prefetch(slots, self.randomness)

    def _prefetch_noise(self, slots: np.ndarray, phase: Phase, epsilon: float, size: int) -> None:
        """Draw ahead the noise :meth:`_noisy` adds at ``epsilon`` to up to ``size`` values at ``slots``."""
        if self.noise == "discrete":
            self.randomness.prefetch(slots, phase, size, epsilon=epsilon)
        else:
            self.randomness.prefetch(slots, phase, size, scale=1.0 / epsilon)

    def _measure(self, counts: np.ndarray) -> Dissimilarity | None:
        if self.dissimilarity_measure is None:
            return None
        # counts were checked, and the releases are the mechanism's own: whole numbers when the noise is
        return self.dissimilarity_measure.measure(self.slot + 1, counts, self.last_release, self.randomness, whole=True)

    def _advance(self, counts: np.ndarray, dissimilarity: Dissimilarity | None) -> StepResult:
        result = self._publish(self.slot + 1, counts, dissimilarity)
        self.slot += 1
        return result

    def _publish(self, slot: int, counts: np.ndarray, dissimilarity: Dissimilarity | None) -> StepResult:
        raise NotImplementedError

    # --- helpers for subclasses --------------------------------------------------------------
    def _decide(self, slot: int, dissimilarity: Dissimilarity | None, threshold: float) -> bool:
        """The publish rule ``dis > threshold``, unless a test hook decides.

        Strict, as in Algorithms 2-3 of Kellaris et al.: a tie repeats the last release.
        """
        if self.decision_override is not None:
            forced = self.decision_override(slot)
            if forced is not None:
                return bool(forced)
        return dissimilarity is not None and dissimilarity.value > threshold

    def _fresh(self, slot: int, counts: np.ndarray, epsilon: float) -> np.ndarray:
        """``c_t`` plus ``epsilon``-DP noise per bin, released (:meth:`_noisy`, :meth:`_release`)."""
        return self._release(self._noisy(slot, counts, epsilon))

    def _noisy(self, slot: int, values: np.ndarray, epsilon: float, phase: Phase = Phase.PUBLICATION) -> np.ndarray:
        """``values`` plus independent ``epsilon``-DP noise each, drawn at ``(slot, phase)`` in one draw.

        Each value is an integer query of sensitivity 1 (a bin's count under add/remove-one-user,
        or any sum of disjoint bins). Discrete: ``values + X`` with X two-sided geometric, summed
        exactly in integers and rounded once to float (a post-processing). Laplace:
        ``values + Lap(1/epsilon)``. One call per ``(slot, phase)``: a second draw there would
        repeat the first one's noise.
        """
        if self.noise == "discrete":
            noise = self.randomness.discrete_laplace(slot, phase, epsilon, values.size)
            return (values.astype(np.int64) + noise).astype(float)
        return values + self.randomness.laplace(slot, phase, 1.0 / epsilon, values.size)

    def _release(self, values: np.ndarray) -> np.ndarray:
        """Make ``values``, a new float array, the last release, post-processed if asked (``clamp_round``).
        It is frozen as it is, not copied: nothing else may hold it."""
        if self.clamp_round:
            values = np.rint(np.maximum(values, 0.0))
        values.flags.writeable = False  # releases are shared between slots and subscribers
        self.last_release = values
        return values

    def _result(self, slot, strategy, eps2, dissimilarity=None, threshold=None) -> StepResult:
        if dissimilarity is None:
            return StepResult(slot, self.last_release, strategy, 0.0, float(eps2), None, threshold)
        return StepResult(slot, self.last_release, strategy, dissimilarity.epsilon, float(eps2), dissimilarity.value,
                          threshold)

    def _repeat(self, slot, strategy: Strategy, dissimilarity=None, threshold=None) -> StepResult:
        return self._result(slot, strategy, 0.0, dissimilarity, threshold)

    @staticmethod
    def _freeze(vector: np.ndarray) -> np.ndarray:
        # Releases are shared between slots and subscribers: make accidental mutation an error.
        vector = np.array(vector, dtype=float)
        vector.flags.writeable = False
        return vector

    # --- state -------------------------------------------------------------------------------
    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "domain_size": self.domain_size, "clamp_round": self.clamp_round,
                "noise": self.noise}

    def _dynamic(self) -> dict[str, Any]:
        return {"last_release": np.array(self.last_release)}

    def _load(self, dynamic: dict[str, Any]) -> None:
        self.last_release = self._freeze(dynamic["last_release"])
        if self.noise == "discrete" and self.dissimilarity_measure is not None:
            check_whole(self.last_release, "releases")  # M1's distance is then an integer query


class AdaptiveCentralMechanism(CentralMechanism):
    """BD and BA: M1 is the shared dissimilarity measure, M2 decides with it.

    ``budget_shift`` moves budget from M1 to M2 when ``d > 2w`` (:class:`.DissimilarityMeasure`);
    ``force_first_publish`` publishes slot 1 with the budget the rule would give there.
    """

    dissimilarity_measure: DissimilarityMeasure
    OPTIONS = {
        "budget_shift": Option.boolean("give M1 epsilon / d instead of epsilon / (2w) when d > 2w and the rest to "
                                       "the publications"),
        "force_first_publish": Option.boolean("publish slot 1 whatever its dissimilarity"),
    }

    def __init__(
        self,
        epsilon: float,
        window: int,
        domain_size: int,
        *,
        budget_shift: bool = False,
        force_first_publish: bool = False,
        randomness: DerivedRandomness | None = None,
        clamp_round: bool = False,
        noise: str = "discrete",
        decision_override: DecisionOverride | None = None,
    ) -> None:
        super().__init__(epsilon, window, domain_size, randomness=randomness, clamp_round=clamp_round, noise=noise,
                         decision_override=decision_override)
        self.dissimilarity_measure = DissimilarityMeasure(self.epsilon, self.window, self.domain_size,
                                                          budget_shift=budget_shift, noise=self.noise)
        self.force_first_publish = bool(force_first_publish)

    def _params(self) -> dict[str, Any]:
        return {
            **super()._params(),
            "budget_shift": self.dissimilarity_measure.budget_shift,
            "force_first_publish": self.force_first_publish,
        }
