"""Synthetic binary streams of LDP-IDS (Ren et al., SIGMOD 2022, Section 7.1.1).

A model gives a probability ``p_t`` per slot; at every slot exactly ``round(p_t * N)`` users,
chosen uniformly at random and independently of other slots, hold value 1 and the others 0.
The histogram of slot t is therefore ``[N - k_t, k_t]`` (d = 2).

* LNS (linear Gaussian walk): ``p_0 = 0.05``, ``p_t = clip(p_{t-1} + N(0, Q), 0, 1)``, ``sqrt(Q) = 0.0025``.
* Sin: ``p_t = A sin(b t) + h`` with A = 0.05, b = 0.01, h = 0.075.
* Log: ``p_t = A / (1 + exp(-b t))`` with A = 0.25, b = 0.01.

The "-Con" variants for mean estimation draw every user's value from ``N(p_t, sigma^2)`` clipped
into ``[0, B]`` (sigma = 0.1 by default, since the paper's sigma = 10 on values in [0, 1] reads as a typo;
the literal sigma = 10 is an option).

Per-slot user values are derived from ``(seed, t)`` so any slot can be regenerated on its own
(a replay can resume mid-stream).

>>> data = synthetic("sin", users=1000, slots=3, seed=1)
>>> data.counts.tolist()
[[925, 75], [924, 76], [924, 76]]
>>> int(data.values_at(1).sum())
75
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field

import numpy as np

from .validation import ParameterError, check_positive_int

__all__ = ["StreamModel", "LNS", "Sin", "Log", "MODELS", "SyntheticStream", "synthetic"]


class StreamModel(abc.ABC):
    """A model of ``p_t``, the fraction of users holding value 1 at slot t = 1..T."""

    name: str

    @abc.abstractmethod
    def probabilities(self, slots: int, rng: np.random.Generator) -> np.ndarray:
        """``p_1..p_T`` in [0, 1]."""


@dataclass(frozen=True)
class LNS(StreamModel):
    """Linear Gaussian random walk, clipped to [0, 1] at every step (a walk can leave it; the paper does not say)."""

    step_std: float = 0.0025
    start: float = 0.05
    name: str = field(default="lns", init=False)

    def probabilities(self, slots, rng):
        steps = rng.normal(0.0, self.step_std, slots)
        p = np.empty(slots)
        current = self.start
        for t in range(slots):  # clipping makes the walk sequential; T is small (one float per slot)
            current = min(1.0, max(0.0, current + steps[t]))
            p[t] = current
        return p


@dataclass(frozen=True)
class Sin(StreamModel):
    """A sine wave: ``p_t = A sin(b t) + h``, clipped to [0, 1].

    Parameters
    ----------
    amplitude : float, default 0.05
        ``A``.
    frequency : float, default 0.01
        ``b``, in radians per slot.
    offset : float, default 0.075
        ``h``.

    Examples
    --------
    >>> Sin().probabilities(3, None).round(6).tolist()
    [0.0755, 0.076, 0.0765]

    References
    ----------
    X. Ren, L. Shi, W. Yu, S. Yang, C. Zhao, Z. Xu. LDP-IDS: Local Differential Privacy for
    Infinite Data Streams. SIGMOD 2022: Section 7.1.1 of the SIGMOD version (the Sin dataset).
    """

    amplitude: float = 0.05
    frequency: float = 0.01
    offset: float = 0.075
    name: str = field(default="sin", init=False)

    def probabilities(self, slots, rng):
        t = np.arange(1, slots + 1)
        return np.clip(self.amplitude * np.sin(self.frequency * t) + self.offset, 0.0, 1.0)


@dataclass(frozen=True)
class Log(StreamModel):
    """A logistic curve: ``p_t = A / (1 + exp(-b t))``, clipped to [0, 1].

    Parameters
    ----------
    amplitude : float, default 0.25
        ``A``, the value the curve approaches.
    rate : float, default 0.01
        ``b``, its growth per slot.

    Examples
    --------
    >>> Log().probabilities(3, None).round(6).tolist()
    [0.125625, 0.12625, 0.126875]

    References
    ----------
    X. Ren, L. Shi, W. Yu, S. Yang, C. Zhao, Z. Xu. LDP-IDS: Local Differential Privacy for
    Infinite Data Streams. SIGMOD 2022: Section 7.1.1 of the SIGMOD version (the Log dataset).
    """

    amplitude: float = 0.25
    rate: float = 0.01
    name: str = field(default="log", init=False)

    def probabilities(self, slots, rng):
        t = np.arange(1, slots + 1)
        return np.clip(self.amplitude / (1.0 + np.exp(-self.rate * t)), 0.0, 1.0)


MODELS: dict[str, type[StreamModel]] = {"lns": LNS, "sin": Sin, "log": Log}


@dataclass(frozen=True)
class SyntheticStream:
    """A generated binary stream: ``p_t``, exact counts, and per-user values on demand."""

    model: StreamModel
    users: int
    seed: int
    p: np.ndarray

    @property
    def slots(self) -> int:
        return int(self.p.size)

    @property
    def ones(self) -> np.ndarray:
        """Number of users holding 1 at each slot: ``round(p_t N)``."""
        return np.rint(self.p * self.users).astype(np.int64)

    @property
    def counts(self) -> np.ndarray:
        """(T, 2) histograms ``[N - k_t, k_t]``."""
        ones = self.ones
        return np.stack([self.users - ones, ones], axis=1)

    def values_at(self, slot: int) -> np.ndarray:
        """Every user's value (0 or 1, uint8) at 1-based ``slot``."""
        rng = np.random.default_rng([self.seed, 1, slot])
        values = np.zeros(self.users, dtype=np.uint8)
        values[rng.choice(self.users, int(self.ones[slot - 1]), replace=False)] = 1
        return values

    def values(self) -> np.ndarray:
        """(T, N) matrix of every user's value at every slot."""
        return np.stack([self.values_at(t) for t in range(1, self.slots + 1)])

    def continuous_draws_at(self, slot: int, sigma: float = 0.1) -> np.ndarray:
        """The "-Con" variant's draws before clipping: ``N(p_t, sigma^2)`` per user (float64), ``p_t + sigma Z``
        (what numpy's ``normal`` computes from the same generator)."""
        return self.p[slot - 1] + sigma * self.standard_normals_at(slot)

    def standard_normals_at(self, slot: int) -> np.ndarray:
        """``Z`` of :meth:`continuous_draws_at` at ``slot``: the model does not change them."""
        return np.random.default_rng([self.seed, 2, slot]).standard_normal(self.users)

    def continuous_values_at(self, slot: int, sigma: float = 0.1, bound: float = 1.0) -> np.ndarray:
        """The "-Con" variant: ``clip(N(p_t, sigma^2), 0, bound)`` per user (float64)."""
        return np.clip(self.continuous_draws_at(slot, sigma), 0.0, bound)


def synthetic(name: str, users: int, slots: int, seed: int = 0, **model_options) -> SyntheticStream:
    """Generate the named stream (``lns``, ``sin`` or ``log``) for ``users`` over ``slots``."""
    model_cls = MODELS.get(name)
    if model_cls is None:
        raise ParameterError(f"unknown synthetic dataset {name!r}; choose one of {', '.join(MODELS)}")
    users = check_positive_int(users, "users")
    slots = check_positive_int(slots, "slots")
    model = model_cls(**model_options)
    p = model.probabilities(slots, np.random.default_rng([seed, 0]))
    return SyntheticStream(model, users, int(seed), p)
