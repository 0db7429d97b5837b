"""Property-based checks of the central mechanisms: window spend, BA units,
determinism, step-by-step equals batch, and mid-stream restore."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import derived
from wevent.core.base import restore
from wevent.core.central import BudgetAbsorption, BudgetDistribution, Sample, Uniform
from wevent.core.ledger import WindowLedger
from wevent.core.simulation import simulate

MECHANISMS = st.sampled_from([Uniform, Sample, BudgetDistribution, BudgetAbsorption])
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def scenarios(draw):
    cls = draw(MECHANISMS)
    epsilon = draw(st.floats(min_value=1e-3, max_value=20, allow_nan=False))
    window = draw(st.integers(1, 25))
    domain = draw(st.integers(1, 12))
    slots = draw(st.integers(1, 3 * window + 12))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    counts = rng.poisson(draw(st.sampled_from([0.5, 20.0, 5000.0])), (slots, domain)).astype(float)
    # None lets the rule decide; True/False script the publish decision (scripted decisions)
    script = draw(st.lists(st.sampled_from([None, True, False]), min_size=slots, max_size=slots))
    options = {}
    if cls in (BudgetDistribution, BudgetAbsorption):
        options["budget_shift"] = draw(st.booleans())
        options["decision_override"] = lambda slot: script[slot - 1]
    return cls, epsilon, window, domain, counts, seed, options


@SETTINGS
@given(scenarios())
def test_window_spend_never_exceeds_epsilon(scenario):
    cls, epsilon, window, domain, counts, seed, options = scenario
    m = cls(epsilon, window, domain, randomness=derived(seed), **options)
    ledger = WindowLedger(window)
    for result in m.run(counts):
        ledger.record(result.budget)
    assert ledger.max_window_spend() <= epsilon + 1e-12
    if cls is BudgetAbsorption:
        unit = m.unit
        for eps2 in ledger.eps2:
            k = eps2 / unit
            assert abs(k - round(k)) < 1e-9 and 0 <= round(k) <= window
            if not options["budget_shift"] or domain <= 2 * window:
                # Without an effective shift the unit is exactly epsilon/(2w).
                assert abs(eps2 / (epsilon / (2 * window)) - round(k)) < 1e-9


@SETTINGS
@given(scenarios(), st.data())
def test_restore_at_a_random_slot_continues_identically(scenario, data):
    cls, epsilon, window, domain, counts, seed, options = scenario
    full = cls(epsilon, window, domain, randomness=derived(seed), **options).run(counts)
    cut = data.draw(st.integers(0, len(counts)))
    first = cls(epsilon, window, domain, randomness=derived(seed), **options)
    first.run(counts[:cut])
    encoded = data.draw(st.sampled_from(["bytes", "json"]))
    blob = first.to_bytes() if encoded == "bytes" else first.to_json()
    hooks = {k: v for k, v in options.items() if k == "decision_override"}
    resumed = restore(blob, derived(seed), **hooks)
    rest = resumed.run(counts[cut:])
    for a, b in zip(full[cut:], rest):
        assert a.slot == b.slot and a.strategy == b.strategy
        assert np.array_equal(a.release, b.release) and a.eps2 == b.eps2


@SETTINGS
@given(scenarios())
def test_step_by_step_equals_batch_and_same_seed_is_identical(scenario):
    cls, epsilon, window, domain, counts, seed, options = scenario
    batch = simulate(cls(epsilon, window, domain, randomness=derived(seed), **options), counts)
    online = cls(epsilon, window, domain, randomness=derived(seed), **options)
    for row, expected in zip(counts, batch.results):
        got = online.step(row)
        assert np.array_equal(got.release, expected.release)
        assert (got.strategy, got.eps1, got.eps2) == (expected.strategy, expected.eps1, expected.eps2)
