"""The small base every stream mechanism derives from: one online method, ``step``.

A mechanism consumes one slot at a time and returns a :class:`StepResult`: the release ``r_t``
subscribers see, how it was obtained (:class:`Strategy`) and the budget the slot spent. Its state
is public information only (past releases, past budgets, counters), serialises to bytes or JSON,
and restores mid-stream with an identical continuation, because all noise is derived from
(key, stream, slot, phase) rather than drawn from a running generator.
"""

from __future__ import annotations

import abc
import enum
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Iterable

import numpy as np

from . import packing
from .accounting import SlidingLedger
from .ledger import BudgetEntry, WindowLedger
from .options import Option, options_of
from .randomness import DerivedRandomness, SecretKey
from .registry import REGISTRY, register
from .validation import ParameterError, check_epsilon, check_window

if TYPE_CHECKING:
    from .accounting import WindowAccount

__all__ = ["Strategy", "StepResult", "Mechanism", "restore"]


class Strategy(str, enum.Enum):
    """How a slot's release was obtained."""

    PUBLISH = "publish"  # a fresh noisy release
    APPROXIMATE = "approximate"  # the mechanism chose to repeat the last release (BD/BA "skip")
    NULLIFIED = "nullified"  # forced repeat: budget was absorbed by an earlier publication
    NOT_SAMPLED = "not_sampled"  # repeat outside the fixed sampling schedule (Sample, LSP)


@dataclass(frozen=True, eq=False)
class StepResult:
    """One slot's outcome.

    Attributes
    ----------
    slot : 1-based slot index.
    release : ``r_t``, the vector subscribers see (fresh, or the last fresh release).
    strategy : how ``release`` was obtained.
    eps1, eps2 : budget spent on dissimilarity (M1) and publication (M2) in this slot.
    dissimilarity : the private dissimilarity M2 compared, or None where none is computed.
    threshold : what the dissimilarity was compared with (a noise scale or an error estimate).
    """

    slot: int
    release: np.ndarray
    strategy: Strategy
    eps1: float
    eps2: float
    dissimilarity: float | None = None
    threshold: float | None = None

    @property
    def published(self) -> bool:
        return self.strategy is Strategy.PUBLISH

    @property
    def budget(self) -> BudgetEntry:
        return BudgetEntry(self.slot, self.eps1, self.eps2)


class Mechanism(abc.ABC):
    """A w-event private mechanism over an unbounded stream of slots.

    Subclasses set ``name`` (registered in :mod:`.registry`, for :func:`restore` and the stream
    configuration), inherit ``model`` from their model's base class, declare their options in
    ``OPTIONS`` (:mod:`.options`: the stream's schema and the command line are made from them),
    implement :meth:`step`, and
    describe their state with :meth:`_params` (constructor arguments) and
    :meth:`_dynamic`/:meth:`_load` (what changes slot by slot). ``window_spend_bound`` states
    what the mechanism spends: the largest total budget any window of ``w`` slots can receive,
    always ``<= epsilon``.
    """

    name: ClassVar[str]
    # Who is trusted and who is charged: "central" (a trusted aggregator, one budget per window),
    # "personalized" (central, with every user's own window and budget) or "local" (devices
    # perturb their own values; each user's ledger is charged per report).
    model: ClassVar[str]
    # The options this class adds to its bases' (wevent.core.options.options_of collects them all).
    OPTIONS: ClassVar[dict[str, Option]] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            options_of(cls)  # a declared option its constructor does not take fails here, when the class is made
            register(cls)

    def __init__(self, epsilon: float, window: int, *, randomness: DerivedRandomness | None = None) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.window = check_window(window)
        self.randomness = randomness if randomness is not None else DerivedRandomness(SecretKey.generate())
        self.slot = 0  # index of the last processed slot

    @abc.abstractmethod
    def step(self, data) -> StepResult:
        """Consume slot ``self.slot + 1`` and return its release."""

    @property
    @abc.abstractmethod
    def window_spend_bound(self) -> float:
        """The most any window of ``w`` consecutive slots can spend (<= epsilon)."""

    def new_ledger(self) -> "WindowAccount":
        """An empty ledger for this mechanism's step results, bounded by its budget: every user pays
        every slot's ``eps1 + eps2`` (a mechanism whose users pay differently makes its own)."""
        return WindowLedger(self.window, self.epsilon)

    def sliding_ledger(self, state: np.ndarray | None = None) -> SlidingLedger:
        """The same account as :meth:`new_ledger`, keeping only what the next window needs: what a
        live service stores between slots (:meth:`SlidingLedger.state`), continued from ``state``."""
        return SlidingLedger([self.window], [self.epsilon], state)

    def run(self, stream: Iterable) -> list[StepResult]:
        """``step`` over every slot of a finite stream (rows of a matrix, or any iterable)."""
        return [self.step(row) for row in stream]

    # --- state -------------------------------------------------------------------------------
    def params(self) -> dict[str, Any]:
        """The constructor arguments that fix the mechanism (what a stream may never change)."""
        return self._params()

    def _params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "window": self.window}

    @abc.abstractmethod
    def _dynamic(self) -> dict[str, Any]:
        """Everything that changes from slot to slot (public information only)."""

    @abc.abstractmethod
    def _load(self, dynamic: dict[str, Any]) -> None:
        """Inverse of :meth:`_dynamic`."""

    def state_dict(self) -> dict[str, Any]:
        return {"mechanism": self.name, "params": self._params(), "slot": self.slot, "dynamic": self._dynamic()}

    @classmethod
    def from_state(cls, state: dict[str, Any], randomness: DerivedRandomness, **hooks) -> "Mechanism":
        mechanism_cls = REGISTRY.get(str(state.get("mechanism")))
        if mechanism_cls is None or not issubclass(mechanism_cls, cls):
            raise ParameterError(f"state is for mechanism {state.get('mechanism')!r}, not {cls.__name__}")
        params = state["params"]
        unknown = sorted(set(params) - set(inspect.signature(mechanism_cls).parameters))
        if unknown:
            raise ParameterError(f"state of {mechanism_cls.name} has unknown parameter(s) {', '.join(unknown)}")
        mechanism = mechanism_cls(**params, randomness=randomness, **hooks)
        missing = sorted(set(mechanism._params()) - set(params))  # a parameter defaulted now may differ from then
        if missing:
            raise packing.LayoutError(f"a {mechanism_cls.name} state", missing)
        mechanism.slot = int(state["slot"])
        mechanism._load(state["dynamic"])
        return mechanism

    def to_bytes(self) -> bytes:
        return packing.pack(self.state_dict())

    def to_parts(self) -> tuple[bytes, dict[str, bytes]]:
        """:meth:`to_bytes` as a small head plus its large values by key (:func:`~.packing.pack_split`)."""
        return packing.pack_split(self.state_dict())

    def to_json(self) -> str:
        return packing.to_json(self.state_dict())

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({params}) at slot {self.slot}"


def restore(data: bytes | str, randomness: DerivedRandomness, *, parts=None, **hooks) -> Mechanism:
    """Rebuild any registered mechanism from :meth:`Mechanism.to_bytes` or ``to_json`` output, or
    from the head of :meth:`Mechanism.to_parts` with a mapping holding its ``parts``."""
    if parts is not None:
        if isinstance(data, str):
            raise ParameterError("a state split in parts has a bytes head (Mechanism.to_parts), not JSON")
        state = packing.unpack_split(data, parts)
    else:
        state = packing.from_json(data) if isinstance(data, str) else packing.unpack(data)
    return Mechanism.from_state(state, randomness, **hooks)
