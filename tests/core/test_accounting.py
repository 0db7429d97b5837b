"""The one accounting path: window sums per group, the charge matrix's checks, every mechanism's
own ledger, and the Budget's shares."""

import math
from fractions import Fraction

import numpy as np
import pytest

from tests.conftest import derived
from wevent.core.accounting import (
    Budget,
    ChargeMatrix,
    SlidingLedger,
    UserCharges,
    WindowAccount,
    latest_window_spend,
    slide_charges,
    window_sums,
)
from wevent.core.central import BudgetAbsorption, BudgetDistribution, Sample, Uniform
from wevent.core.ledger import BudgetEntry, WindowLedger
from wevent.core.local import MECHANISMS as LOCAL
from wevent.core.local import Devices
from wevent.core.personalized import PersonalizedBudgetAbsorption, PersonalizedBudgetDistribution, grouped
from wevent.core.simulation import simulate
from wevent.core.synthetic import synthetic
from wevent.core.validation import ParameterError


def exact_up(values) -> float:
    """The smallest float at least the exact sum of ``values``, by fractions."""
    exact = sum(map(Fraction, values), Fraction(0))
    nearest = float(exact)
    return math.nextafter(nearest, math.inf) if Fraction(nearest) < exact else nearest


@pytest.mark.parametrize("seed", range(20))
def test_the_live_window_spend_is_the_exact_sum_rounded_up_as_the_whole_ledgers_is(seed):
    # releases and simulations agree to the bit, and neither rounds a window below its exact spend
    rng = np.random.default_rng(seed)
    rows, groups = int(rng.integers(1, 40)), int(rng.integers(1, 5))
    history = rng.uniform(0, 0.3, (rows, groups)) / rng.integers(1, 7, (rows, groups))
    windows = rng.integers(1, 50, groups)
    exact = np.array([exact_up(history[-w:, k]) for k, w in enumerate(windows)])
    assert latest_window_spend(history, windows).tobytes() == exact.tobytes()
    whole = np.array([window_sums(history[:, k], int(w))[-1] for k, w in enumerate(windows)])
    assert latest_window_spend(history, windows).tobytes() == whole.tobytes()


def test_ten_tenths_overspend_an_epsilon_of_one_whatever_a_float_sum_says():
    # 0.1 is above one tenth: ten of them exceed 1, though their float sum rounds to 0.9999999999999999
    tenths = np.full(10, 0.1)
    assert sum(tenths.tolist()) < 1.0 and sum(map(Fraction, tenths.tolist())) > 1
    assert ChargeMatrix(tenths, [10], [1.0]).first_overspend().last == 9
    live = SlidingLedger([10], [1.0])
    for slot in range(1, 11):
        live.record_charges(slot, [0.1])
    assert live.tightest().exceeds()
    ledger = WindowLedger(10, 1.0)
    for slot in range(1, 11):
        ledger.record(BudgetEntry(slot, 0.05, 0.05))  # two parts of one charge add exactly
    assert ledger.tightest().exceeds() == (2 * 10 * Fraction(0.05) > 1)


def test_window_sums_of_a_matrix_are_the_sums_of_its_columns():
    rng = np.random.default_rng(3)
    charges = rng.uniform(0, 1, (30, 4))
    assert window_sums(charges, 6).tobytes() == np.stack([window_sums(charges[:, k], 6) for k in range(4)], 1).tobytes()


def test_sliding_keeps_the_rows_the_next_window_needs():
    recent = np.zeros((0, 2))
    for slot in range(1, 8):
        window, recent = slide_charges(recent, [slot, 10 * slot], keep=3)
        assert window[-1].tolist() == [slot, 10 * slot] and len(window) == min(slot, 3) and len(recent) <= 2
    assert window[:, 0].tolist() == [5, 6, 7]


