"""Exact discrete Laplace noise (pipeline/core/noise.py) and its use by the mechanisms.

Tolerances. The pmf checks are chi-square tests at level 1e-4 with a fixed seed, over bins whose
expected count is at least 20 (the tails pooled), so the chi-square approximation holds. Means of
n i.i.d. values are checked to 5 standard deviations (sqrt(var / n)).
"""

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from tests.conftest import derived
from wevent.core.base import restore
from wevent.core.central import BudgetAbsorption, BudgetDistribution, Sample, Uniform
from wevent.core.decayed import RTPDMM, restore_index
from wevent.core.decayed.lambdas import lambda_table
from wevent.core.decayed.sensitivity import rounding_weights, window_sensitivity
from wevent.core.noise import (
    Expansion,
    discrete_laplace_variance,
    geometric_table,
    noise_variance,
    two_sided_geometric,
)
from wevent.core.personalized import PersonalizedBudgetAbsorption, PersonalizedBudgetDistribution, grouped
from wevent.core.randomness import DerivedRandomness, Phase, SecretKey
from wevent.core.validation import ParameterError


def two_sided_pmf(x: np.ndarray, epsilon: float) -> np.ndarray:
    a = math.exp(-epsilon)
    return (1 - a) / (1 + a) * a ** np.abs(x)


# exactness of the law --------------------------------------------------------------------------
@pytest.mark.parametrize("epsilon", [0.05, 0.3, 1.0, 4.0, 8.0])
def test_samples_follow_the_two_sided_geometric_pmf(epsilon):
    n = 400_000
    x = two_sided_geometric(np.random.PCG64(7), epsilon, n)
    assert x.dtype == np.int64
    a = math.exp(-epsilon)
    tail = lambda k: 2 * a ** (k + 1) / (1 + a)  # noqa: E731  P(|X| > k)
    k = 0  # bins -k..k and one pooled bin |x| > k, every expected count >= 20
    while n * min(tail(k + 1), float(two_sided_pmf(k + 1, epsilon))) >= 20:
        k += 1
    support = np.arange(-k, k + 1)
    observed = np.array([np.count_nonzero(x == v) for v in support] + [np.count_nonzero(np.abs(x) > k)])
    expected = n * np.concatenate([two_sided_pmf(support, epsilon), [tail(k)]])
    assert expected.min() >= 20
    statistic = ((observed - expected) ** 2 / expected).sum()
    assert statistic < stats.chi2.ppf(1 - 1e-4, expected.size - 1)
    # mean and variance against the exact moments: sd of a sample variance is sqrt((m4 - var^2) / n)
    variance = discrete_laplace_variance(epsilon)
    grid = np.arange(-20_000, 20_001)
    m4 = float((grid.astype(float) ** 4 * two_sided_pmf(grid, epsilon)).sum())
    assert abs(x.mean()) < 5 * math.sqrt(variance / n)
    assert abs(x.var() - variance) < 5 * math.sqrt((m4 - variance**2) / n)


def test_the_law_is_symmetric():
    x = two_sided_geometric(np.random.PCG64(8), 0.2, 400_000)
    for v in range(1, 15):  # given |x| = v, the sign is a fair coin: 5 binomial sd
        plus, minus = np.count_nonzero(x == v), np.count_nonzero(x == -v)
        assert abs(plus - minus) < 5 * math.sqrt(plus + minus)


def test_expansion_words_are_the_exact_binary_digits():
    # independent check at 120 digits of 1/(1 + e^y) and e^-y: three 64-bit words each
    for y in (Fraction(3, 10), Fraction(1, 1000) * 2**5, Fraction(7)):
        with localcontext() as context:
            context.prec = 120
            e = (Decimal(y.numerator) / Decimal(y.denominator)).exp()
            for kind, value in {"digit": 1 / (1 + e), "tail": 1 / e}.items():
                expansion = Expansion(kind, y)
                for k in range(3):
                    assert expansion.word(k) == int(value * 2 ** (64 * (k + 1))) % 2**64


def test_a_tied_word_is_settled_by_the_next_words():
    coin = Expansion("digit", Fraction(1, 2))
    w0, w1 = coin.word(0), coin.word(1)
    assert coin.coin_from(iter([w0 - 1])) is True and coin.coin_from(iter([w0 + 1])) is False
    assert coin.coin_from(iter([w0, w1 - 1])) is True  # below v at the second word
    assert coin.coin_from(iter([w0, w1 + 1])) is False
    assert coin.coin_from(iter([w0, w1, coin.word(2) - 1])) is True
    assert coin.coin_from(iter([w1 - 1]), start=1) is True  # a resumed comparison starts at word 1


def test_exact_coins_have_their_probability():
    # the tail's coin loop (run after a rare first success) with a likely coin: P(1) = e^-0.5
    coin, words = Expansion("tail", Fraction(1, 2)), iter(np.random.PCG64(9).random_raw(200_000).tolist())
    draws = np.array([coin.coin_from(words) for _ in range(100_000)])
    p = math.exp(-0.5)
    assert abs(draws.mean() - p) < 5 * math.sqrt(p * (1 - p) / draws.size)


