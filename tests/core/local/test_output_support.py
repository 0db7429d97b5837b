"""What a device can send: the same finite set of outputs whatever its value, with probabilities
whose ratio between any two values is at most e^eps, computed exactly.

The supports and probabilities are enumerated with integers and fractions from the code's own
draw-to-report maps; then 10^6 reports sampled at two neighbouring inputs must all lie on the
support (``possible``). A Piecewise Mechanism drawn in floating point fails this: its outputs at
v and v + 2^-30 are doubles the other input cannot produce (Mironov, CCS 2012, on the devices).

Statistical tolerances are 4 standard errors of the statistic under test, derived where used.
"""

import decimal
import math
from fractions import Fraction

import numpy as np
import pytest

from wevent.core.local import GRR, OUE, HybridMechanism, choose, make_oracle
from wevent.core.local.exact_draws import DRAW_RANGE, coins_below, exp_ratio, exp_share, uniform_below
from wevent.core.local.grr import respond
from wevent.core.local.hybrid import EPS_STAR, component_variance, stochastic_rounding_constant
from wevent.core.local.piecewise import DiscretePiecewise, piecewise_grid
from wevent.core.randomness import KeyStream

DRAWS = 1_000_000
SE = 4


def e_to(epsilon: float) -> Fraction:
    """A lower bound of e^epsilon computed apart from the code (100 digits, less than 10^-95 off)."""
    with decimal.localcontext() as context:
        context.prec = 100
        value = decimal.Decimal(epsilon).exp()  # Decimal(float) is the float's exact value
    return Fraction(value) * (1 - Fraction(1, 10**95))


def replay(words):
    """A word source that hands out ``words`` in order."""
    queue = [int(w) for w in words]

    def more(count):
        taken = queue[:count]
        del queue[:count]
        assert len(taken) == count, "the draw read more words than the test supplied"
        return np.array(taken, dtype=np.uint64)

    return more


# --- exact draws --------------------------------------------------------------------------------
def test_uniform_below_replaces_words_above_the_last_whole_multiple():
    # 2^64 = 1 (mod 3): of the 2^64 words only the last, 2^64 - 1, would favour the value 0
    words = np.array([0, 1, 2**64 - 2, 2**64 - 1], dtype=np.uint64)
    assert uniform_below(words, 3, replay([2**64 - 1, 5])).tolist() == [0, 1, (2**64 - 2) % 3, 5 % 3]
    # per-lane bounds: a power of two replaces nothing
    words = np.array([2**64 - 1, 2**64 - 1], dtype=np.uint64)
    assert uniform_below(words, np.array([4, 3]), replay([7])).tolist() == [3, 7 % 3]


def test_coins_below_compare_the_uniform_real_of_the_words_with_p():
    """Each coin is [0.w1 w2 ... < p] with p's exact value: checked on random words and doubles of
    every scale, and on the ties that need more words (p with bits beyond the first 53 or 64)."""
    rng = np.random.default_rng(0)
    p = np.ldexp(rng.random(20_000), -rng.integers(0, 80, 20_000))
    words = rng.integers(0, 2**64, 20_000, dtype=np.uint64)
    coins = coins_below(words, p, replay([]))
    for coin, w, q in zip(coins.tolist(), words.tolist(), p.tolist()):
        low, high = Fraction(w, 2**64), Fraction(w + 1, 2**64)
        assert coin == (high <= Fraction(q)) or low < Fraction(q) < high  # a tie would have read on
    # p = 3 * 2^-60 + 2^-100: its first 64 bits are 48, then 2^28 (the rest 0)
    p = 3 * 2.0**-60 + 2.0**-100
    cases = [([47], True), ([49], False), ([48, 2**28 - 1], True), ([48, 2**28], False), ([48, 2**28 + 1], False)]
    for given, expected in cases:
        assert coins_below(np.array(given[:1], dtype=np.uint64), np.array([p]), replay(given[1:]))[0] == expected
    # p = 1 - 2^-53: the word's first 53 bits decide (U/2^53 < p, or U/2^53 = p and U >= p)
    top = (2**53 - 1) << 11
    assert coins_below(np.array([top - 1, top], dtype=np.uint64), np.array([1 - 2.0**-53] * 2), replay([])).tolist() == [True, False]
    assert coins_below(np.array([2**64 - 1, 0], dtype=np.uint64), np.array([1.0, 0.0]), replay([])).tolist() == [True, False]


