"""Exact discrete Laplace noise (pipeline/core/noise.py) and its use by the mechanisms.

Tolerances. The pmf checks are chi-square tests at level 1e-4 with a fixed seed, over bins whose
expected count is at least 20 (the tails pooled), so the chi-square approximation holds: each
such test raises a false alarm with probability 1e-4 for a correct sampler (about 1e-3 for all
of them together), and with fixed seeds it either always passes or always fails. Means of n
i.i.d. values are checked to 5 standard deviations (sqrt(var / n)).
"""

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from tests.conftest import derived
from wevent.core import compiled
from wevent.core.base import restore
from wevent.core.central import BudgetAbsorption, BudgetDistribution, Sample, Uniform
from wevent.core.decayed import RTPDMM, restore_index
from wevent.core.decayed.lambdas import lambda_table
from wevent.core.decayed.sensitivity import rounding_weights, window_sensitivity
from wevent.core.noise import (
    ExactThreshold,
    UniformBits,
    discrete_laplace_table,
    discrete_laplace_variance,
    noise_variance,
    two_sided_geometric,
)
from wevent.core.personalized import PersonalizedBudgetAbsorption, PersonalizedBudgetDistribution, grouped
from wevent.core.randomness import DerivedRandomness, Phase, SecretKey
from wevent.core.validation import ParameterError


def two_sided_pmf(x: np.ndarray, epsilon: float) -> np.ndarray:
    a = math.exp(-epsilon)
    return (1 - a) / (1 + a) * a ** np.abs(x)


def draws(seed: int, epsilon: float, n: int) -> np.ndarray:
    """n exact draws from a seeded server key (one vector at slot 1)."""
    return DerivedRandomness(SecretKey.from_seed(seed), "pmf").discrete_laplace(1, Phase.PUBLICATION, epsilon, n)


def chi_square_passes(observed: np.ndarray, expected: np.ndarray) -> bool:
    assert expected.min() >= 20 and observed.sum() == pytest.approx(expected.sum())
    statistic = ((observed - expected) ** 2 / expected).sum()
    return statistic < stats.chi2.ppf(1 - 1e-4, expected.size - 1)


# exactness of the law --------------------------------------------------------------------------
@pytest.mark.parametrize("epsilon", [0.0125, 0.05, 0.3, 1.0, 4.0, 5.0, 8.0])
def test_samples_follow_the_two_sided_geometric_pmf(epsilon):
    n = 400_000
    x = draws(7, epsilon, n)
    assert x.dtype == np.int64
    a = math.exp(-epsilon)
    tail = lambda k: 2 * a ** (k + 1) / (1 + a)  # noqa: E731  P(|X| > k)
    k = 0  # bins -k..k and one pooled bin |x| > k, every expected count >= 20
    while n * min(tail(k + 1), float(two_sided_pmf(k + 1, epsilon))) >= 20:
        k += 1
    support = np.arange(-k, k + 1)
    observed = np.bincount(np.clip(x, -k - 1, k + 1) + k + 1, minlength=2 * k + 3)
    observed = np.concatenate([observed[1:-1], [observed[0] + observed[-1]]])
    expected = n * np.concatenate([two_sided_pmf(support, epsilon), [tail(k)]])
    assert chi_square_passes(observed, expected)
    # mean and variance against the exact moments: sd of a sample variance is sqrt((m4 - var^2) / n)
    variance = discrete_laplace_variance(epsilon)
    grid = np.arange(-20_000, 20_001)
    m4 = float((grid.astype(float) ** 4 * two_sided_pmf(grid, epsilon)).sum())
    assert abs(x.mean()) < 5 * math.sqrt(variance / n)
    assert abs(x.var() - variance) < 5 * math.sqrt((m4 - variance**2) / n)


