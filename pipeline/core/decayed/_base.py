"""The small base of every decayed range index: ingest one slot, answer range queries.

An index holds one stream's ``d`` bins. ``insert`` ingests the next slot (the subclass says what
a slot is: raw counts for RTP_DMM, a release for the release index). ``query(from_slot, to_slot,
decay)`` returns ``(answer, standard_error)``, two arrays of ``d`` values:
``answer[c] = Σ_{i=from..to} p^(t-i) · value_i[c]`` at the latest slot ``t`` and the standard
deviation of its noise. Queries read released values only: they spend no budget and draw no
randomness, however many are asked.

The decay ``p`` is fixed when the index is built (its trees store p-decayed sums; another decay
cannot be derived from them). ``query`` accepts ``decay`` only to check it: omitted or equal to
``p`` (to 1e-12 relative) is answered, anything else in (0, 1] is refused with the reason.
Serve several decays with one index per decay.
"""

from __future__ import annotations

import abc
import math
import numbers
from typing import Any, ClassVar

import numpy as np

from .. import packing
from ..randomness import DerivedRandomness
from ..validation import ParameterError, check_counts, check_domain, check_positive_int
from .tree import check_block_size, default_block_size

__all__ = ["DecayedRangeIndex", "INDEXES", "restore_index", "check_decay"]

INDEXES: dict[str, type["DecayedRangeIndex"]] = {}


def check_decay(decay, name: str = "decay") -> float:
    if isinstance(decay, bool) or not isinstance(decay, numbers.Real) or not 0.0 < float(decay) <= 1.0:
        raise ParameterError(f"{name} must be a number in (0, 1], got {decay!r}")
    return float(decay)


def _check_slot(value, name: str) -> int:
    if type(value) is int:  # the common case, without the abstract-class checks below
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not float(value).is_integer():
        raise ParameterError(f"{name} must be an integer slot, got {value!r}")
    return int(float(value))


