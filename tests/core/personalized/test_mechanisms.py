"""PBD and PBA: the paper's examples, every user's window bound and share counts, state, options."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import derived, random_counts, scripted
from wevent.core.base import Strategy, restore
from wevent.core.central import BudgetAbsorption, BudgetDistribution
from wevent.core.data import ABSENT
from wevent.core.personalized import (
    PersonalizedBudgetAbsorption as PBA,
)
from wevent.core.personalized import (
    PersonalizedBudgetDistribution as PBD,
)
from wevent.core.personalized import (
    PersonalizedLedger,
    Requirements,
    grouped,
    keep_probabilities,
    obs,
    type_histogram,
)
from wevent.core.randomness import DerivedRandomness, Phase, SecretKey, ZeroNoise
from wevent.core.validation import ParameterError

TOL = 1e-12


def zero():
    return ZeroNoise(SecretKey.from_seed(0))


def ones(types, d=2):
    """A slot where every user of every type holds value 0."""
    return np.array([[1] + [0] * (d - 1)] * types)


def shares(mechanism, results):
    return [np.rint(r.type_eps2 / mechanism.share_budgets).astype(int).tolist() for r in results]


# 5-6. PBD schedules ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "lookback, expected",
    [
        ("paper", ["1", "1/2", "1/4", "1/8", "9/16", "17/32", "25/64", "33/128", "105/256", "241/512"]),
        ("artifact", ["1", "1/2", "1/4", "1/8", "1/16", "17/32", "33/64", "49/128", "65/256", "81/512"]),
    ],
)
def test_pbd_all_release_schedule(lookback, expected):
    m = PBD([4], [4.0], [1], 2, lookback=lookback, randomness=zero(), decision_override=lambda s: True)
    results = m.run([ones(1)] * 10)
    spent = [r.type_eps2[0] for r in results]
    assert spent == pytest.approx([float(Fraction(f)) for f in expected], abs=TOL)
    assert max(sum(spent[i : i + 4]) for i in range(7)) <= 1.875 + TOL
    assert all(r.published for r in results)


def test_pbd_example_3():
    m = PBD([4], [1.0], [1], 2, randomness=zero(), decision_override=scripted([True, False, True]))
    results = m.run([ones(1)] * 3)
    assert [r.type_eps2[0] for r in results] == pytest.approx([1 / 4, 0, 1 / 8], abs=TOL)
    assert all(r.type_eps1[0] == pytest.approx(1 / 8, abs=TOL) for r in results)
    assert [r.strategy for r in results] == [Strategy.PUBLISH, Strategy.APPROXIMATE, Strategy.PUBLISH]


# 7-9. PBA schedules ----------------------------------------------------------------------------
def test_pba_example_4():
    m = PBA([4, 2, 3], [1.0, 2.0, 3.0], [1, 1, 1], 2, randomness=zero(), decision_override=scripted([True, False, True, True, True]))
    results = m.run([ones(3)] * 5)
    assert shares(m, results) == [[1] * 3, [0] * 3, [2] * 3, [0] * 3, [1] * 3]
    assert results[3].strategy is Strategy.NULLIFIED
    assert results[2].type_eps2 == pytest.approx([1.0 / 4, 2.0 / 2, 3.0 / 3], abs=TOL)
    assert results[4].type_eps2 == pytest.approx([1.0 / 8, 2.0 / 4, 3.0 / 6], abs=TOL)


@pytest.mark.parametrize("intent_in_nullified", [True, False])
def test_pba_single_user_long_skip(intent_in_nullified):
    intents = [True, False, False, False, True] + [intent_in_nullified] * 3 + [True]
    m = PBA([4], [1.0], [1], 2, randomness=zero(), decision_override=scripted(intents))
    results = m.run([ones(1)] * 9)
    assert [s[0] for s in shares(m, results)] == [1, 0, 0, 0, 4, 0, 0, 0, 1]
    assert [r.strategy for r in results[5:8]] == [Strategy.NULLIFIED] * 3


def test_pba_two_users_with_different_windows():
    m = PBA([2, 6], [1.0, 1.0], [1, 1], 2, randomness=zero(), decision_override=scripted([True] + [False] * 6 + [True] * 8))
    results = m.run([ones(2)] * 15)
    got = shares(m, results)
    assert {t: got[t - 1] for t in (1, 8, 14)} == {1: [1, 1], 8: [2, 6], 14: [2, 1]}
    assert all(sum(got[t - 1]) == 0 for t in range(2, 8))
    assert [r.strategy for r in results[8:13]] == [Strategy.NULLIFIED] * 5
    assert results[14].strategy is Strategy.NULLIFIED  # user 1's 2 shares at t14 idle everyone for a slot


# edge cases ------------------------------------------------------------------------------------
def test_window_one_users():
    # PBD: eps/2 + eps/4 per release; PBA: the w = 1 user always takes 1 share, yet a w = 3 user's
    # absorbed release still nullifies the next slots for everyone.
    pbd = PBD([1], [2.0], [1], 2, randomness=zero(), decision_override=lambda s: True)
    assert all(r.type_eps1[0] + r.type_eps2[0] == pytest.approx(1.0 + 0.5, abs=TOL) for r in pbd.run([ones(1)] * 5))
    pba = PBA([1, 3], [1.0, 1.0], [1, 1], 2, randomness=zero(), decision_override=scripted([True, False, False, True, True, True]))
    results = pba.run([ones(2)] * 6)
    assert shares(pba, results) == [[1, 1], [0, 0], [0, 0], [1, 3], [0, 0], [0, 0]]
    assert [r.strategy for r in results[4:]] == [Strategy.NULLIFIED] * 2


# 10. invariants I1-I6 over random populations (n <= 48, w_i <= 12, T <= 200) and scripted decisions
populations = st.lists(st.tuples(st.integers(1, 12), st.sampled_from([0.1, 0.5, 1.0, 2.0, 4.0]), st.integers(1, 8)),
                       min_size=1, max_size=6)


def random_type_counts(rng, sizes, d, slots):
    """Each slot: every user of every type at a uniformly random value (an honest (types, d) matrix)."""
    return [np.stack([rng.multinomial(n, np.full(d, 1 / d)) for n in sizes]) for _ in range(slots)]


def per_user_window_sums(per_slot, w):
    """Independent of the ledger: the sum over the last w slots by convolution."""
    return np.convolve(per_slot, np.ones(w))[: per_slot.size]


def check_invariants(mechanism, results, decisions):
    types = mechanism.types
    user_types = np.repeat(np.arange(types.count), types.sizes)
    eps1 = np.array([r.type_eps1 for r in results])[:, user_types]
    eps2 = np.array([r.type_eps2 for r in results])[:, user_types]
    slots = len(results)
    for i, k in enumerate(user_types):
        w, eps = int(types.windows[k]), float(types.epsilons[k])
        total = per_user_window_sums(eps1[:, i] + eps2[:, i], w)
        assert total.max() <= eps * (1 + TOL)  # I1
        dc = per_user_window_sums(eps1[:, i], w)
        assert dc == pytest.approx(np.minimum(np.arange(1, slots + 1), w) * eps / (2 * w), rel=TOL)  # I2
        publications = per_user_window_sums(eps2[:, i], w)
        if isinstance(mechanism, PBD):  # I3, with the tighter regression bound
            assert publications.max() <= eps / 2 * (1 - 2.0**-w) * (1 + TOL)
        else:
            assert (publications / mechanism.share_budgets[k]).max() <= w + 1e-9
    ledger = PersonalizedLedger.for_mechanism(mechanism)
    for r in results:
        ledger.record(r)
    assert not ledger.violations()
    assert ledger.max_spend_ratio() <= 1 + TOL
    assert ledger.max_window_spend() <= mechanism.window_spend_bound + TOL
    assert np.all(ledger.type_window_spend().max(axis=0) <= mechanism.type_window_spend_bounds * (1 + TOL))
    for i in range(0, user_types.size, 7):
        assert np.array_equal(ledger.user_charges(user_types, i), eps1[:, i] + eps2[:, i])
    # I6: null slots repeat the previous vector exactly.
    previous = np.zeros(mechanism.domain_size)
    for r in results:
        if not r.published:
            assert np.array_equal(r.release, previous) and r.type_eps2.max() == 0
        previous = r.release
    if isinstance(mechanism, PBA):  # I4
        for t, r in enumerate(results):
            if r.published:
                k = r.type_eps2 / mechanism.share_budgets
                assert np.allclose(k, np.rint(k), atol=1e-9) and np.all((np.rint(k) >= 1) & (np.rint(k) <= types.windows))
                idle = int(np.rint(k).max()) - 1
                assert all(x.strategy is Strategy.NULLIFIED for x in results[t + 1 : t + 1 + idle])
                if t + 1 + idle < slots:
                    assert results[t + 1 + idle].strategy is not Strategy.NULLIFIED
            elif r.strategy is not Strategy.NULLIFIED:
                assert not decisions[t]
    else:
        assert [r.published for r in results] == decisions


@settings(max_examples=80, deadline=None)
@given(populations, st.lists(st.booleans(), min_size=1, max_size=200), st.integers(0, 2**31), st.sampled_from(["paper", "artifact"]))
def test_pbd_invariants(population, decisions, seed, lookback):
    windows, epsilons, sizes = zip(*population)
    m = PBD(windows, epsilons, sizes, 3, lookback=lookback, randomness=derived(seed), decision_override=scripted(decisions))
    rng = np.random.default_rng(seed)
    results = []
    for counts in random_type_counts(rng, sizes, 3, len(decisions)):
        budgets = m.publication_budgets(m.slot + 1)
        assert np.all(budgets > 0)  # I5
        # half of what is left, rounded down onto each type's grid
        halves = [Fraction(r) / 2 for r in m.remaining_budgets()]
        assert all(half - Fraction(g) < Fraction(b) <= half for b, half, g in zip(budgets, halves, m.types.grids))
        results.append(m.step(counts))
        if results[-1].published:
            assert np.all(m.remaining_budgets() >= results[-1].type_eps2 * (1 - TOL))
    check_invariants(m, results, decisions)


@settings(max_examples=80, deadline=None)
@given(populations, st.lists(st.booleans(), min_size=1, max_size=200), st.integers(0, 2**31))
def test_pba_invariants(population, decisions, seed):
    windows, epsilons, sizes = zip(*population)
    m = PBA(windows, epsilons, sizes, 3, randomness=derived(seed), decision_override=scripted(decisions))
    counts = random_type_counts(np.random.default_rng(seed), sizes, 3, len(decisions))
    check_invariants(m, m.run(counts), decisions)


# I6: the output depends on the sampled users only --------------------------------------------
class PerUserCoins:
    """Test double of SM_s: one fixed Bernoulli coin per user and (slot, phase), on per-user values."""

    def __init__(self, user_types, domain_size, seed):
        self.user_types, self.domain_size, self.seed = user_types, domain_size, seed
        self.values = None  # the current slot's per-user values, set by the test

    def mask(self, probabilities, slot, phase):
        coins = np.random.default_rng([self.seed, slot, int(phase)]).random(self.user_types.size)
        return coins < probabilities[self.user_types]

    def __call__(self, counts, probabilities, randomness, slot, phase):
        kept = np.where(self.mask(probabilities, slot, phase), self.values, ABSENT)
        return type_histogram(kept, self.user_types, counts.shape[0], self.domain_size)


@pytest.mark.parametrize("cls", [PBD, PBA])
def test_output_depends_only_on_sampled_users(cls):
    requirements = Requirements([10, 10, 40, 40] * 10, [2.0, 0.5, 2.0, 0.5] * 10)
    d, slots = 3, 60
    rng = np.random.default_rng(6)
    values = rng.integers(0, d, (slots, requirements.users))

    def run(data, coins):
        m = cls.for_requirements(requirements, d, randomness=derived(6))
        m._sample = coins  # the publication's SM_s ...
        m.dissimilarity_measure.sampler = coins  # ... and DC's
        out = []
        for row in data:
            coins.values = row
            out.append(m.step(requirements.type_counts(row, d)))
        return out

    coins = PerUserCoins(requirements.user_types, d, seed=60)
    base = run(values, coins)
    outside = values.copy()
    p1 = cls.for_requirements(requirements, d, randomness=derived(6)).dissimilarity_measure.probabilities
    unsampled = 0
    for t in range(1, slots + 1):
        in_any = coins.mask(p1, t, Phase.SAMPLE_DISSIMILARITY)
        if base[t - 1].published:
            budgets = base[t - 1].type_eps2
            in_any |= coins.mask(keep_probabilities(budgets, base[t - 1].theta), t, Phase.SAMPLE_PUBLICATION)
        out = ~in_any
        outside[t - 1, out] = (values[t - 1, out] + 1) % d
        unsampled += int(out.sum())
    assert unsampled > 0
    changed = run(outside, coins)
    for a, b in zip(base, changed):
        assert np.array_equal(a.release, b.release) and a.dissimilarity == b.dissimilarity and a.strategy is b.strategy
    # Not vacuous: changing the sampled users does change the dissimilarity.
    inside = (values + 1) % d
    assert any(a.dissimilarity != b.dissimilarity for a, b in zip(base, run(inside, coins)))


class RecordingRandomness(DerivedRandomness):
    """Records every (slot, phase) at which a generator is built or noise (of either kind) drawn."""

    def __init__(self, key, stream="test"):
        super().__init__(key, stream)
        self.generators, self.laplaces = [], []

    def generator(self, slot, phase, block=0):
        self.generators.append((slot, Phase(phase)))
        return super().generator(slot, phase, block)

    def laplace(self, slot, phase, scale, size=None):
        self.laplaces.append((slot, Phase(phase)))
        return super().laplace(slot, phase, scale, size)

    def discrete_laplace(self, slot, phase, epsilon, size=None):
        self.laplaces.append((slot, Phase(phase)))
        return super().discrete_laplace(slot, phase, epsilon, size)


@pytest.mark.parametrize("cls", [PBD, PBA])
def test_each_slot_draws_at_most_two_samples_and_null_slots_draw_no_publication(cls):
    requirements = grouped(400, 0.6, 20, seed=2)
    randomness = RecordingRandomness(SecretKey.from_seed(2))
    m = cls.for_requirements(requirements, 2, randomness=randomness)
    data = np.random.default_rng(2).integers(0, 2, (80, 400))
    results = m.run(requirements.type_counts(row, 2) for row in data)
    published = {r.slot for r in results if r.published}
    assert published and len(published) < 80
    assert len(randomness.generators) == len(set(randomness.generators))  # one per (slot, phase)
    assert {p for _, p in randomness.generators} <= {Phase.SAMPLE_DISSIMILARITY, Phase.SAMPLE_PUBLICATION}
    assert {s for s, p in randomness.generators if p is Phase.SAMPLE_PUBLICATION} <= published
    assert {s for s, p in randomness.laplaces if p is Phase.PUBLICATION} == published
    assert sorted(s for s, p in randomness.laplaces if p is Phase.DISSIMILARITY) == list(range(1, 81))


# 11. equivalence with BD and BA ---------------------------------------------------------------
@pytest.mark.parametrize("personalized, central", [(PBD, BudgetDistribution), (PBA, BudgetAbsorption)])
@pytest.mark.parametrize("w, eps, d", [(1, 1.0, 3), (3, 0.5, 1), (7, 2.0, 4), (40, 1.0, 2)])
@pytest.mark.parametrize("options", [{}, {"force_first_publish": True, "clamp_round": True}])
def test_identical_users_with_scale_threshold_equal_bd_and_ba_exactly(personalized, central, w, eps, d, options):
    published = 0
    for seed in range(3):
        rng = np.random.default_rng(seed)
        counts = random_counts(rng, 3 * w + 60, d, scale=float(rng.choice([5.0, 500.0])))
        p = personalized([w], [eps], [10**6], d, threshold="scale", randomness=derived(seed), **options)
        c = central(eps, w, d, randomness=derived(seed), **options)
        for x, y in zip(p.run(counts[:, None, :].astype(int)), c.run(counts)):
            assert x.strategy is y.strategy
            assert np.array_equal(x.release, y.release)
            assert x.dissimilarity == y.dissimilarity and x.threshold == y.threshold
            assert x.type_eps2[0] == y.eps2 and x.type_eps1[0] == y.eps1
            published += x.published
    assert 0 < published  # the comparison covered publications


def test_default_threshold_is_sqrt_of_the_error():
    m = PBD([4], [1.0], [5], 2, randomness=derived())
    r = m.step(np.array([[3, 2]]))
    assert r.threshold == pytest.approx(np.sqrt(2) / (1.0 / 4), rel=TOL)  # one type: err = 2/theta^2


# 16. constant stream and huge budgets -------------------------------------------------------
@pytest.mark.parametrize("cls", [PBD, PBA])
def test_constant_stream_publishes_at_slot_one(cls):
    # Default mix, n = 10^4 users, all at value 0. The publication threshold is at most
    # sqrt(2)/min e2 (Lemma 4.1), min e2 >= min eps/(2 max w) = 0.0025, i.e. <= 566; DC keeps about
    # n users, so dis ~ n/d = 5000 minus Lap(1/(d theta_1)) with theta_1 >= 0.0025, scale <= 200:
    # P(skip) <= exp(-(5000 - 566)/200)/2 < 1e-9 per seed.
    requirements = grouped(10_000, 0.6, 120, seed=1)
    counts = requirements.type_counts(np.zeros(10_000, dtype=np.int64), 2)
    for seed in range(20):
        m = cls.for_requirements(requirements, 2, randomness=derived(seed))
        assert m.step(counts).published


@pytest.mark.parametrize("cls, changing", [(PBD, False), (PBA, False), (PBD, True)])
def test_error_vanishes_with_huge_budgets(cls, changing):
    # eps_i ~ 1e6 with w_i <= 4: every budget is >= 1e6/2^5, so the noise variance is <= 2/(3e4)^2 ~ 2e-9
    # and the dissimilarity's noise is as small. On the constant stream slot 1
    # publishes and later slots repeat an almost exact release; PBD also follows a changing stream,
    # since any change of the counts exceeds its threshold (PBA would idle nullified slots there).
    requirements = Requirements([1, 2, 3, 4] * 25, [1e6, 2e6, 1.5e6, 3e6] * 25)
    rng = np.random.default_rng(3)
    data = rng.integers(0, 3, (100, 100)) if changing else np.tile(rng.integers(0, 3, 100), (100, 1))
    m = cls.for_requirements(requirements, 3, randomness=derived(3))
    results = m.run(requirements.type_counts(row, 3) for row in data)
    truth = np.array([np.bincount(row, minlength=3) for row in data])
    assert np.mean((np.array([r.release for r in results]) - truth) ** 2) < 1e-6


# state, split, determinism ----------------------------------------------------------------------
@pytest.mark.parametrize("cls", [PBD, PBA])
@pytest.mark.parametrize("encoding", ["bytes", "json"])
def test_state_restores_mid_stream_with_identical_continuation(cls, encoding):
    requirements = grouped(300, 0.6, 40, seed=5)
    data = [requirements.type_counts(row, 4) for row in np.random.default_rng(5).integers(0, 4, (120, 300))]
    whole = cls.for_requirements(requirements, 4, randomness=derived(5)).run(data)
    first = cls.for_requirements(requirements, 4, randomness=derived(5))
    head = first.run(data[:50])
    saved = first.to_bytes() if encoding == "bytes" else first.to_json()
    resumed = restore(saved, derived(5))
    assert type(resumed) is cls and resumed.slot == 50
    tail = resumed.run(data[50:])
    for a, b in zip(whole, head + tail):
        assert a.slot == b.slot and a.strategy is b.strategy and np.array_equal(a.release, b.release)
        assert np.array_equal(a.type_eps2, b.type_eps2)
    assert sum(r.published for r in tail) > 0


@pytest.mark.parametrize("cls", [PBD, PBA])
def test_measure_then_publish_equals_step(cls):
    requirements = grouped(200, 0.6, 20, seed=4)
    data = [requirements.type_counts(row, 2) for row in np.random.default_rng(4).integers(0, 2, (40, 200))]
    stepped = cls.for_requirements(requirements, 2, randomness=derived(4)).run(data)
    split = cls.for_requirements(requirements, 2, randomness=derived(4))
    for counts, expected in zip(data, stepped):
        got = split.publish(counts, split.measure(counts))
        assert np.array_equal(got.release, expected.release) and got.dissimilarity == expected.dissimilarity
    with pytest.raises(ParameterError, match="slot"):
        early = split.measure(data[0])
        split.step(data[0])
        split.publish(data[0], early)


@pytest.mark.parametrize("cls", [PBD, PBA])
def test_same_seed_same_releases_other_seed_other_releases(cls):
    requirements = grouped(200, 0.6, 20, seed=4)
    data = [requirements.type_counts(row, 2) for row in np.random.default_rng(4).integers(0, 2, (40, 200))]
    a, b, c = (cls.for_requirements(requirements, 2, randomness=derived(s)).run(data) for s in (1, 1, 2))
    assert all(np.array_equal(x.release, y.release) for x, y in zip(a, b))
    assert not all(np.array_equal(x.release, z.release) for x, z in zip(a, c))


@pytest.mark.parametrize("cls", [PBD, PBA])
def test_types_give_the_same_charges_as_per_user_bookkeeping(cls):
    requirements = Requirements([3, 5, 3, 8, 5, 3, 1], [1.0, 0.5, 1.0, 2.0, 0.5, 1.0, 0.3])
    decisions = list(np.random.default_rng(8).random(60) < 0.6)
    grouped_m = cls.for_requirements(requirements, 2, randomness=derived(8), decision_override=scripted(decisions))
    per_user = cls(requirements.windows, requirements.epsilons, np.ones(requirements.users), 2, randomness=derived(8),
                   decision_override=scripted(decisions))
    user_index = np.arange(requirements.users)
    for row in np.random.default_rng(9).integers(0, 2, (60, requirements.users)):
        a = grouped_m.step(requirements.type_counts(row, 2))
        b = per_user.step(type_histogram(row, user_index, requirements.users, 2))
        assert a.strategy is b.strategy and a.theta == b.theta
        assert np.array_equal(a.type_eps1[requirements.user_types], b.type_eps1)
        assert np.array_equal(a.type_eps2[requirements.user_types], b.type_eps2)
    assert grouped_m.dissimilarity_measure.theta == per_user.dissimilarity_measure.theta


# options ----------------------------------------------------------------------------------------
def test_pba_artifact_compat_is_flagged_non_private_and_breaks_the_window():
    decide_all = dict(randomness=zero(), decision_override=lambda s: True)
    private = PBA([3], [1.0], [1], 2, **decide_all)
    broken = PBA([3], [1.0], [1], 2, artifact_compat_nonprivate=True, **decide_all)
    assert [s[0] for s in shares(broken, broken.run([ones(1)] * 6))] == [1, 2, 3, 3, 3, 3]
    ledger, bad = PersonalizedLedger.for_mechanism(private), PersonalizedLedger.for_mechanism(broken)
    for r in private.run([ones(1)] * 6):
        ledger.record(r)
    broken_again = PBA([3], [1.0], [1], 2, artifact_compat_nonprivate=True, **decide_all)
    for r in broken_again.run([ones(1)] * 6):
        bad.record(r)
    assert ledger.max_spend_ratio() <= 1 and not ledger.violations()
    assert bad.max_spend_ratio() > 1 and bad.violations()
    assert broken.window_spend_bound > 1.0  # its stated bound admits the overspend


def test_dc_obs_sensitivity_changes_only_the_threshold_choice():
    requirements = grouped(2000, 0.6, 120, seed=1)
    d = 50
    default = PBD.for_requirements(requirements, d, randomness=derived())
    exact = PBD.for_requirements(requirements, d, randomness=derived(), dc_obs_sensitivity=1 / d)
    budgets, sizes = requirements.types.dissimilarity_budgets, requirements.types.sizes
    assert default.dissimilarity_measure.theta == obs(budgets, sizes).theta
    assert exact.dissimilarity_measure.theta == obs(budgets, sizes, 1 / d).theta
    assert exact.dissimilarity_measure.scale == (1 / d) / exact.dissimilarity_measure.theta
    assert np.array_equal(default.dissimilarity_measure.budgets, exact.dissimilarity_measure.budgets)


def test_strictest_pair_and_spend_bounds():
    m = PBD([40, 120, 80], [1.0, 0.6, 0.8], [5, 5, 5], 2, randomness=derived())
    assert (m.window, m.epsilon) == (120, 0.6)
    assert np.all(m.type_window_spend_bounds <= m.types.epsilons)
    p = PBA([40, 120, 80], [1.0, 0.6, 0.8], [5, 5, 5], 2, randomness=derived())
    assert p.type_window_spend_bounds == pytest.approx(p.types.epsilons, rel=TOL)


# validation -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs",
    [
        dict(windows=[0], epsilons=[1.0], sizes=[1]),
        dict(windows=[2.5], epsilons=[1.0], sizes=[1]),
        dict(windows=[3], epsilons=[0.0], sizes=[1]),
        dict(windows=[3], epsilons=[float("nan")], sizes=[1]),
        dict(windows=[3], epsilons=[1.0], sizes=[0]),
        dict(windows=[3, 4], epsilons=[1.0], sizes=[1]),
        dict(windows=[], epsilons=[], sizes=[]),
    ],
)
def test_invalid_requirement_types_raise(kwargs):
    with pytest.raises(ParameterError):
        PBD(domain_size=2, randomness=derived(), **kwargs)


def test_invalid_options_raise():
    with pytest.raises(ParameterError, match="threshold"):
        PBA([3], [1.0], [1], 2, threshold="sqrt", randomness=derived())
    with pytest.raises(ParameterError, match="lookback"):
        PBD([3], [1.0], [1], 2, lookback="both", randomness=derived())


@pytest.mark.parametrize("cls", [PBD, PBA])
@pytest.mark.parametrize(
    "counts, message",
    [
        (np.array([[1, 1, 0]]), "shape"),
        (np.array([1, 1]), "shape"),
        (np.array([[1, 1], [-1, 0]]), ">= 0"),
        (np.array([[1.5, 1], [0, 0]]), "whole"),
        (np.array([[np.nan, 1], [0, 0]]), "whole"),
        (np.array([[2, 2], [0, 0]]), "registered"),
    ],
)
def test_bad_type_counts_raise_and_do_not_advance(cls, counts, message):
    m = cls([3, 4], [1.0, 2.0], [3, 5], 2, randomness=derived())
    with pytest.raises(ParameterError, match=message):
        m.step(counts)
    assert m.slot == 0
    assert m.step(np.array([[2.0, 1.0], [0, 5]])).slot == 1  # whole floats are accepted


def test_samples_drawn_ahead_are_the_slots_own_and_shared_by_pbd_and_pba():
    """run() draws DC's samples of a chunk ahead, and the mechanisms of one key and requirements share
    them; each slot's must still be the one its own step draws, the cached ones included."""
    requirements = Requirements([10, 10, 40, 40] * 30, [2.0, 0.5, 2.0, 0.5] * 30)
    data = np.stack([requirements.type_counts(row, 3) for row in np.random.default_rng(8).integers(0, 3, (80, 120))])
    assert (PBD.for_requirements(requirements, 3).dissimilarity_measure.probabilities < 1).any()  # DC samples
    for cls in (PBD, PBA, PBD):  # the second PBD reads the samples the first drew
        ran = cls.for_requirements(requirements, 3, randomness=derived(8)).run(data)
        stepping = cls.for_requirements(requirements, 3, randomness=derived(8))
        for counts, expected in zip(data, ran):
            got = stepping.step(counts)
            assert got.dissimilarity == expected.dissimilarity and np.array_equal(got.release, expected.release)
        assert sum(r.published for r in ran) > 0