@pytest.mark.parametrize("epsilon", [1e-3, 1e-5, 2.4e-7])
def test_small_epsilons_follow_the_law_through_the_tail(epsilon):
    """Below epsilon ~ 0.0056 almost every value is drawn by the tail's digits (radix 256, then the
    last digit). Bins of |X| between quantiles of the exact law P(|X| >= k) = 2a^k / (1 + a)."""
    n = 200_000
    x = draws(8, epsilon, n)
    a = math.exp(-epsilon)
    at_least = lambda k: np.where(k == 0, 1.0, 2 * np.exp(-epsilon * k) / (1 + a))  # noqa: E731
    cuts = np.unique(np.ceil(-np.log(np.linspace(1, 0, 101)[1:-1] * (1 + a) / 2) / epsilon).astype(np.int64))
    edges = np.concatenate([[0], cuts])
    observed = np.histogram(np.abs(x), bins=np.concatenate([edges, [np.abs(x).max() + 1]]))[0]
    expected = n * (at_least(edges) - np.concatenate([at_least(edges[1:]), [0.0]]))
    assert chi_square_passes(observed, expected)
    positive, nonzero = np.count_nonzero(x > 0), np.count_nonzero(x)  # the sign: a fair coin, 5 binomial sd
    assert abs(positive - nonzero / 2) < 5 * math.sqrt(nonzero / 4)


def test_the_law_is_symmetric():
    x = draws(8, 0.2, 400_000)
    for v in range(1, 15):  # given |x| = v, the sign is a fair coin: 5 binomial sd
        plus, minus = np.count_nonzero(x == v), np.count_nonzero(x == -v)
        assert abs(plus - minus) < 5 * math.sqrt(plus + minus)


def test_threshold_digits_are_the_exact_binary_digits():
    # independent check at 120 digits of e^-(y r), 2 e^-(y r) / (1 + e^-y) and the truncated digit: three words each
    for y in (Fraction(3, 10), Fraction(1, 1000) * 2**5, Fraction(7)):
        with localcontext() as context:
            context.prec = 120
            e = lambda z: (-(Decimal(z.numerator) / Decimal(z.denominator))).exp()  # noqa: E731
            values = {("power", 2, 0): e(2 * y), ("two-sided", 3, 0): 2 * e(3 * y) / (1 + e(y)),
                      ("truncated", 2, 5): (e(2 * y) - e(5 * y)) / (1 - e(5 * y))}
            for (kind, r, n), value in values.items():
                threshold = ExactThreshold(kind, y, r, n)
                assert threshold.prefix(63) == int(value * 2**63)
                for k in range(3):
                    assert threshold.prefix(63 + 64 * (k + 1)) % 2**64 == int(value * 2 ** (63 + 64 * (k + 1))) % 2**64


def test_a_tied_word_is_settled_by_the_next_words():
    coin = ExactThreshold("two-sided", Fraction(1, 2), 1)
    u, w1 = coin.prefix(63), coin.prefix(127) % 2**64
    below = lambda first, *more: coin.above(UniformBits(first, iter(more)))  # noqa: E731
    assert below(u - 1) is True and below(u + 1) is False
    assert below(u, w1 - 1) is True  # below t at the second word
    assert below(u, w1 + 1) is False
    assert below(u, w1, coin.prefix(191) % 2**64 - 1) is True
    with pytest.raises(RuntimeError, match="ran out"):
        below(u, w1)


def test_exact_coins_have_their_probability():
    # the comparison of a uniform with an exact threshold, with a likely coin: P(U < e^-0.5) = e^-0.5
    coin, words = ExactThreshold("power", Fraction(1, 2), 1), np.random.default_rng(9).integers(0, 2**63, 100_000)
    draws_ = np.array([coin.above(UniformBits(int(w), iter(()))) for w in words if w != coin.prefix(63)])
    p = math.exp(-0.5)
    assert abs(draws_.mean() - p) < 5 * math.sqrt(p * (1 - p) / draws_.size)