@pytest.mark.parametrize("epsilon", [1e-12, 0.1, EPS_STAR, 1.0, 4.0, 10.0, 38.0, 50.0, 1000.0])
def test_rational_ratios_never_exceed_e_to_the_epsilon(epsilon):
    e = e_to(epsilon)
    for kept, others in ((1, 1), (1, 4), (7, 2**20)):
        weight, other = exp_ratio(epsilon, kept, others)
        assert kept * weight + others * other <= DRAW_RANGE and Fraction(weight, other) <= e
        if epsilon <= 10:  # below the cap: as close as the range allows (S >= 2^35 here)
            assert Fraction(weight, other) > e * (1 - Fraction(1, 2**30))
    share = exp_share(epsilon)
    assert 0 < share < 2**64 and Fraction(share, 2**64 - share) <= e
    if epsilon < 40:  # the largest share of these odds
        assert Fraction(share + 1, 2**64 - share - 1) > e


# --- the Piecewise Mechanism's grid -----------------------------------------------------------
@pytest.mark.parametrize("epsilon", [0.7, 1.0, 3.0])
@pytest.mark.parametrize("resolution", [2, 4, 8])
def test_piecewise_grid_enumerated_support_probabilities_mean_and_variance(epsilon, resolution):
    """On grids small enough to enumerate every draw: every input index reaches every output index,
    with probability R/T or S/T; the mean is exactly 2t/k - 1 and the variance exactly A x_t^2 + B;
    rounding between two indices adds exactly 4 f(1 - f) / (lambda k^2)."""
    grid = DiscretePiecewise(epsilon, resolution=resolution, limit=2**12)
    k, n, t_range = grid.steps, grid.outputs, grid.total
    step = Fraction(grid.total, k * (grid.inside - grid.outside) * grid.window)
    assert grid.unit == float(step)
    exact_values = [step * (2 * j - (n - 1)) for j in range(n)]
    sent = grid.values(np.arange(n)).tolist()  # one rounding of the product of two doubles
    assert sent == [(2 * j - (n - 1)) * grid.unit for j in range(n)]
    assert all(abs(Fraction(y) - v) <= abs(v) * Fraction(1, 2**51) for y, v in zip(sent, exact_values))
    rows = []
    for t in range(k + 1):
        counts = np.bincount(grid.indices(np.full(t_range, t), np.arange(t_range)), minlength=n)
        assert counts.size == n and set(counts.tolist()) == {grid.inside, grid.outside}
        assert (counts[t:t + grid.window] == grid.inside).all() and counts.sum() == t_range
        probabilities = [Fraction(int(c), t_range) for c in counts]
        x_t = Fraction(2 * t, k) - 1
        assert sum(p * v for p, v in zip(probabilities, exact_values)) == x_t
        assert sum(p * (v - x_t) ** 2 for p, v in zip(probabilities, exact_values)) == grid.slope * x_t**2 + grid.spread
        rows.append(probabilities)
    worst = max(a / b for row in rows for other in rows for a, b in zip(row, other))
    assert worst == Fraction(grid.inside, grid.outside) <= e_to(epsilon)
    # rounding: u between index 1 and 2, at f = 1/4 (and 1/2 where the term is largest)
    for f in (Fraction(1, 4), Fraction(1, 2)):
        u = (1 + f) / k
        x = 2 * u - 1
        mixed = [(1 - f) * a + f * b for a, b in zip(rows[1], rows[2])]
        variance = sum(p * (v - x) ** 2 for p, v in zip(mixed, exact_values))
        assert variance == grid.slope * x**2 + grid.spread + 4 * f * (1 - f) / (grid.share * k * k)
        assert float(grid.variance(float(u))) == pytest.approx(float(variance), rel=1e-12)


