"""Deterministic oracles of the central mechanisms (Kellaris et al. 2014): ledgers, worked examples, state."""

from fractions import Fraction

import numpy as np
import pytest

from tests.conftest import CountingNoise, derived, random_counts, scripted
from wevent.core.base import Strategy, restore
from wevent.core.central import (
    BudgetAbsorption,
    BudgetDistribution,
    DissimilarityMeasure,
    Sample,
    Uniform,
)
from wevent.core.ledger import WindowLedger
from wevent.core.randomness import SecretKey
from wevent.core.validation import ParameterError

ALL = (Uniform, Sample, BudgetDistribution, BudgetAbsorption)
TOL = 1e-12


def ledger_of(results, w):
    ledger = WindowLedger(w)
    for r in results:
        ledger.record(r.budget)
    return ledger


# 1. window ledger ---------------------------------------------------------------------------
@pytest.mark.parametrize("cls", ALL)
@pytest.mark.parametrize("w", [1, 2, 3, 5, 40])
def test_window_spend_never_exceeds_epsilon(cls, w):
    for seed in range(4):
        rng = np.random.default_rng(seed)
        counts = random_counts(rng, 3 * w + 30, 6, scale=rng.choice([5.0, 500.0]))
        eps = float(rng.choice([0.1, 1.0, 3.0]))
        m = cls(eps, w, 6, randomness=derived(seed))
        ledger = ledger_of(m.run(counts), w)
        assert ledger.max_window_spend() <= eps + TOL
        assert ledger.max_window_spend() <= m.window_spend_bound + TOL


# 2. Uniform ---------------------------------------------------------------------------------
def test_uniform_spends_epsilon_over_w_every_slot():
    m = Uniform(2.0, 5, 3, randomness=derived())
    results = m.run(np.ones((12, 3)))
    assert all(r.published and r.eps1 == 0 and r.eps2 == pytest.approx(2.0 / 5, abs=TOL) for r in results)
    spend = ledger_of(results, 5).window_spend()
    assert spend[4:] == pytest.approx(2.0, abs=TOL)


# 3. Sample ----------------------------------------------------------------------------------
def test_sample_schedule_and_exact_repeats():
    w = 4
    m = Sample(1.0, w, 3, randomness=derived())
    counts = random_counts(np.random.default_rng(0), 17, 3)
    results = m.run(counts)
    published = [r.slot for r in results if r.published]
    assert published == [1, 5, 9, 13, 17]
    for prev, r in zip(results, results[1:]):
        if not r.published:
            assert r.strategy is Strategy.NOT_SAMPLED and r.eps2 == 0
            assert np.array_equal(r.release, prev.release)
    assert all(r.eps2 == 1.0 for r in results if r.published)


def test_sample_with_window_one_publishes_every_slot():
    assert all(r.published for r in Sample(1.0, 1, 2, randomness=derived()).run(np.ones((6, 2))))


# 4. BD worked example -----------------------------------------------------------------------
def test_bd_paper_example(zero_noise):
    eps = 1.0
    m = BudgetDistribution(eps, 3, 2, randomness=zero_noise, decision_override=scripted([True, False, True, True, False, False]))
    results = m.run(np.ones((6, 2)))
    assert [r.eps2 for r in results] == pytest.approx([eps / 4, 0, eps / 8, 3 * eps / 16, 0, 0], abs=TOL)
    assert all(r.eps1 == pytest.approx(eps / 6, abs=TOL) for r in results)


# 5/9. exhaustive decision strings -----------------------------------------------------------
def explore(factory, depth, visit):
    """Depth-first over every publish/skip string of length <= depth, sharing prefixes.

    The mechanism is cloned through its serialised state at every branch, so this also checks
    that a restored mechanism continues exactly like the original.
    """
    decisions = {}
    hook = lambda slot: decisions.get(slot)  # noqa: E731
    root = factory(hook)
    counts = np.ones(root.domain_size)

    def walk(mechanism, path):
        if len(path) == depth:
            return
        for choice in (True, False):
            decisions[len(path) + 1] = choice
            clone = restore(mechanism.to_bytes(), mechanism.randomness, decision_override=hook)
            result = clone.step(counts)
            visit(path + [result])
            walk(clone, path + [result])

    walk(root, [])