def test_table_stops_where_the_tail_is_negligible():
    for epsilon in (1e-4, 0.025, 1.0, 30.0):
        table = discrete_laplace_table(epsilon)
        a = math.exp(-epsilon)
        if table.complete:  # level 0 reaches t_n = 2 a^n / (1 + a) <= 2^-32
            n = table.level0.size
            assert 2 * a**n / (1 + a) <= 2.0**-32 and (n == 1 or a ** (n - 1) > 2.0**-33)
        else:
            assert epsilon < 0.0056 and table.level0.size == 1
        *digits, last = table.levels()
        b = lambda: a ** math.prod(level.radix for level in digits)  # noqa: E731  the last digit's ratio
        assert all(d.radix == 256 and not d.overflows for d in digits) and last.overflows
        assert b() ** last.radix <= 2.0**-33
    with pytest.raises(ParameterError):
        discrete_laplace_table(0.0)


def test_the_table_cache_holds():
    discrete_laplace_table.cache_clear()
    table = discrete_laplace_table(0.3)
    for slot in range(1, 6):
        derived(1).discrete_laplace(slot, Phase.PUBLICATION, 0.3, 10)
    assert discrete_laplace_table(0.3) is table
    info = discrete_laplace_table.cache_info()
    assert info.misses == 1 and info.hits >= 6


def test_scalar_and_vector_paths_agree_word_for_word():
    randomness = derived(11)
    for epsilon in (0.4, 0.0125, 1e-5):
        for slot in range(50):
            scalar = randomness.discrete_laplace(slot, Phase.DISSIMILARITY, epsilon)
            assert scalar == randomness.discrete_laplace(slot, Phase.DISSIMILARITY, epsilon, 3)[0]


class CraftedWords:
    """A word source whose value words (and their next words) are given, and optionally uniform 1's
    (``digit``: first words and next words per value); the other uniforms come from ``rest``."""

    def __init__(self, values, more, rest, digit=None):
        self._values, self._more, self._rest, self._digit = np.array(values, np.uint64), more, rest, digit

    def values(self, size):
        return self._values[:size].copy()

    def first(self, uniform, lanes):
        if uniform == 1 and self._digit is not None:
            return np.array([self._digit[lane][0] for lane in lanes], np.uint64)
        return self._rest.first(uniform, lanes)

    def words(self, uniform, lane):
        if uniform == 0:
            return iter(self._more[lane])
        if uniform == 1 and self._digit is not None:
            return iter(self._digit[lane])
        return self._rest.words(uniform, lane)


def keyed_words(seed: int = 5):
    """A real word source (the discrete noise words of one slot of a seeded key)."""
    from wevent.core.randomness import _NoiseWords

    return _NoiseWords(DerivedRandomness(SecretKey.from_seed(seed), "crafted")._noise, 1, Phase.PUBLICATION)


@pytest.fixture(params=["compiled", "numpy"])
def fast_path(request):
    """Each test under it runs with the compiled fast path (where numba is installed) and with numpy's."""
    if request.param == "compiled":
        pytest.importorskip("numba")  # the test extra installs it
        yield
    else:
        with compiled.disabled():
            yield


def test_the_compiled_fast_path_draws_what_numpy_draws():
    """The compiled loop's candidates may round otherwise than numpy's: the draws must not differ."""
    pytest.importorskip("numba")
    assert compiled.discrete_fast_path() is not None
    randomness = derived(12)
    for epsilon in (5.0, 0.7, 0.0125, 0.006, 1e-5):
        for slot, size in enumerate((2, 3, 100, 1000, 10_000), start=1):
            fast = randomness.discrete_laplace(slot, Phase.PUBLICATION, epsilon, size)
            with compiled.disabled():
                assert compiled.discrete_fast_path() is None
                assert fast.tolist() == randomness.discrete_laplace(slot, Phase.PUBLICATION, epsilon, size).tolist()