@pytest.mark.parametrize("epsilon", [0.7, 1.0, 4.0, 8.0])
def test_piecewise_grid_at_full_resolution_matches_the_continuous_pm(epsilon):
    """The production grid: the window weights summed over all N outputs give the mean 2t/k - 1 and
    the variance A x_t^2 + B; A, B and the range are the continuous PM's within 10^-4 (eps <= 8)."""
    grid = piecewise_grid(epsilon)
    values = grid.values(np.arange(grid.outputs))
    for t in (0, grid.steps // 3, grid.steps):
        weights = np.full(grid.outputs, float(grid.outside))
        weights[t:t + grid.window] = grid.inside
        probabilities = weights / grid.total
        x_t = 2 * t / grid.steps - 1
        assert probabilities.sum() == pytest.approx(1.0, abs=1e-12)
        assert float(probabilities @ values) == pytest.approx(x_t, abs=1e-9)
        assert float(probabilities @ (values - x_t) ** 2) == pytest.approx(float(grid.slope * Fraction(x_t) ** 2 + grid.spread), rel=1e-9)
    a = math.exp(epsilon / 2)
    assert float(grid.slope) == pytest.approx(1 / (a - 1), rel=1e-4)
    assert float(grid.spread) == pytest.approx((a + 3) / (3 * (a - 1) ** 2), rel=1e-4)
    assert grid.largest == pytest.approx((a + 1) / (a - 1), rel=1e-4)
    assert float(grid.share) == pytest.approx(1 - 1 / a, rel=1e-4)


# --- the Hybrid Mechanism ---------------------------------------------------------------------
@pytest.mark.parametrize("bound, value, neighbour", [
    (100.0, 30.0, 31.0), (100.0, 30.0, 70.0), (1.0, 0.25, 0.25 + 2.0**-31), (1.0, 0.3, float(np.nextafter(0.3, 1)))])
def test_piecewise_outputs_at_neighbouring_inputs_lie_on_one_lattice(bound, value, neighbour):
    """10^6 PM outputs at each of two inputs (x and x + 2^-30 is the third case): they all lie on
    the lattice spanned by the smallest gap between two of them. It needs nothing of the code's
    grid, so it tells a floating-point PM apart too: its outputs are off any such lattice."""
    hm = HybridMechanism(1.0, bound=bound)
    stream = KeyStream.from_seed(11)
    outputs = np.concatenate([hm.perturb(np.full(DRAWS, v), stream, component="pm") for v in (value, neighbour)])
    seen = np.unique(outputs)
    gap = np.diff(seen).min()
    steps = (outputs - seen[0]) / gap
    off = np.abs(steps - np.rint(steps))
    assert (off < 0.01).all(), f"{(off >= 0.01).mean():.1%} of the outputs are off the lattice of step {gap:.3g}"
    assert gap == pytest.approx(2 * hm.piecewise.unit, rel=1e-6)
    assert hm.possible(outputs, outputs.size).all()


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("value, neighbour", [(0.25, 0.25 + 2.0**-31), (0.3, 0.31), (0.0, 1.0)])
def test_hybrid_outputs_at_neighbouring_inputs_are_all_possible(epsilon, value, neighbour):
    hm = HybridMechanism(epsilon)
    stream = KeyStream.from_seed(12)
    for v in (value, neighbour):
        reports = hm.perturb(np.full(DRAWS, v), stream)
        assert hm.possible(reports, DRAWS).all()
        if hm.piecewise is None:  # SR alone: the two outputs
            assert set(np.unique(reports).tolist()) == {-hm.sr_constant, hm.sr_constant}


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 40.0])
def test_stochastic_rounding_probabilities_are_exact_and_within_e_to_the_epsilon(epsilon):
    """SR's +C_d has probability u p + (1 - u)(1 - p), p = K/2^64, at every u in [0, 1]: both
    outputs are possible everywhere (0 < K < 2^64, also at eps = 40, where a float threshold
    0.5 - 0.5 (e-1)/(e+1) rounds to 0), and the odds ratio is p/(1-p) <= e^eps."""
    share = Fraction(exp_share(epsilon), 2**64)
    for u in (Fraction(0), Fraction(1, 3), Fraction(1)):
        plus = u * share + (1 - u) * (1 - share)
        assert 0 < plus < 1
    assert share / (1 - share) <= e_to(epsilon)
    assert stochastic_rounding_constant(epsilon) == float(1 / (2 * share - 1))


