"""Mode A (:mod:`wevent.core.decayed`): a decayed index over already released histograms.

Each slot's release ``ĥ_t`` (d bins) enters a noise-free decayed Fenwick store (Algorithm 1 with
noise off; Λ has no role), so any in-window range answer costs O(1) and no budget.

Standard error. A fresh release carries its own noise (variance ``v`` per bin, e.g. ``2/ε_t²``
for the central Laplace mechanisms at sensitivity 1, :func:`laplace_release_variance`); a
repeated release (approximate, nullified, not sampled) carries the very same noise as the fresh
release it repeats. A fresh release and its repeats form a *group*; the noise of an answer is
``Σ_g η_g · c_g`` with ``c_g = Σ_{i ∈ g ∩ [l, r]} p^(t-i)``, so its variance is
``Σ_g v_g · c_g²``. The groups cut by the range's ends are computed directly; the groups strictly
inside contribute ``v_g · u_g² · p^(2(t - end_g))`` with ``u_g = Σ_{i ∈ g} p^(end_g - i)``, which a
second noise-free store with decay ``p²`` sums in O(1) (it runs one slot behind: a group's end is
known when the next fresh release arrives). The standard error is the noise's; the bias of
repeating a stale release is not in it (it depends on the unknown true counts).

Spend: nothing. It only post-processes releases.

>>> index = ReleaseIndex(window=4, decay=0.5, bins=2)
>>> index.insert([10.0, 20.0], variance=2.0)                # fresh, noise variance 2 per bin
>>> index.insert([10.0, 20.0], repeated=True)               # a repeat: the same noise as slot 1
>>> index.insert([12.0, 18.0], variance=8.0)
>>> answer, standard_error = index.query(1, 3)
>>> answer.tolist()                                          # 0.25·10 + 0.5·10 + 12, ...
[19.5, 33.0]
>>> round(float(standard_error[0]) ** 2, 6)                  # 2·(0.25 + 0.5)² + 8·1²
9.125
"""

from __future__ import annotations

import bisect
import math
import numbers
from typing import Any

import numpy as np

from ..validation import ParameterError
from ._base import DecayedRangeIndex
from .fenwick import DecayedFenwick

__all__ = ["ReleaseIndex", "laplace_release_variance"]


def laplace_release_variance(eps2: float, sensitivity: float = 1.0) -> float:
    """Noise variance per bin of ``c + Lap(sensitivity/eps2)``: ``2 (sensitivity/eps2)²``.

    >>> laplace_release_variance(0.5)
    8.0
    """
    return 2.0 * (sensitivity / eps2) ** 2