def brute_spend(shared, windows, listed, population, reserved):
    """Every group's (and every listed user's) window spend from dense per-user charges."""
    slots = shared.shape[0]
    user = np.zeros((slots, population))
    for row, charges in enumerate(listed or []):
        for users, eps in charges:
            np.add.at(user[row], users, eps)
    spend = np.zeros(shared.shape)
    for k, w in enumerate(windows):
        for end in range(slots):
            rows = slice(max(0, end - w + 1), end + 1)
            spend[end, k] = shared[rows, k].sum() + reserved
            if k == 0 and listed is not None:
                spend[end, k] += user[rows].sum(axis=0).max(initial=0.0)
    return spend


@pytest.mark.parametrize("seed", range(30))
def test_the_charge_matrix_finds_what_a_brute_force_count_finds(seed):
    rng = np.random.default_rng(seed)
    slots, groups, population = int(rng.integers(1, 25)), int(rng.integers(1, 4)), int(rng.integers(1, 9))
    windows = rng.integers(1, 8, groups)
    shared = rng.integers(0, 4, (slots, groups)) / 8  # multiples of 1/8 add exactly: sums compare exactly
    listed = None
    if seed % 2:
        listed = [[(rng.integers(0, population, rng.integers(0, population + 1)), rng.integers(0, 4) / 8)
                   for _ in range(rng.integers(0, 3))] for _ in range(slots)]
    reserved = 0.125 * (seed % 3)
    spend = brute_spend(shared, windows, listed, population, reserved)
    bounds = spend.max(axis=0)
    charges = ChargeMatrix(shared, windows, bounds, reserved=reserved, listed=listed, population=population)
    assert np.array_equal(charges.window_spend(), spend)
    assert charges.first_overspend() is None
    tightest = charges.tightest()
    assert tightest.ratio == pytest.approx(1.0) and not tightest.exceeds()
    lowered = bounds.copy()
    lowered[-1] -= 1e-6
    over = ChargeMatrix(shared, windows, lowered, reserved=reserved, listed=listed,
                        population=population).first_overspend()
    first = next(k for k in range(groups) if spend[:, k].max() > lowered[k])
    assert over.group == first and over.spend == spend[:, first].max() and over.last == np.argmax(spend[:, first])
    assert over.first == max(0, over.last - int(windows[first]) + 1)
    if over.user is not None:  # the user named paid that much in that window
        rows = slice(over.first, over.last + 1)
        paid = sum(eps * np.count_nonzero(users == over.user) for row in listed[rows] for users, eps in row)
        assert shared[rows, 0].sum() + reserved + paid == over.spend


def central(cls):
    return cls(1.0, 6, 3, randomness=derived(1))


def personalized(cls):
    return cls.for_requirements(grouped(300, 0.6, 8, seed=2), 3, randomness=derived(1))


def local(name):
    return LOCAL[name](1.0, 4, 3, 80, randomness=derived(1), devices=Devices.from_seed(1, "t", block_size=16))


MECHANISMS = [*(central(c) for c in (Uniform, Sample, BudgetDistribution, BudgetAbsorption)),
              *(personalized(c) for c in (PersonalizedBudgetDistribution, PersonalizedBudgetAbsorption)),
              *(local(n) for n in sorted(LOCAL))]