@pytest.mark.parametrize("w", [1, 2, 3, 4, 5, 6])
def test_bd_exhaustive_publication_bound_is_tight(zero_noise, w):
    eps = 1.0
    bound = eps / 2 * (1 - 2.0**-w)
    worst = [0.0]

    def visit(path):
        window = path[-w:]
        pub = sum(r.eps2 for r in window)
        assert pub <= bound + TOL
        assert sum(r.eps1 + r.eps2 for r in window) <= eps + TOL
        worst[0] = max(worst[0], pub)

    explore(lambda hook: BudgetDistribution(eps, w, 1, randomness=zero_noise, decision_override=hook), 14 - w, visit)
    assert worst[0] == pytest.approx(bound, abs=TOL)  # reached, e.g. by w publications from the start


def test_bd_remaining_budget_stays_positive(zero_noise):
    m = BudgetDistribution(1.0, 6, 2, randomness=zero_noise, decision_override=lambda s: True)
    for _ in range(200):
        assert m.remaining_budget() > 0
        m.step(np.ones(2))


# 6. BD all-publish recurrence ---------------------------------------------------------------
@pytest.mark.parametrize(
    "w, expected",
    [
        (2, [Fraction(1, 4), Fraction(1, 8), Fraction(3, 16), Fraction(5, 32), Fraction(11, 64)]),
        (3, [Fraction(1, 4), Fraction(1, 8), Fraction(1, 16), Fraction(5, 32), Fraction(9, 64)]),
        (1, [Fraction(1, 4)] * 5),
    ],
)
def test_bd_all_publish_recurrence(zero_noise, w, expected):
    m = BudgetDistribution(1.0, w, 2, randomness=zero_noise, decision_override=lambda s: True)
    assert [r.eps2 for r in m.run(np.ones((5, 2)))] == pytest.approx([float(f) for f in expected], abs=TOL)


@pytest.mark.parametrize("w", [2, 3, 5])
def test_bd_all_publish_converges_to_eps_over_2_w_plus_1(zero_noise, w):
    m = BudgetDistribution(1.0, w, 2, randomness=zero_noise, decision_override=lambda s: True)
    assert m.run(np.ones((400, 2)))[-1].eps2 == pytest.approx(1.0 / (2 * (w + 1)), rel=1e-9)


# 7. BA worked example -----------------------------------------------------------------------
def test_ba_paper_example(zero_noise):
    eps = 1.0
    script = {1: True, 2: False, 3: True, 5: True, 6: False}
    m = BudgetAbsorption(eps, 3, 2, randomness=zero_noise, decision_override=script.get)
    results = m.run(np.ones((6, 2)))
    kinds = [r.strategy for r in results]
    assert kinds == [Strategy.PUBLISH, Strategy.APPROXIMATE, Strategy.PUBLISH, Strategy.NULLIFIED, Strategy.PUBLISH, Strategy.APPROXIMATE]
    assert [r.eps2 for r in results] == pytest.approx([eps / 6, 0, eps / 3, 0, eps / 6, 0], abs=TOL)


# 8. BA long skip ----------------------------------------------------------------------------
def test_ba_long_skip_absorbs_at_most_w_units(zero_noise):
    eps, w = 1.0, 3
    m = BudgetAbsorption(eps, w, 2, randomness=zero_noise, decision_override=lambda s: s > 10)
    results = m.run(np.ones((20, 2)))
    assert results[10].published and results[10].eps2 == pytest.approx(eps / 2, abs=TOL)
    assert [r.strategy for r in results[11:13]] == [Strategy.NULLIFIED] * 2
    assert all(r.published and r.eps2 == pytest.approx(eps / 6, abs=TOL) for r in results[13:])


# 9. BA structure ----------------------------------------------------------------------------
@pytest.mark.parametrize("w", [1, 2, 3, 4, 5, 6])
def test_ba_exhaustive_structure(zero_noise, w):
    eps = 1.0
    unit = eps / (2 * w)
    worst = [0.0]

    def visit(path):
        last = path[-1]
        units = last.eps2 / unit
        assert units == pytest.approx(round(units), abs=1e-9) and 0 <= round(units) <= w
        pub = sum(r.eps2 for r in path[-w:])
        assert pub <= eps / 2 + TOL
        worst[0] = max(worst[0], pub)
        # after a k-unit publication exactly the next k-1 slots are nullified
        for i, r in enumerate(path):
            if r.published:
                k = round(r.eps2 / unit)
                following = path[i + 1 : i + k]
                assert all(f.strategy is Strategy.NULLIFIED for f in following)
                if i + k < len(path):
                    assert path[i + k].strategy is not Strategy.NULLIFIED

    explore(lambda hook: BudgetAbsorption(eps, w, 1, randomness=zero_noise, decision_override=hook), 14 - w, visit)
    assert worst[0] == pytest.approx(eps / 2, abs=TOL)