def test_a_budget_seen_once_draws_without_cells_what_numpy_draws():
    """A short vector at a new budget (BD's publications) has the compiled loop compute each value's
    proven cell instead of building the table's: the same draws as numpy's path over the table's
    cells, and words tied with a bound still take the exact digits."""
    pytest.importorskip("numba")
    randomness = derived(13)
    for slot, epsilon in enumerate((0.0125, 0.1, 0.7, 5.0), start=1):
        discrete_laplace_table.cache_clear()
        size = discrete_laplace_table(epsilon).size - 1
        fast = randomness.discrete_laplace(slot, Phase.PUBLICATION, epsilon, size)
        assert not discrete_laplace_table(epsilon).has_cells  # the per-value cells were used
        with compiled.disabled():
            assert fast.tolist() == randomness.discrete_laplace(slot, Phase.PUBLICATION, epsilon, size).tolist()
    discrete_laplace_table.cache_clear()
    table = discrete_laplace_table(0.7)
    values, more, expected = [], [], []
    for k in range(1, (table.size + 1) // 2):  # fewer values than the table has rows
        first, second = table.level0.exact(k).prefix(63), table.level0.exact(k).prefix(127) % 2**64
        values += [first | 1 << 63, first]
        more += [[second - 1], [second + 1]]
        expected += [-k, k - 1]
    assert two_sided_geometric(CraftedWords(values, more, keyed_words()), 0.7, len(values)).tolist() == expected
    assert not table.has_cells


@pytest.mark.parametrize("epsilon", [0.0125, 0.7, 5.0])
def test_ties_with_the_bounds_are_settled_by_the_exact_digits(epsilon, fast_path):
    """Words whose first 63 bits are exactly floor(t_k 2^63): the proven bounds cannot decide (the
    value must take the refinement), and the next word, one below or above t_k's next 64 bits,
    decides |X| = k or k - 1, with the top bit as the sign, in the vector and the scalar paths."""
    table = discrete_laplace_table(epsilon)
    values, more, expected = [], [], []
    for k in sorted({1, 2, table.level0.size // 3, table.level0.size - 1} - {0}):
        threshold = table.level0.exact(k)
        first, second = threshold.prefix(63), threshold.prefix(127) % 2**64
        assert table.level0.low[k - 1] <= first <= table.level0.high[k - 1]  # undecided by the bounds
        for sign in (0, 1):
            for step, magnitude in ((-1, k), (1, k - 1)):
                values.append(first | sign << 63)
                more.append([second + step])
                expected.append(-magnitude if sign else magnitude)
    source = CraftedWords(values, more, keyed_words())
    assert two_sided_geometric(source, epsilon, len(values)).tolist() == expected
    for i, value in enumerate(expected):
        assert two_sided_geometric(CraftedWords(values[i:], more[i:], keyed_words()), epsilon) == value


def test_ties_in_the_tails_digits_are_settled_by_the_exact_digits():
    """At epsilon 1e-4 a value word with u = 1 is in the tail, and |X| - 1 = G; G's first digit (radix
    256) is the inverse CDF of uniform 1. Uniform 1 tied with threshold r, then one below or above
    it in the next word, gives the digit r or r - 1: G mod 256."""
    epsilon = 1e-4
    digit = discrete_laplace_table(epsilon).levels()[0]
    assert digit.radix == 256 and not digit.overflows
    words, expected = [], []
    for r in (1, 100, 255):
        threshold = digit.thresholds.exact(r)
        first, second = threshold.prefix(63), threshold.prefix(127) % 2**64
        assert digit.thresholds.low[r - 1] <= first <= digit.thresholds.high[r - 1]
        words += [(first, second - 1), (first, second + 1)]
        expected += [r, r - 1]
    size = len(words)
    source = CraftedWords(np.ones(size, np.uint64), [()] * size, keyed_words(7), digit=words)
    assert ((np.abs(two_sided_geometric(source, epsilon, size)) - 1) % 256).tolist() == expected


@pytest.mark.parametrize("epsilon", [0.5, 0.0125])
def test_the_tail_is_the_geometric_law_beyond_level_0(epsilon, fast_path):
    """Level 0 ends at t_n <= 2^-32, too rare to sample; a value word with u = 1 (U < 2^-62) is in
    that tail, so |X| - n must be geometric, P(G >= g) = a^g, drawn from the value's own uniforms
    (radix-256 digits, then the last digit). Chi-square on G at level 1e-4, pooled tail."""
    table = discrete_laplace_table(epsilon)
    n, size = table.level0.size, 100_000
    values = np.ones(size, np.uint64) | (np.arange(size, dtype=np.uint64) % 2) << np.uint64(63)
    x = two_sided_geometric(CraftedWords(values, [()] * size, keyed_words(6)), epsilon, size)
    assert np.all(np.abs(x) >= n) and np.array_equal(x < 0, np.arange(size) % 2 == 1)
    g = np.abs(x) - n
    a = math.exp(-epsilon)
    top = int(math.log(20 / (size * (1 - a))) / math.log(a))  # bins 0..top-1, then G >= top: expected >= 20
    observed = np.bincount(np.minimum(g, top), minlength=top + 1)
    expected = size * np.concatenate([(1 - a) * a ** np.arange(top), [a**top]])
    assert chi_square_passes(observed, expected)


def test_epsilons_below_2_to_the_minus_35_give_python_ints():
    """The tail's digits weigh 2^40 and more: values are Python ints (dtype object), still exact.
    E|X| = 2a / (1 - a^2) ~ 1/epsilon and sd(|X|) < 1/epsilon: the mean of n values within 5 sd."""
    epsilon, n = 1e-12, 2000
    x = derived(12).discrete_laplace(1, Phase.PUBLICATION, epsilon, n)
    assert x.dtype == object and all(isinstance(v, int) for v in x)
    assert abs(float(np.mean(np.abs(x).astype(float))) * epsilon - 1) < 5 / math.sqrt(n)
    assert isinstance(derived(12).discrete_laplace(1, Phase.PUBLICATION, epsilon), int)


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


def test_a_streams_name_for_floating_point_noise_is_the_cores_laplace():
    assert Uniform(1.0, 2, 3, randomness=derived(4), noise="laplace-fp-unsafe").noise == "laplace"
    assert noise_variance(0.5, "laplace-fp-unsafe") == noise_variance(0.5, "laplace") == 8.0
    with pytest.raises(ParameterError, match="noise must be one of discrete, laplace, laplace-fp-unsafe"):
        noise_variance(0.5, "laplace-fp")


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
    """Is ``y`` > 0 one of the values the scalar Laplace path can output for a true value of 0?

    That path returns ``-scale * log((m + 0.5) 2^-53)`` for 53-bit integers m (and a sign): invert
    and test the neighbouring m exactly (the map is decreasing).
    """
    m = int(math.exp(-y / scale) * 2**53 - 0.5)
    return any(-scale * math.log((j + 0.5) * 2.0**-53) == y for j in range(m - 4, m + 5))


def test_continuous_noise_leaks_through_its_low_order_bits_and_discrete_noise_does_not():
    randomness = derived(6)
    noise = np.array([randomness.laplace(slot, Phase.PUBLICATION, 1.0) for slot in range(1, 20_001)])
    from_zero = noise[(noise >= 1) & (noise < 2)]  # outputs in [1, 2) for the true value 0 ...
    from_one = (1.0 + noise)[(noise >= 0) & (noise < 1)]  # ... and for the true value 1
    assert from_zero.size > 1000 and from_one.size > 1000
    assert all(_continuous_support_contains(float(y), 1.0) for y in from_zero)  # the membership test is right
    # About half the outputs of 1 + noise are doubles that 0 + noise never produces: seeing one reveals
    # the input. Near y, 0 + noise reaches one double in 1 / (2 e^-y) of [1, 2)'s (its step is
    # 2^-53 e^y, theirs 2^-52), so the share of impossible outputs is 1 - e (e^-2 - e^-4) / (1 - e^-1)
    # = 0.497; over ~6,300 outputs its sd is 0.0063, and 0.45 is 7 sd below it.
    impossible = np.mean([not _continuous_support_contains(float(y), 1.0) for y in from_one])
    assert impossible > 0.45

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