def test_table_stops_where_the_tail_is_negligible():
    for epsilon in (1e-4, 0.025, 1.0, 30.0):
        table = geometric_table(epsilon)
        assert math.exp(-epsilon * 2**table.digits) <= 2.0**-32  # the tail coin: q <= 2^-32
        assert table.digits == 0 or math.exp(-epsilon * 2 ** (table.digits - 1)) > 2.0**-32
    with pytest.raises(ParameterError):
        geometric_table(0.0)


def test_scalar_and_vector_paths_agree_word_for_word():
    for seed in range(50):
        assert two_sided_geometric(np.random.PCG64(seed), 0.4) == two_sided_geometric(np.random.PCG64(seed), 0.4, 1)[0]


# reproducibility ------------------------------------------------------------------------------
def test_noise_is_a_function_of_key_and_coordinates():
    key = SecretKey.from_seed(3)
    a, b = DerivedRandomness(key, "s"), DerivedRandomness(key, "s")
    first = a.discrete_laplace(5, Phase.PUBLICATION, 0.1, 50)
    a.discrete_laplace(3, Phase.PUBLICATION, 0.1, 50)  # call order does not matter
    assert np.array_equal(first, b.discrete_laplace(5, Phase.PUBLICATION, 0.1, 50))
    assert np.array_equal(first, a.discrete_laplace(5, Phase.PUBLICATION, 0.1, 50))
    assert not np.array_equal(first, a.discrete_laplace(6, Phase.PUBLICATION, 0.1, 50))
    assert not np.array_equal(first, DerivedRandomness(key, "t").discrete_laplace(5, Phase.PUBLICATION, 0.1, 50))
    assert a.discrete_laplace(5, Phase.DISSIMILARITY, 0.1) == b.discrete_laplace(5, Phase.DISSIMILARITY, 0.1)


@pytest.mark.parametrize("cls", [BudgetDistribution, BudgetAbsorption])
def test_restored_mechanism_reproduces_every_release(cls):
    counts = np.random.default_rng(1).poisson(40, (60, 8)).astype(float)
    whole = cls(1.0, 5, 8, randomness=derived(1)).run(counts)
    first = cls(1.0, 5, 8, randomness=derived(1))
    first.run(counts[:25])
    rest = restore(first.to_bytes(), derived(1)).run(counts[25:])
    assert all(np.array_equal(a.release, b.release) and a.dissimilarity == b.dissimilarity
               for a, b in zip(whole[25:], rest))


# the mechanisms -------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [Uniform, Sample, BudgetDistribution, BudgetAbsorption])
def test_central_releases_and_dissimilarities_are_integer_queries(cls):
    counts = np.random.default_rng(2).poisson(30, (80, 6)).astype(float)
    m = cls(1.0, 4, 6, randomness=derived(2))
    assert m.noise == "discrete" and m.state_dict()["params"]["noise"] == "discrete"
    results = m.run(counts)
    assert any(r.published for r in results)
    for r in results:
        assert np.array_equal(r.release, np.rint(r.release))
        if r.dissimilarity is not None:  # (integer L1 distance + integer noise) / d
            assert (r.dissimilarity * 6) == pytest.approx(round(r.dissimilarity * 6), abs=1e-9)


def test_uniform_noise_has_the_discrete_mean_absolute_error():
    # E|X| = 2a / (1 - a^2) = 1 / sinh(eps) at the slot budget eps = epsilon / w; sd <= sqrt(var)
    T, d, w, eps = 400, 50, 4, 2.0
    counts = np.full((T, d), 100.0)
    releases = np.stack([r.release for r in Uniform(eps, w, d, randomness=derived(3)).run(counts)])
    budget = eps / w
    expected = 1 / math.sinh(budget)
    assert abs(np.abs(releases - counts).mean() - expected) < 5 * math.sqrt(discrete_laplace_variance(budget) / (T * d))
    assert noise_variance(budget, "discrete") < noise_variance(budget, "laplace")


def test_discrete_noise_refuses_fractional_counts():
    m = Uniform(1.0, 2, 3, randomness=derived(4))
    with pytest.raises(ParameterError, match="whole-number"):
        m.step([1.0, 2.5, 3.0])
    assert Uniform(1.0, 2, 3, randomness=derived(4), noise="laplace").step([1.0, 2.5, 3.0]).published
    with pytest.raises(ParameterError, match="noise must be one of"):
        Uniform(1.0, 2, 3, noise="gaussian")


@pytest.mark.parametrize("cls", [PersonalizedBudgetDistribution, PersonalizedBudgetAbsorption])
def test_personalized_releases_are_integers_and_keep_their_noise_kind(cls):
    requirements = grouped(300, 0.6, 10, seed=4)
    data = np.random.default_rng(4).integers(0, 3, (40, 300))
    m = cls.for_requirements(requirements, 3, randomness=derived(4))
    results = m.run(requirements.type_counts(row, 3) for row in data)
    assert any(r.published for r in results)
    assert all(np.array_equal(r.release, np.rint(r.release)) for r in results)
    assert restore(m.to_bytes(), derived(4)).noise == "discrete"