def test_ba_nullified_slots_draw_no_publication_noise():
    noise = CountingNoise(SecretKey.from_seed(0))
    m = BudgetAbsorption(1.0, 4, 3, randomness=noise, decision_override=lambda s: s == 6 or s > 12)
    results = m.run(np.ones((20, 3)))
    nullified = {r.slot for r in results if r.strategy is Strategy.NULLIFIED}
    assert nullified and not nullified & set(noise.publication_slots)
    assert set(noise.publication_slots) == {r.slot for r in results if r.published}


# 10. zero noise, constant stream ------------------------------------------------------------
@pytest.mark.parametrize("cls, first_eps2", [(BudgetDistribution, 1.0 / 4), (BudgetAbsorption, 1.0 / (2 * 5))])
def test_constant_stream_publishes_once(zero_noise, cls, first_eps2):
    c = 1e6 * np.ones(4)
    results = cls(1.0, 5, 4, randomness=zero_noise).run(np.tile(c, (30, 1)))
    assert results[0].published and np.array_equal(results[0].release, c)
    assert results[0].eps2 == pytest.approx(first_eps2, abs=TOL)
    assert all(r.strategy is Strategy.APPROXIMATE and r.eps2 == 0 for r in results[1:])


# 11. zero noise, alternating stream ---------------------------------------------------------
@pytest.mark.parametrize("w", [1, 2, 3, 10])
def test_alternating_stream_publishes_every_slot(zero_noise, w):
    a, b = 1e9 * np.ones(3), 2e9 * np.ones(3)
    stream = np.array([a if i % 2 == 0 else b for i in range(40)])
    bd = BudgetDistribution(1.0, w, 3, randomness=zero_noise).run(stream)
    assert all(r.published and r.threshold <= 2 ** (w + 1) / 1.0 for r in bd)
    forced = BudgetDistribution(1.0, w, 3, randomness=zero_noise, decision_override=lambda s: True).run(stream)
    assert [r.eps2 for r in bd] == [r.eps2 for r in forced]
    ba = BudgetAbsorption(1.0, w, 3, randomness=zero_noise).run(stream)
    assert all(r.published and r.eps2 == pytest.approx(1.0 / (2 * w), abs=TOL) for r in ba)


# 12. dissimilarity --------------------------------------------------------------------------
def test_dissimilarity_is_mean_absolute_distance_over_all_bins(zero_noise):
    m = DissimilarityMeasure(1.0, 2, 5)
    c = np.array([0.0, 0.0, 7.0, 1.0, 2.0])
    last = np.array([1.0, 0.0, 4.0, 1.0, 0.0])
    assert m.measure(1, c, last, zero_noise).value == pytest.approx((1 + 0 + 3 + 0 + 2) / 5)


def test_the_compiled_whole_distance_is_numpys():
    """M1's compiled L1 distance sums in another order than numpy's pairwise sum: of whole numbers,
    below 2^52 both are exact, and above it both pass 2^53, so the capped distance is the same (here
    with sums around 2^53, where the two orders' roundings start)."""
    pytest.importorskip("numba")
    from wevent.core import compiled
    from wevent.core.central.dissimilarity import private_mean_distance

    rng = np.random.default_rng(3)
    near = np.array([2.0**52 - 1, 3.0, 1.0, 2.0**52, 5.0, 7.0, 1.0, 2.0**51, 9.0, 3.0])
    cases = [(rng.integers(0, 1000, d).astype(float), rng.integers(0, 1000, d).astype(float)) for d in (1, 7, 100, 10_001)]
    cases += [(near, np.zeros(near.size)), (np.zeros(near.size), near), (near[:2], np.zeros(2))]
    for last, counts in cases:
        assert min(compiled.whole_distance()(last, counts), 2.0**52) == min(float(np.abs(last - counts).sum()), 2.0**52)
        fast = private_mean_distance(counts, last, 0.5, "discrete", derived(4), 1, whole=True)
        with compiled.disabled():
            assert fast == private_mean_distance(counts, last, 0.5, "discrete", derived(4), 1, whole=True)


