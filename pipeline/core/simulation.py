"""Batch simulation: run a mechanism over a finite stream and summarise its error and spend.

>>> from wevent.core.central import BudgetAbsorption
>>> from wevent.core.randomness import DerivedRandomness, SecretKey
>>> from wevent.core.synthetic import synthetic
>>> data = synthetic("log", users=10_000, slots=50, seed=3)
>>> m = BudgetAbsorption(1.0, 10, 2, randomness=DerivedRandomness(SecretKey.from_seed(3)))
>>> run = simulate(m, data.counts)
>>> s = run.summary(mre_floor=1.0)
>>> s["slots"], s["publications"] + s["approximations"], s["max_window_epsilon"] <= 1.0
(50, 50, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np

from .accounting import WindowAccount
from .base import Mechanism, StepResult, Strategy
from .divergence import ajsd
from .metrics import mae, mre, mse

__all__ = ["SimulationRun", "simulate"]


@dataclass
class SimulationRun:
    """A mechanism's run over a finite stream: its releases against the truth, and its ledger.

    Parameters
    ----------
    mechanism : Mechanism
        The mechanism after the run (its parameters and window bound go in the summary).
    results : list of StepResult
        Every slot's outcome, in order.
    truth : numpy.ndarray
        ``(T, d)``: what each release estimates.
    charged : WindowAccount, optional
        The mechanism's ledger, already charged with every result (:meth:`ledger` charges one
        when omitted).

    Examples
    --------
    >>> from wevent.core.central import Uniform
    >>> from wevent.core.randomness import DerivedRandomness, SecretKey
    >>> m = Uniform(1.0, 5, 2, randomness=DerivedRandomness(SecretKey.from_seed(0)))
    >>> run = simulate(m, np.full((20, 2), 100.0))
    >>> run.releases.shape, run.summary(mre_floor=1.0)["max_window_epsilon"] <= 1.0
    ((20, 2), True)

    References
    ----------
    G. Kellaris, S. Papadopoulos, X. Xiao, D. Papadias. Differentially Private Event Sequences
    over Infinite Streams. PVLDB 7(12), 2014: Theorem 3 (a window's spend is the sum of its slots'),
    which the summary's ``max_window_epsilon`` checks.
    """

    mechanism: Mechanism
    results: list[StepResult]
    truth: np.ndarray  # (T, d): what each release estimates
    charged: WindowAccount | None = field(default=None, repr=False, compare=False)  # the ledger, once charged

    @property
    def releases(self) -> np.ndarray:
        return np.stack([r.release for r in self.results]) if self.results else np.empty((0, 0))

    def ledger(self) -> WindowAccount:
        """The mechanism's own ledger (:meth:`Mechanism.new_ledger`) with every slot charged (once: the
        summary and the release records read it again; a caller that charged one passes it as ``charged``)."""
        if self.charged is None:
            self.charged = self.mechanism.new_ledger()
            for result in self.results:
                self.charged.record(result)
        return self.charged

    def strategy_counts(self) -> dict[str, int]:
        counts = {s.value: 0 for s in Strategy}
        for result in self.results:
            counts[result.strategy.value] += 1
        return counts

    def summary(self, mre_floor: float) -> dict:
        """The JSON summary of ``wevent simulate`` (error metrics, counts, window spend)."""
        strategies = self.strategy_counts()
        worst = self.ledger().tightest()
        releases = self.releases
        params = self.mechanism._params()
        return {
            "mechanism": self.mechanism.name,
            "epsilon": self.mechanism.epsilon,
            "window": self.mechanism.window,
            "slots": len(self.results),
            "domain_size": int(self.truth.shape[1]) if self.truth.ndim == 2 else 1,
            "mae": mae(releases, self.truth),
            "mre": mre(releases, self.truth, mre_floor),
            "mse": mse(releases, self.truth),
            "ajsd": ajsd(releases, self.truth),
            "mre_floor": mre_floor,
            "publications": strategies[Strategy.PUBLISH.value],
            "approximations": len(self.results) - strategies[Strategy.PUBLISH.value],
            "strategies": strategies,
            "max_window_epsilon": worst.spend if worst is not None else 0.0,
            "window_epsilon_bound": self.mechanism.window_spend_bound,
            "options": {k: v for k, v in params.items() if k not in ("epsilon", "window", "domain_size")},
        }


def simulate(mechanism: Mechanism, stream: Iterable, truth: np.ndarray | None = None,
             progress: Callable[[Iterable], Iterable] | None = None) -> SimulationRun:
    """Step ``mechanism`` through every slot of ``stream`` (:meth:`~wevent.core.base.Mechanism.run`);
    ``truth`` defaults to the stream itself."""
    results = mechanism.run(progress(stream) if progress is not None else stream)
    return SimulationRun(mechanism, results, np.asarray(stream if truth is None else truth, dtype=float))
