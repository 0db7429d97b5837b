"""Every mechanism records budgets whose exact (rational) window sums never exceed epsilon.

Floats are exact rationals: a window of recorded budgets is summed here with fractions, for every
mechanism in the registry, over epsilons that do not divide evenly (50, 0.1, 1/3, 1e-10, ...),
windows and streams, with scripted publish decisions. A budget rounded to nearest fails this:
three slots of Uniform(50, w = 3) at 16.666666666666668 spend 50 + 3.6e-15.
"""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from tests.conftest import derived, scripted
from wevent.core.accounting import Budget
from wevent.core.exact import divide, grid, integers_up
from wevent.core.local import Devices
from wevent.core.personalized.plbu import PersonalizedLBU
from wevent.core.registry import mechanisms
from wevent.core.validation import ParameterError

AWKWARD = [50.0, 0.1, 1 / 3, 1e-10, 0.6, 2.5, 7.0]
EPSILONS = st.one_of(st.sampled_from(AWKWARD), st.floats(1e-6, 100.0))
DOMAIN = 3


def build(name: str, epsilon: float, window: int, seed: int, decisions: list):
    cls = mechanisms()[name]
    options = {"randomness": derived(seed), "decision_override": scripted(decisions)}
    if cls.model == "central":
        return cls(epsilon, window, DOMAIN, **options)
    if cls.model == "personalized":  # a second type with its own window and an awkward budget of its own
        return cls([window, window // 2 + 1], [epsilon, epsilon * 3.7], [5, 8], DOMAIN, **options)
    return cls(epsilon, window, DOMAIN, 4 * window + 8, devices=Devices.from_seed(seed, "t", block_size=16), **options)


def slot_input(mechanism, rng):
    if mechanism.model == "local":
        return rng.integers(0, DOMAIN, mechanism.population)
    if mechanism.model == "personalized":
        return np.stack([rng.multinomial(int(n), [1 / DOMAIN] * DOMAIN) for n in mechanism.types.sizes])
    return rng.poisson(50.0, DOMAIN).astype(float)


def windows_of(charges: list[Fraction], window: int):
    """Every window's exact sum (the windows starting before slot 1 included)."""
    return [sum(charges[max(0, end - window + 1): end + 1], Fraction(0)) for end in range(len(charges))]


def recorded_window_sums(mechanism, results):
    """``(bound, exact window sums)`` for every group of users the mechanism charges alike."""
    if mechanism.model == "central":
        charges = [Fraction(r.eps1) + Fraction(r.eps2) for r in results]
        yield mechanism.epsilon, windows_of(charges, mechanism.window)
    elif mechanism.model == "personalized":
        for k, (w, eps) in enumerate(zip(mechanism.types.windows.tolist(), mechanism.types.epsilons.tolist())):
            # the charge an audit record carries is the float type_eps1 + type_eps2: it must be exact
            charges = [Fraction(float(r.type_charges[k])) for r in results]
            assert charges == [Fraction(float(r.type_eps1[k])) + Fraction(float(r.type_eps2[k])) for r in results]
            yield eps, windows_of(charges, w)
    else:
        population = mechanism.population
        for user in range(population):  # every user's own charges: the phases that asked them
            charges = [sum((Fraction(eps) for users, eps in ((r.users1, r.eps1), (r.users2, r.eps2))
                            if eps > 0 and (users is None or user in users)), Fraction(0)) for r in results]
            yield mechanism.epsilon, windows_of(charges, mechanism.window)


@pytest.mark.parametrize("name", sorted(mechanisms()))
@settings(max_examples=25, deadline=None)
@given(epsilon=EPSILONS, window=st.integers(1, 9), seed=st.integers(0, 2**16),
       decisions=st.lists(st.sampled_from([True, False, None]), min_size=40, max_size=40))
@example(epsilon=50.0, window=3, seed=0, decisions=[True] * 40)
@example(epsilon=0.1, window=7, seed=1, decisions=[True] * 40)
@example(epsilon=1 / 3, window=9, seed=2, decisions=[True, False] * 20)
def test_no_window_of_recorded_budgets_exceeds_epsilon_exactly(name, epsilon, window, seed, decisions):
    try:
        mechanism = build(name, epsilon, window, seed, decisions)
    except ParameterError as exc:  # DSAT needs a cutoff below w, population division enough users
        assume("cutoff" not in str(exc) and "unit" not in str(exc))
        raise
    rng = np.random.default_rng(seed)
    results = [mechanism.step(slot_input(mechanism, rng)) for _ in range(3 * window + 6)]
    for bound, sums in recorded_window_sums(mechanism, results):
        assert max(sums) <= Fraction(bound), (name, bound, max(sums) - Fraction(bound))


@settings(max_examples=200, deadline=None)
@given(total=EPSILONS, part=st.floats(1e-6, 1.0, exclude_max=True))
@example(total=0.9, part=0.3)
@example(total=1.0, part=0.1)
def test_a_query_index_share_leaves_the_host_what_fits_exactly(total, part):
    reserved = total * part
    assume(reserved >= 1e-290)
    host = Budget(total, 10, reserved=reserved).host
    assert Fraction(host) + Fraction(reserved) <= Fraction(total)
    assert Fraction(np.nextafter(host, np.inf)) + Fraction(reserved) > Fraction(total)  # and the most that fits


@settings(max_examples=200, deadline=None)
@given(epsilons=st.lists(EPSILONS, min_size=1, max_size=4), window=st.integers(1, 400))
@example(epsilons=[50.0], window=3)
def test_plbu_and_divide_take_the_largest_multiple_of_the_grid_that_fits(epsilons, window):
    windows = [window + k for k in range(len(epsilons))]
    plbu = PersonalizedLBU(windows, epsilons, [1] * len(epsilons), DOMAIN, rng=np.random.default_rng(0))
    for eps, w, share in zip(plbu.types.epsilons.tolist(), plbu.types.windows.tolist(), plbu.slot_epsilons.tolist()):
        assert share == divide(eps, w)
        assert w * Fraction(share) <= Fraction(eps) < w * (Fraction(share) + Fraction(grid(eps)))
        assert Fraction(share) / Fraction(grid(eps)) == int(Fraction(share) / Fraction(grid(eps)))


@pytest.mark.parametrize("exponent", [-1100, -1074, -1060, -53, 0, 970, 1000])
@pytest.mark.parametrize("bits", [1, 52, 53, 54, 80])
def test_integers_up_in_one_vector_equals_each_rounded_up_alone(exponent, bits):
    """Integers that are floats exactly take one vector conversion; the others are rounded up one at
    a time. Either way each value is the smallest float at least the integer times 2^exponent."""
    rng = np.random.default_rng(bits)
    integers = np.array([int(x) << max(0, bits - 62) for x in rng.integers(0, 2 ** min(bits, 62), 40, dtype=np.uint64)]
                        + [2**bits - 1, 0], dtype=object).reshape(2, -1)
    with np.errstate(over="ignore"):
        rounded = integers_up(integers, exponent)
    assert rounded.shape == integers.shape and rounded.dtype == float
    for value, integer in zip(rounded.ravel().tolist(), integers.ravel().tolist()):
        exact = Fraction(integer) * Fraction(2) ** exponent
        if value == float("inf"):
            assert exact > Fraction(np.finfo(float).max)
        else:
            assert Fraction(value) >= exact and (value == 0 or Fraction(np.nextafter(value, 0)) < exact)