# 13. privacy-loss replay --------------------------------------------------------------------
@pytest.mark.parametrize("cls", ALL)
@pytest.mark.parametrize("w", [1, 3, 6])
def test_privacy_loss_of_neighbouring_stream_is_within_the_ledger(cls, w):
    """Same transcript, neighbouring input: the log-likelihood ratio is bounded by the spend."""
    d, slots = 4, 30
    for seed in range(5):
        rng = np.random.default_rng(seed)
        counts = random_counts(rng, slots, d, scale=float(rng.choice([3.0, 300.0])))
        m = cls(1.0, w, d, randomness=derived(seed))
        results = m.run(counts)
        start = int(rng.integers(0, slots - w))
        length = int(rng.integers(1, w + 1))
        changed = counts.copy()
        for i in range(start, start + length):
            j = int(rng.integers(0, d))
            changed[i, j] += 1 if changed[i, j] == 0 or rng.random() < 0.5 else -1
        loss = 0.0
        scale1 = m.dissimilarity_measure.scale if m.dissimilarity_measure is not None else None
        for i, r in enumerate(results):
            last = results[i - 1].release if i else np.zeros(d)
            if r.dissimilarity is not None:
                dis = np.abs(last - counts[i]).mean()
                dis_changed = np.abs(last - changed[i]).mean()
                loss += (abs(r.dissimilarity - dis_changed) - abs(r.dissimilarity - dis)) / scale1
            if r.published:
                lam2 = 1.0 / r.eps2
                loss += (np.abs(r.release - changed[i]) - np.abs(r.release - counts[i])).sum() / lam2
        spent = sum(r.eps1 + r.eps2 for r in results[start : start + length])
        assert loss <= spent + 1e-9


# 14. determinism ----------------------------------------------------------------------------
@pytest.mark.parametrize("cls", ALL)
def test_same_seed_same_releases_other_seed_other_releases(cls):
    counts = random_counts(np.random.default_rng(1), 40, 3)
    a = [r.release for r in cls(1.0, 4, 3, randomness=derived(1)).run(counts)]
    b = [r.release for r in cls(1.0, 4, 3, randomness=derived(1)).run(counts)]
    c = [r.release for r in cls(1.0, 4, 3, randomness=derived(2)).run(counts)]
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))


# 15. validation -----------------------------------------------------------------------------
@pytest.mark.parametrize("cls", ALL)
@pytest.mark.parametrize(
    "eps, w, d",
    [(0, 3, 2), (-1, 3, 2), (float("nan"), 3, 2), (float("inf"), 3, 2), (1, 0, 2), (1, 2.5, 2), (1, 3, 0), ("1", 3, 2)],
)
def test_invalid_parameters_raise(cls, eps, w, d):
    with pytest.raises(ParameterError):
        cls(eps, w, d, randomness=derived())


@pytest.mark.parametrize("cls", ALL)
def test_wrong_histogram_length_or_nan_raises(cls):
    m = cls(1.0, 3, 4, randomness=derived())
    with pytest.raises(ParameterError):
        m.step(np.ones(5))
    with pytest.raises(ParameterError):
        m.step(np.array([1.0, np.nan, 0, 0]))
    assert m.slot == 0  # a rejected slot does not advance the mechanism


# options ------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [BudgetDistribution, BudgetAbsorption])
def test_force_first_publish(zero_noise, cls):
    results = cls(1.0, 3, 2, randomness=zero_noise, force_first_publish=True, decision_override=lambda s: False if s > 1 else None).run(np.zeros((3, 2)))
    assert results[0].published and not any(r.published for r in results[1:])


@pytest.mark.parametrize("cls", [BudgetDistribution, BudgetAbsorption])
def test_budget_shift_moves_budget_to_publications_only_when_d_exceeds_2w(cls):
    wide = cls(1.0, 5, 100, randomness=derived(), budget_shift=True)
    assert wide.dissimilarity_measure.eps1 == pytest.approx(1.0 / 100)
    assert wide.dissimilarity_measure.publication_pool == pytest.approx(1.0 - 5 / 100)
    narrow = cls(1.0, 5, 8, randomness=derived(), budget_shift=True)
    assert narrow.dissimilarity_measure.eps1 == pytest.approx(1.0 / 10)
    ledger = ledger_of(wide.run(random_counts(np.random.default_rng(0), 60, 100)), 5)
    assert ledger.max_window_spend() <= 1.0 + TOL


def test_clamp_round_post_processes_releases():
    results = Uniform(0.1, 5, 50, randomness=derived(), clamp_round=True).run(np.zeros((3, 50)))
    for r in results:
        assert (r.release >= 0).all() and np.array_equal(r.release, np.rint(r.release))


def test_mismatched_dissimilarity_slot_is_rejected():
    m = BudgetDistribution(1.0, 3, 2, randomness=derived())
    d = m.measure(np.ones(2))
    m.step(np.ones(2))
    with pytest.raises(ParameterError):
        m.publish(np.ones(2), d)