def slot_data(mechanism, rng, slot):
    if hasattr(mechanism, "population"):
        return rng.integers(0, 3, mechanism.population)
    if hasattr(mechanism, "types"):
        return np.stack([rng.multinomial(int(n), [1 / 3] * 3) for n in mechanism.types.sizes])
    return rng.poisson(200.0 * (1 + (slot // 10) % 2), 3).astype(float)


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=lambda m: m.name)
def test_every_mechanism_makes_a_ledger_that_holds_it_to_its_budget(mechanism):
    ledger = mechanism.new_ledger()
    assert isinstance(ledger, WindowAccount) and ledger.tightest() is None
    rng = np.random.default_rng(5)
    for slot in range(1, 41):
        ledger.record(mechanism.step(slot_data(mechanism, rng, slot)))
    worst = ledger.tightest()
    assert worst.spend > 0 and not worst.exceeds() and worst.ratio <= 1 + 1e-12
    assert worst.last - worst.first < mechanism.window


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=lambda m: m.name)
def test_a_sliding_ledger_restored_at_every_slot_keeps_the_mechanisms_account(mechanism):
    # What M2 does: a sliding ledger made from the state the previous slot left, one slot each.
    full, state = mechanism.new_ledger(), mechanism.sliding_ledger().state()
    rng = np.random.default_rng(5)
    for slot in range(1, 41):
        result = mechanism.step(slot_data(mechanism, rng, slot))
        ledger = mechanism.sliding_ledger(state)
        spend = ledger.record(result)
        charged = full.record(result)
        state = ledger.state()
        assert len(state) < ledger.keep and state.shape[1] == ledger.columns
        worst = ledger.tightest()
        assert worst.last == result.slot - 1 and not worst.exceeds()
        if mechanism.model == "central":
            assert spend.tolist() == [full.window_spend()[-1]]  # to the bit
        elif mechanism.model == "personalized":
            assert spend.tolist() == full.type_window_spend()[-1].tolist()
        else:  # a bound on every user's window: at least what the fullest user's window holds
            assert spend[0] >= charged[0]


def test_a_simulation_reports_its_mechanisms_ledger():
    m = BudgetAbsorption(1.0, 10, 2, randomness=derived(3))
    run = simulate(m, synthetic("log", users=10_000, slots=50, seed=3).counts)
    ledger = run.ledger()
    assert run.summary(mre_floor=1.0)["max_window_epsilon"] == ledger.max_window_spend() == ledger.tightest().spend


def test_a_budget_gives_the_host_what_the_reserved_share_leaves():
    budget = Budget(0.9, 10, reserved=0.3)
    assert (budget.total, budget.reserved, budget.window) == (0.9, 0.3, 10)
    assert Budget(0.9, 10).host == 0.9
    # the largest float whose exact sum with the reserved share stays within the total
    host = Fraction(budget.host)
    assert host + Fraction(0.3) <= Fraction(0.9) < Fraction(math.nextafter(budget.host, 1)) + Fraction(0.3)
    for total, window, reserved in ((0.9, 10, 0.9), (0.9, 10, -0.1), (0.0, 10, 0.0), (0.9, 0, 0.0), (0.9, 10, np.nan)):
        with pytest.raises(ParameterError):
            Budget(total, window, reserved)


@pytest.mark.parametrize("seed", range(30))
def test_user_charges_find_the_fullest_user_and_who_fits_exactly(seed):
    # the per-user account a device ledger admits requests with: against a brute force in fractions
    rng = np.random.default_rng(seed)
    population = int(rng.integers(1, 12))
    budgets = rng.choice([0.1, 0.2, 0.3, 1 / 3, 0.7, 0.05], size=4)
    charges, paid = UserCharges(population), [Fraction(0)] * population
    history = []
    for _ in range(int(rng.integers(1, 25))):
        users, budget = rng.integers(0, population, int(rng.integers(0, population + 2))), float(rng.choice(budgets))
        charges.charge(users, budget)
        history.append((users, budget))
        for user in users.tolist():  # a user listed twice pays twice
            paid[user] += Fraction(budget)
        if len(history) > 3:  # the oldest charge leaves the window
            gone, spent = history.pop(0)
            charges.charge(gone, spent, -1)
            for user in gone.tolist():
                paid[user] -= Fraction(spent)
        user, spend = charges.fullest()
        assert spend == max(paid) and paid[user] == spend and user == paid.index(max(paid))
        budget, everyone = float(rng.choice(budgets)), np.arange(population)
        bound = float(max(paid) + Fraction(budget)) if rng.random() < 0.5 else float(rng.uniform(0.1, 2.0))
        assert charges.within(everyone, budget, bound).tolist() == [p + Fraction(budget) <= Fraction(bound)
                                                                   for p in paid]
