"""Every registered mechanism, whatever its model, keeps the same contract.

For each mechanism the registry holds, over random scripted decisions and random data:

* no window spends more than the mechanism's stated bound, and the bound is within the budget
  (per slot for the central model, per requirement type for the personalized one, per user for
  the local one, each over its own window);
* a mechanism restored from its state at a random slot continues identically;
* the same keys give the same releases, other keys other ones;
* ``params()`` rebuilds an equal mechanism, and ``repr`` shows them.

Adding a mechanism to the registry adds it here, with no change to this file.
"""

import numpy as np
import pytest

from tests.conftest import scripted
from wevent.core.base import restore
from wevent.core.local import Devices, UserLedger
from wevent.core.randomness import DerivedRandomness, SecretKey
from wevent.core.registry import mechanisms

NAMES = sorted(mechanisms())
SEEDS = (0, 1, 2)
SLOTS = 24
WINDOW, DOMAIN, POPULATION = 4, 3, 120
TYPES = dict(windows=[2, 4, 3], epsilons=[1.0, 0.6, 2.0], sizes=[20, 30, 10])


def build(name, seed, decisions=None, key_seed=None):
    """The mechanism ``name`` with small parameters; its keys (the server's and, in the local model, the
    devices') come from ``key_seed`` (default ``seed``)."""
    cls = mechanisms()[name]
    key_seed = seed if key_seed is None else key_seed
    randomness = DerivedRandomness(SecretKey.from_seed(key_seed), "conformance")
    hooks = {"decision_override": scripted(decisions)} if decisions is not None else {}
    if cls.model == "local":
        return cls(1.0, WINDOW, DOMAIN, POPULATION, randomness=randomness,
                   devices=Devices.from_seed(key_seed, "conformance", block_size=32), **hooks)
    if cls.model == "personalized":
        return cls(TYPES["windows"], TYPES["epsilons"], TYPES["sizes"], DOMAIN, randomness=randomness, **hooks)
    return cls(1.0, WINDOW, DOMAIN, randomness=randomness, **hooks)


def stream(mechanism, seed):
    """SLOTS slots of random input in the shape the mechanism's model takes."""
    rng = np.random.default_rng(seed)
    if mechanism.model == "local":
        return rng.integers(0, DOMAIN, (SLOTS, POPULATION))
    if mechanism.model == "personalized":
        sizes = np.array(TYPES["sizes"])
        # every registered user of type k reports one value: a multinomial row per type
        return np.stack([np.stack([rng.multinomial(n, np.ones(DOMAIN) / DOMAIN) for n in sizes]) for _ in range(SLOTS)])
    return rng.integers(0, 50, (SLOTS, DOMAIN))


def decisions(seed):
    rng = np.random.default_rng(seed + 1000)
    return [(None, True, False)[i] for i in rng.integers(0, 3, SLOTS)]


def same_params(a, b):
    """Equal parameter dicts (arrays compared by value)."""
    pa, pb = a.params(), b.params()
    return pa.keys() == pb.keys() and all(
        np.array_equal(pa[k], pb[k]) if isinstance(pa[k], np.ndarray) else pa[k] == pb[k] for k in pa)


def releases(results):
    return np.stack([r.release for r in results])


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", NAMES)
def test_no_window_spends_more_than_the_stated_bound(name, seed):
    m = build(name, seed, decisions(seed))
    results = m.run(stream(m, seed))
    tolerance = 1e-12
    if m.model == "local":
        ledger = UserLedger(m.population, m.window)
        for r in results:
            ledger.record(r)
        assert ledger.max_window_spend <= m.window_spend_bound + tolerance
        assert m.window_spend_bound <= m.epsilon * (1 + tolerance)
    elif m.model == "personalized":
        charges = np.stack([r.type_eps1 + r.type_eps2 for r in results])  # (slots, types)
        bounds = m.type_window_spend_bounds
        for k, w in enumerate(m.types.windows):
            window_sums = np.convolve(charges[:, k], np.ones(int(w)))[: len(results)]
            assert window_sums.max() <= bounds[k] + tolerance, (k, window_sums.max(), bounds[k])
        assert (bounds <= m.types.epsilons * (1 + tolerance)).all()
    else:
        charges = np.array([r.eps1 + r.eps2 for r in results])
        window_sums = np.convolve(charges, np.ones(m.window))[: len(results)]
        assert window_sums.max() <= m.window_spend_bound + tolerance
        assert m.window_spend_bound <= m.epsilon * (1 + tolerance)


@pytest.mark.parametrize("name", NAMES)
def test_a_restored_mechanism_continues_identically(name):
    seed = 5
    data = None
    for cut in np.random.default_rng(seed).integers(1, SLOTS, 3):
        whole = build(name, seed, decisions(seed))
        data = stream(whole, seed) if data is None else data
        expected = whole.run(data)
        first = build(name, seed, decisions(seed))
        first.run(data[:cut])
        hooks = {"decision_override": scripted(decisions(seed))}
        if first.model == "local":
            hooks["devices"] = Devices.from_seed(seed, "conformance", block_size=32)
        for state in (first.to_bytes(), first.to_json()):
            resumed = restore(state, first.randomness, **hooks)
            assert resumed.slot == cut and same_params(resumed, first)
            rest = resumed.run(data[cut:])
            np.testing.assert_array_equal(releases(rest), releases(expected[cut:]))
            assert [r.strategy for r in rest] == [r.strategy for r in expected[cut:]]
            assert [(r.eps1, r.eps2) for r in rest] == [(r.eps1, r.eps2) for r in expected[cut:]]


@pytest.mark.parametrize("name", NAMES)
def test_the_same_keys_give_the_same_releases_and_other_keys_others(name):
    seed = 7
    data = stream(build(name, seed), seed)
    first, again = (releases(build(name, seed).run(data)) for _ in range(2))
    np.testing.assert_array_equal(first, again)
    other = releases(build(name, seed, key_seed=seed + 1).run(data))
    assert not np.array_equal(first, other)


@pytest.mark.parametrize("name", NAMES)
def test_params_rebuild_an_equal_mechanism_and_repr_shows_them(name):
    m = build(name, 3)
    rebuilt = type(m)(**m.params(), randomness=m.randomness)
    assert same_params(m, rebuilt), name
    text = repr(m)
    assert text.startswith(f"{type(m).__name__}(") and text.endswith("at slot 0")
    assert all(f"{k}=" in text for k in m.params())