class ReleaseIndex(DecayedRangeIndex):
    """Mode A: O(1) decayed range sums over released d-bin histograms, with their standard error.

    ``per_bin_variance``: False (default) when every bin of a release has the same noise variance
    (all central Laplace mechanisms), True to pass one variance per bin (e.g. LDP estimates).
    """

    name = "release_index"

    def __init__(self, window: int, decay: float, *, bins: int = 1, per_bin_variance: bool = False,
                 block_size: int | None = None, first_slot: int = 1) -> None:
        super().__init__(window, decay, bins=bins, block_size=block_size, first_slot=first_slot)
        self.per_bin_variance = bool(per_bin_variance)
        self._variance_bins = self.bins if self.per_bin_variance else 1
        self._no_variance = np.zeros(self.bins) if self._variance_bins > 1 else 0.0  # rows are scalars when 1 wide
        self._values = DecayedFenwick(self.decay, self.window, self.block_size, self.bins)
        # noise variance of each closed group, placed at its last slot, decayed by p²
        self._inner = DecayedFenwick(self.decay**2, self.window, self.block_size, self._variance_bins)
        self._starts: list[int] = []  # internal time at which each live group starts
        self._variances: list[np.ndarray | float] = []  # its noise variance (per bin, or one for all bins)
        self._last_fresh = 0.0 if self.bins == 1 else np.zeros(self.bins)  # the virtual r_0 = 0, noise-free

    @property
    def _time(self) -> int:
        return self._values.time

    def insert(self, release, variance=None, *, repeated: bool = False, slot: int | None = None) -> None:
        """Ingest the next slot's release.

        A fresh release passes the noise ``variance`` of each bin (a number, or d numbers with
        ``per_bin_variance``). A repeat of the last fresh release passes ``repeated=True`` and no
        variance: it shares that release's noise (before any fresh release, the repeated value is
        the noise-free r_0 = 0).
        """
        self._check_next(slot)
        values = self._row(release)
        i = self._time + 1
        if repeated:
            if variance is not None:
                raise ParameterError("a repeated release shares the noise of the release it repeats: pass no variance")
            if not np.array_equal(values, self._last_fresh):
                raise ParameterError(f"slot {self.slot + 1} is marked as a repeat but differs from the last fresh release")
            if not self._starts:  # repeats of r_0 form a noise-free group
                self._open_group(i, self._no_variance)
            closed = None
        else:
            closed = self._close_group(i) if self._starts else None
            self._open_group(i, self._check_variance(variance))
            self._last_fresh = values
        if i >= 2:  # the inner store runs one slot behind: slot i-1 ended a group iff slot i is fresh
            self._inner.insert(self._no_variance if closed is None else closed)
        self._values.insert(values)
        self._drop_expired_groups()

    def _check_variance(self, variance) -> np.ndarray | float:
        if variance is None:
            raise ParameterError("a fresh release needs its noise variance (pass repeated=True for a repeat)")
        value: np.ndarray | float
        if self._variance_bins == 1 and isinstance(variance, numbers.Real):  # the common case, without numpy
            low = high = value = float(variance)
        else:
            array = np.asarray(variance, dtype=float)
            if array.shape not in ((), (self._variance_bins,)):
                raise ParameterError(f"variance must be one number{' or one per bin' if self.per_bin_variance else ''}, "
                                     f"got shape {array.shape}")
            value = np.broadcast_to(array, (self._variance_bins,)).copy() if self._variance_bins > 1 else float(array)
            low, high = np.min(value), np.max(value)
        if not 0.0 <= low <= high < math.inf:
            raise ParameterError(f"variance must be finite and >= 0, got {variance!r}")
        return value

    def _open_group(self, i: int, variance) -> None:
        self._starts.append(i)
        self._variances.append(variance)

    def _close_group(self, i: int):
        """``v_g · u_g²`` of the group that ends at slot ``i - 1``."""
        u = self._geometric(i - self._starts[-1])
        return self._variances[-1] * (u * u)

    def _geometric(self, n: int) -> float:
        """``Σ_{x<n} p^x`` (accurate for p near 1: ratio of expm1s)."""
        if self.decay == 1.0:
            return float(n)
        log_p = math.log(self.decay)
        return math.expm1(n * log_p) / math.expm1(log_p)

    def _drop_expired_groups(self) -> None:
        oldest = self._time - self.window + 1
        drop = bisect.bisect_right(self._starts, oldest) - 1  # keep the group holding the oldest slot
        if drop > 0:
            del self._starts[:drop], self._variances[:drop]

    def _answer(self, l: int, r: int):
        t = self._time
        answer = self._values.decayed_sum(l, r)
        first, last = bisect.bisect_right(self._starts, l) - 1, bisect.bisect_right(self._starts, r) - 1
        if first == last:
            return answer, self._variances[first] * self._weight(l, r, t) ** 2
        first_end, last_start = self._starts[first + 1] - 1, self._starts[last]
        variance = (self._variances[first] * self._weight(l, first_end, t) ** 2
                    + self._variances[last] * self._weight(last_start, r, t) ** 2)
        if last > first + 1:
            variance = variance + self._inner.decayed_sum(first_end + 1, last_start - 1, t)
        return answer, variance

    def _weight(self, a: int, b: int, t: int) -> float:
        """``Σ_{i=a..b} p^(t-i)``: the coefficient of a group's noise over its part of the range."""
        return self._values.powers[t - b] * self._geometric(b - a + 1)

    # --- state -------------------------------------------------------------------------------
    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "per_bin_variance": self.per_bin_variance}

    def _dynamic(self) -> dict[str, Any]:
        return {
            "values": self._values.state_dict(),
            "inner": self._inner.state_dict(),
            "group_starts": np.array(self._starts, dtype=np.int64),
            "group_variances": np.array(self._variances, dtype=float),
            "last_fresh": np.array(self._last_fresh, dtype=float),
        }

    def _load(self, dynamic: dict[str, Any]) -> None:
        self._values.load_state(dynamic["values"])
        self._inner.load_state(dynamic["inner"])
        self._starts = [int(s) for s in dynamic["group_starts"]]
        self._variances = [row.copy() if self._variance_bins > 1 else float(row) for row in dynamic["group_variances"]]
        self._last_fresh = dynamic["last_fresh"] if self.bins > 1 else float(dynamic["last_fresh"])