def test_a_stream_cannot_silently_switch_noise_kinds():
    m = BudgetAbsorption(1.0, 4, 3, randomness=derived(5), noise="laplace")
    m.run(np.ones((5, 3)))
    assert restore(m.to_bytes(), derived(5)).noise == "laplace"
    # a state without its noise kind is of an older layout: refused, never given today's default
    state = m.state_dict()
    del state["params"]["noise"]
    from wevent.core import packing

    with pytest.raises(packing.LayoutError, match=r"^a ba state of an older layout \(without noise\): .* drain the "
                                                  r"stream and start a new one$"):
        restore(packing.pack(state), derived(5))


# Mironov's attack -----------------------------------------------------------------------------
def _continuous_support_contains(y: float, scale: float) -> bool:
    """Is ``y`` in [1, 2) one of the values the scalar Laplace path can output for a true value of 0?

    That path returns ``-scale * log(2 - 2u)`` for u = (k + 0.5) 2^-53 >= 1/2: invert and test the
    neighbouring k exactly (the map is increasing).
    """
    k = int((1 - math.exp(-y / scale) / 2) * 2**53 - 0.5)
    return any(-scale * math.log(2.0 - 2.0 * ((j + 0.5) * 2.0**-53)) == y for j in range(k - 4, k + 5))


def test_continuous_noise_leaks_through_its_low_order_bits_and_discrete_noise_does_not():
    randomness = derived(6)
    noise = np.array([randomness.laplace(slot, Phase.PUBLICATION, 1.0) for slot in range(1, 20_001)])
    from_zero = noise[(noise >= 1) & (noise < 2)]  # outputs in [1, 2) for the true value 0 ...
    from_one = (1.0 + noise)[(noise >= 0) & (noise < 1)]  # ... and for the true value 1
    assert from_zero.size > 1000 and from_one.size > 1000
    assert all(_continuous_support_contains(float(y), 1.0) for y in from_zero)  # the membership test is right
    # Most outputs of 1 + noise are doubles that 0 + noise can never produce: seeing one reveals the input.
    impossible = np.mean([not _continuous_support_contains(float(y), 1.0) for y in from_one])
    assert impossible > 0.5

    # Discrete noise: every output is an integer, reachable from both inputs, with likelihood ratio
    # exactly a^(|y| - |y - 1|) in [e^-eps, e^eps].
    epsilon = 1.0
    x = np.array([randomness.discrete_laplace(slot, Phase.PUBLICATION, epsilon) for slot in range(1, 2001)])
    for y in (0 + x, 1 + x):
        ratio = two_sided_pmf(y, epsilon) / two_sided_pmf(y - 1, epsilon)
        assert np.all(ratio > 0) and np.all(np.abs(np.log(ratio)) <= epsilon + 1e-12)


# snapped real-valued noise (RTP_DMM) ----------------------------------------------------------
def test_rtp_dmm_nodes_lie_on_the_grid_and_keep_their_budget():
    index = RTPDMM(0.5, 16, 0.9, bins=4, privacy_window=3, neighbours=2, randomness=derived(7))
    laplace = RTPDMM(0.5, 16, 0.9, bins=4, privacy_window=3, neighbours=2, noise="laplace", randomness=derived(7))
    rounding = 2 * window_sensitivity(rounding_weights(lambda_table(index.block_size, 0.9, "paper")), 3, 2)
    assert index.grid == 2.0 ** math.floor(math.log2(index.grid)) and index.grid * rounding <= 2**-12 * index.sensitivity
    # calibrated to Δ' = Δ + 2 g R: at most 2^-12 wider than the Laplace scale, never narrower
    ratio = index.node_scales[1:] / laplace.node_scales[1:]
    assert np.all(ratio == pytest.approx((index.sensitivity + index.grid * rounding) / index.sensitivity, rel=1e-12))
    assert np.all(ratio > 1) and np.all(ratio <= 1 + 2**-12)
    assert np.all(index.node_epsilons[1:] * index.node_scales[1:] < index.grid)  # eps_k g-units below the Laplace share
    data = np.random.default_rng(7).poisson(50, (40, 4)) + np.random.default_rng(8).random((40, 4))
    for row in data:
        node = index.insert(row)
        units = node / index.grid
        assert np.array_equal(units, np.rint(units)) and np.all(np.abs(node) <= index.node_clamp)


def test_rtp_dmm_restored_mid_block_releases_the_same_nodes():
    data = np.random.default_rng(9).random((30, 2)) * 100
    whole = RTPDMM(1.0, 16, 0.95, bins=2, block_size=8, randomness=derived(9))
    released = [whole.insert(row) for row in data]
    first = RTPDMM(1.0, 16, 0.95, bins=2, block_size=8, randomness=derived(9))
    for row in data[:13]:  # slot 13: the block of slots 9..16 is open with pending parents
        first.insert(row)
    again = restore_index(first.to_bytes(), derived(9))
    assert again.noise == "discrete"
    assert all(np.array_equal(again.insert(row), r) for row, r in zip(data[13:], released[13:]))
