"""Helpers for the local-model tests: mechanisms wired to simulated devices, and a slot driver."""

import numpy as np

from tests.conftest import derived
from wevent.core.local import MECHANISMS, Devices, UserLedger


def make(name, epsilon=1.0, window=3, domain=2, population=60, seed=0, mode="sufficient", **options):
    devices = Devices.from_seed(seed, "test", block_size=16, mode=mode)
    return MECHANISMS[name](epsilon, window, domain, population, randomness=derived(seed), devices=devices, **options)


def run(mechanism, slots, values=None, seed=0):
    """Step ``slots`` slots; values random in the domain (or the given (T, N) matrix)."""
    if values is None:
        rng = np.random.default_rng(seed)
        values = rng.integers(0, mechanism.domain_size, (slots, mechanism.population))
    return [mechanism.step(row) for row in values[:slots]]


def audit(results, population, window):
    ledger = UserLedger(population, window)
    for r in results:
        ledger.record(r)
    return ledger