def test_possible_accepts_every_output_and_nothing_else():
    hm = HybridMechanism(1.0, bound=5.0)
    grid_values = hm.piecewise.values(np.arange(hm.piecewise.outputs))
    every = np.concatenate([grid_values, [hm.sr_constant, -hm.sr_constant]])
    assert hm.possible(every, every.size).all()
    near = np.concatenate([np.nextafter(grid_values[::997], np.inf), np.nextafter(grid_values[::991], -np.inf),
                           [np.nan, np.inf, -np.inf, hm.piecewise.largest + 2 * hm.piecewise.unit, 0.0 if hm.piecewise.outputs % 2 == 0 else hm.piecewise.unit]])
    assert not hm.possible(near, near.size).any()
    single = every.astype(np.float32)  # possible exactly where the float32 copy is the same number
    assert (hm.possible(single, every.size) == (single.astype(np.float64) == every)).all()
    assert not hm.possible(np.zeros(3, dtype=np.int64), 3).any() and not hm.possible(every[:3], 4).any()
    sr_only = HybridMechanism(0.5)
    assert sr_only.possible(np.array([sr_only.sr_constant, -sr_only.sr_constant, grid_values[10]]), 3).tolist() == [True, True, False]


@pytest.mark.parametrize("epsilon", [EPS_STAR + 1e-9, 1.0, 2.0, 6.0])
def test_hybrid_mixture_follows_the_grid(epsilon):
    """HM mixes PM in with the grid's lambda, which cancels the x^2 terms: the variance is flat in x
    where the grid needs no rounding, its maximum (rounding at f = 1/2) is Var*, and mixing pays from
    eps* on (Var* below SR's C_d^2)."""
    hm = HybridMechanism(epsilon)
    grid = hm.piecewise
    assert hm.pm_share == float(grid.share)
    on_grid = 2 * np.array([0, 1, grid.steps // 3, grid.steps // 2, grid.steps]) / grid.steps - 1
    flat = float(grid.share * grid.spread) + (1 - float(grid.share)) * hm.sr_constant**2
    assert component_variance("hm", epsilon, on_grid) == pytest.approx(np.full(5, flat), rel=1e-12)
    halfway = on_grid[:-1] + 1 / grid.steps
    assert component_variance("hm", epsilon, halfway) == pytest.approx(np.full(4, hm.worst_case_variance), rel=1e-12)
    assert hm.worst_case_variance < stochastic_rounding_constant(epsilon) ** 2


def output_distribution(hm: HybridMechanism, u: float, component: str) -> tuple[np.ndarray, np.ndarray]:
    """Every output's probability at ``u`` (the grid's N outputs, then SR's two) and the outputs."""
    x = 2 * u - 1
    grid = piecewise_grid(hm.epsilon)
    whole, f = math.floor(u * grid.steps), u * grid.steps - math.floor(u * grid.steps)
    pm = np.zeros(grid.outputs)
    for t, weight in ((whole, 1 - f), (whole + 1, f)):
        if weight:
            row = np.full(grid.outputs, float(grid.outside))
            row[t:t + grid.window] = grid.inside
            pm += weight * row / grid.total
    c = hm.sr_constant
    share = {"pm": 1.0, "hm": hm.pm_share}[component]
    probabilities = np.concatenate([share * pm, (1 - share) * np.array([(1 + x / c) / 2, (1 - x / c) / 2])])
    return probabilities, np.concatenate([grid.values(np.arange(grid.outputs)), [c, -c]])


def mixture_moments(hm: HybridMechanism, u: float, component: str) -> tuple[float, float, float]:
    """Mean, variance and fourth central moment of one output at ``u``, summed over the support."""
    probabilities, outputs = output_distribution(hm, u, component)
    mean = float(probabilities @ outputs)
    return mean, float(probabilities @ (outputs - mean) ** 2), float(probabilities @ (outputs - mean) ** 4)


@pytest.mark.parametrize("epsilon", [1.0, 3.0])
def test_hybrid_output_probabilities_between_any_two_inputs_within_e_to_the_epsilon(epsilon):
    """HM's probability of every output at the extreme inputs and between grid points: all positive,
    ratios at most e^eps (summed in floating point here; each part's odds are exact: R/S, K/(2^64 - K))."""
    hm = HybridMechanism(epsilon)
    rows = [output_distribution(hm, u, "hm")[0] for u in (0.0, 0.5 + 0.5 / hm.piecewise.steps, 1.0)]
    assert all((row > 0).all() for row in rows)
    assert max(float((a / b).max()) for a in rows for b in rows) <= math.exp(epsilon) * (1 + 1e-12)


@pytest.mark.parametrize("epsilon", [1.0, 3.0])
@pytest.mark.parametrize("component", ["pm", "hm"])
def test_hybrid_sampled_mean_and_variance_match_the_derived_formulas(epsilon, component):
    """10^6 draws at u where the grid rounds with f = 1/2 (the largest rounding term). The sample
    mean of n draws has standard error sqrt(Var / n); the sample variance has standard error
    sqrt((mu4 - Var^2) / n), with mu4 the output's fourth central moment (summed over the support)."""
    hm = HybridMechanism(epsilon)
    grid = piecewise_grid(epsilon)
    u = (grid.steps // 3 + 0.5) / grid.steps
    mean, variance, fourth = mixture_moments(hm, u, component)
    formula = float(component_variance(component, epsilon, 2 * u - 1))
    assert mean == pytest.approx(2 * u - 1, abs=1e-12) and variance == pytest.approx(formula, rel=1e-9)
    outputs = hm.perturb(np.full(DRAWS, u), KeyStream.from_seed(21), component=component)
    assert abs(outputs.mean() - (2 * u - 1)) < SE * math.sqrt(formula / DRAWS)
    assert abs(outputs.var(ddof=1) - formula) < SE * math.sqrt((fourth - variance**2) / DRAWS)


# --- GRR, OUE and Ada -------------------------------------------------------------------------
def test_grr_response_enumerated():
    """Every draw below kept + (d - 1) moved, at every value: the value itself kept times, every
    other value moved times, so every value is possible from every input, at odds kept/moved."""
    kept, moved, d = 5, 2, 4
    draws = np.arange(kept + (d - 1) * moved)
    for v in range(d):
        counts = np.bincount(respond(np.full(draws.size, v), draws, kept, moved, d), minlength=d)
        assert counts.tolist() == [kept if k == v else moved for k in range(d)]


@pytest.mark.parametrize("epsilon, domain", [(0.5, 2), (1.0, 5), (4.0, 117), (40.0, 2)])
def test_grr_reports_at_neighbouring_values_are_possible_with_exact_odds(epsilon, domain):
    grr = GRR(epsilon, domain)
    assert grr.draw_range <= DRAW_RANGE and Fraction(grr.kept_weight, grr.moved_weight) <= e_to(epsilon)
    assert grr.moved_weight >= 1  # at eps = 40 a float p rounds to 1: the value would never move
    stream = KeyStream.from_seed(3)
    for v in (0, 1):
        reports = grr.perturb(np.full(DRAWS, v), stream)
        assert grr.possible(reports, DRAWS).all()
    assert not grr.possible(np.array([-1, domain, 0]), 3)[:2].any() and not grr.possible(np.zeros(2), 2).any()


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 6.0, 40.0, 800.0])
def test_oue_bit_probabilities_are_exact_and_every_pattern_possible(epsilon):
    """A 0-bit is set with probability q = Q/2^72, the one just above 1/(e^eps + 1); the value's own
    bit with 1/2. Over all 2^d patterns (d = 3) every pattern is possible from every value, and the
    largest ratio between two values is (1 - q)/q <= e^eps (at eps = 800 a float 1/(e^eps + 1) is
    0: a 0-bit could never be set, and the set bits would tell the value)."""
    oue = OUE(epsilon, 3)
    q = Fraction(2**72 - exp_share(epsilon, 72), 2**72)
    assert oue.q == float(q) and 0 < q <= Fraction(1, 2) and (1 - q) / q <= e_to(epsilon)
    patterns = [[(pattern >> bit) & 1 for bit in range(3)] for pattern in range(8)]

    def probability(bits, value):
        return math.prod(Fraction(1, 2) if k == value else (q if bit else 1 - q) for k, bit in enumerate(bits))

    table = [[probability(bits, v) for bits in patterns] for v in range(3)]
    assert all(p > 0 for row in table for p in row)
    assert max(a / b for row in table for other in table for a, b in zip(row, other)) == (1 - q) / q


def test_oue_zero_bits_follow_the_keystream_bytes_and_tie_words():
    """Replaying the keystream: lane bytes in report order, then one word per lane whose byte is
    T = Q >> 64, each 0-bit being [byte, word as a 72-bit fraction < Q / 2^72]; own bits [byte < 128]."""
    oue, values = OUE(1.0, 13), np.arange(13).repeat(20)
    bits = np.unpackbits(oue.perturb(values, KeyStream.from_seed(9)), axis=1, count=13)
    stream, width = KeyStream.from_seed(9), 16  # lanes per report: 13 bins padded to 16
    lanes = stream.fill(np.empty(values.size * width, dtype=np.uint8)).reshape(values.size, width)
    q_weight = 2**72 - exp_share(1.0, 72)
    tied = np.argwhere(lanes == q_weight >> 64)
    tie_words = dict(zip(map(tuple, tied.tolist()), stream.words(len(tied)).tolist()))
    for (i, k), bit in np.ndenumerate(bits):
        byte = int(lanes[i, k])
        if k == values[i]:
            assert bit == (byte < 128)
        else:
            assert bit == ((byte << 64) + tie_words.get((i, k), 0) < q_weight)
    assert tied.size  # the ties were exercised


@pytest.mark.parametrize("epsilon, domain", [(0.5, 3), (1.0, 13), (4.0, 117)])
def test_oue_reports_at_neighbouring_values_are_possible(epsilon, domain):
    oue = OUE(epsilon, domain)
    stream = KeyStream.from_seed(4)
    for v in (0, 1):
        reports = oue.perturb(np.full(DRAWS, v), stream)
        assert oue.possible(reports, reports.shape[0]).all()
    padded = reports[:2].copy()
    padded[:, -1] |= 1  # a bit past the last bin: no device sets it (d = 3, 13, 117 leave padding)
    assert not oue.possible(padded, 2).any() and not oue.possible(reports[:2].astype(np.int64), 2).any()


@pytest.mark.parametrize("epsilon, domain", [(0.05, 5), (0.05, 6)])
def test_ada_reports_are_those_of_the_oracle_it_picks(epsilon, domain):
    oracle = make_oracle("ada", epsilon, domain)
    assert oracle.name == choose(epsilon, domain)
    stream = KeyStream.from_seed(5)
    for v in (0, 1):
        reports = oracle.perturb(np.full(DRAWS, v), stream)
        assert oracle.possible(reports, DRAWS).all()