class DecayedRangeIndex(abc.ABC):
    """Decayed sliding-window range sums over one stream of ``d``-bin slots.

    Parameters
    ----------
    window : W, the query window: ranges must lie in ``[t-W+1, t]``.
    decay : p in (0, 1]; a slot of age x weighs ``p^x``.
    bins : d, values per slot (a histogram release has d bins; a scalar stream has 1).
    block_size : L, a power of two; default the largest power of two ``<= W`` (the paper says only
        that H is set from W; its example, W = 5 with H = 3, gives L = 4).
    first_slot : the slot number of the first insert (1 for a stream read from its start).
    """

    name: ClassVar[str]
    model: ClassVar[str] = "decayed"  # an index over a stream's slots, not a stream mechanism
    randomised: ClassVar[bool] = False  # True when restoring needs the stream's DerivedRandomness

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            INDEXES[cls.name] = cls

    def __init__(self, window: int, decay: float, *, bins: int = 1, block_size: int | None = None,
                 first_slot: int = 1) -> None:
        self.window = check_positive_int(window, "window W")
        self.decay = check_decay(decay)
        self.bins = check_domain(bins)
        self.block_size = default_block_size(self.window) if block_size is None else check_block_size(block_size)
        self.first_slot = check_positive_int(first_slot, "first slot")

    # --- time --------------------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def _time(self) -> int:
        """Number of slots ingested (internal times run 1.._time)."""

    @property
    def slot(self) -> int:
        """The latest ingested slot (``first_slot - 1`` before the first insert)."""
        return self.first_slot - 1 + self._time

    @property
    def oldest_slot(self) -> int:
        """The oldest slot a query may start at: ``max(first_slot, t - W + 1)``."""
        return max(self.first_slot, self.slot - self.window + 1)

    def _check_next(self, slot) -> None:
        if slot is not None and _check_slot(slot, "slot") != self.slot + 1:
            raise ParameterError(f"slot {slot} is not the next slot: the index expects slot {self.slot + 1}")

    def _row(self, values) -> np.ndarray | float:
        """One slot's ``d`` values; a float when d = 1 (the stores keep scalar rows then)."""
        if self.bins > 1:
            return check_counts(values, self.bins)
        value = float(values) if isinstance(values, numbers.Real) else float(check_counts(values, 1)[0])
        if not math.isfinite(value):
            raise ParameterError(f"a slot value must be finite, got {values!r}")
        return value

    # --- queries -----------------------------------------------------------------------------
    def query(self, from_slot, to_slot, decay=None) -> tuple[np.ndarray, np.ndarray]:
        """``(answer, standard_error)`` of ``Σ_{i=from..to} p^(t-i) · value_i`` at the latest slot t.

        Raises :class:`ParameterError` (one line, the reason) for a range outside the window
        ``[oldest_slot, slot]``, ``from > to``, or a decay outside (0, 1] or other than the index's.
        """
        l, r = _check_slot(from_slot, "from"), _check_slot(to_slot, "to")
        if decay is not None and not math.isclose(check_decay(decay), self.decay, rel_tol=1e-12, abs_tol=0.0):
            raise ParameterError(f"decay {decay!r} is not served: this index was built for decay {self.decay!r}")
        if self._time == 0:
            raise ParameterError(f"no slot ingested yet (the index starts at slot {self.first_slot})")
        if l > r:
            raise ParameterError(f"from slot {l} is after to slot {r}")
        if r > self.slot or l < self.oldest_slot:
            raise ParameterError(f"range {l}..{r} is outside the window: slots {self.oldest_slot}..{self.slot} "
                                 f"can be queried (W = {self.window})")
        offset = self.first_slot - 1
        answer, variance = self._answer(l - offset, r - offset)
        if isinstance(variance, float):  # one variance for every bin
            return self._vector(answer), np.full(self.bins, math.sqrt(variance))
        return self._vector(answer), np.sqrt(variance)

    def _vector(self, row) -> np.ndarray:
        """A ``(d,)`` array from a store row (stores keep a scalar when d = 1)."""
        return np.array([row]) if self.bins == 1 else row

    @abc.abstractmethod
    def _answer(self, l: int, r: int) -> tuple[np.ndarray, np.ndarray | float]:
        """Answer and noise variance of a validated range, in internal times."""

    # --- state -------------------------------------------------------------------------------
    def _params(self) -> dict[str, Any]:
        return {"window": self.window, "decay": self.decay, "bins": self.bins, "block_size": self.block_size,
                "first_slot": self.first_slot}

    @abc.abstractmethod
    def _dynamic(self) -> dict[str, Any]:
        """Everything that changes from slot to slot (released values only)."""

    @abc.abstractmethod
    def _load(self, dynamic: dict[str, Any]) -> None:
        """Inverse of :meth:`_dynamic`."""

    def state_dict(self) -> dict[str, Any]:
        return {"index": self.name, "params": self._params(), "dynamic": self._dynamic()}

    def to_bytes(self) -> bytes:
        return packing.pack(self.state_dict())

    def to_json(self) -> str:
        return packing.to_json(self.state_dict())


def restore_index(data: bytes | str, randomness: DerivedRandomness | None = None) -> DecayedRangeIndex:
    """Rebuild an index from ``to_bytes``/``to_json`` output; a private index needs its stream's randomness."""
    state = packing.from_json(data) if isinstance(data, str) else packing.unpack(data)
    cls = INDEXES.get(str(state.get("index")))
    if cls is None:
        raise ParameterError(f"state is for unknown index {state.get('index')!r}")
    if cls.randomised and randomness is None:
        raise ParameterError(f"restoring {cls.name} needs the stream's randomness (its key re-derives the noise)")
    hooks: dict[str, Any] = {"randomness": randomness} if cls.randomised else {}
    index = cls(**state["params"], **hooks)
    missing = sorted(set(index._params()) - set(state["params"]))  # a parameter defaulted now may differ from then
    if missing:
        raise packing.LayoutError(f"a {cls.name} index state", missing)
    index._load(state["dynamic"])
    return index
