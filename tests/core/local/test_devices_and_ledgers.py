"""Devices (blocks, modes, reproducibility), the population ledger and the per-user audit ledger."""

import math

import numpy as np
import pytest

from wevent.core.base import Strategy
from wevent.core.local import Devices, PopulationLedger, Request, UserLedger, block_reports
from wevent.core.local.device_reports import answer_keystream
from wevent.core.local.protocol import LocalStepResult
from wevent.core.packing import pack, unpack
from wevent.core.randomness import Phase
from wevent.core.validation import ParameterError

SE = 4


def request(oracle, users, population=50, d=6, slot=3, phase=Phase.PUBLICATION, eps=1.0):
    return Request(slot, phase, eps, oracle, 1 if oracle == "hm" else d, population,
                   None if users is None else np.asarray(users, dtype=np.int64), 1.0 if oracle == "hm" else None)


@pytest.mark.parametrize("oracle", ["grr", "oue", "hm"])
@pytest.mark.parametrize("users", [None, [0, 1, 7, 8, 9, 30, 49]])
def test_fleet_holding_whole_blocks_reproduces_the_simulation(oracle, users):
    devices = Devices.from_seed(4, block_size=8)
    values = np.random.default_rng(0).integers(0, 6, 50) if oracle != "hm" else np.random.default_rng(0).random(50)
    r = request(oracle, users)
    reports = devices.reports(r, values)
    # a "fleet process" holding block b only: same key, same request, its own users' values
    asked = np.arange(50) if users is None else np.asarray(users)
    for block in np.unique(asked // 8):
        mine = asked[asked // 8 == block]
        again = block_reports(devices.randomness, r, int(block), values[mine])
        assert np.array_equal(again, reports[np.isin(asked, mine)])
    assert np.array_equal(devices.reports(r, values), reports)  # a retried report is identical
    support, n = devices.collect(r, values)
    assert n == asked.size
    assert np.allclose(r.make_oracle().support(reports), support)


def test_device_reports_depend_on_key_slot_and_phase():
    values = np.zeros(40, dtype=np.int64)
    base = Devices.from_seed(1, block_size=16).reports(request("oue", None, population=40, d=30), values)
    for other in (Devices.from_seed(2, block_size=16).reports(request("oue", None, 40, 30), values),
                  Devices.from_seed(1, block_size=16).reports(request("oue", None, 40, 30, slot=4), values),
                  Devices.from_seed(1, block_size=16).reports(request("oue", None, 40, 30, phase=Phase.DISSIMILARITY), values)):
        assert not np.array_equal(base, other)


def test_two_requests_for_one_slot_and_phase_draw_independent_answers():
    """A device's randomness is bound to the request it answers. It was bound to (slot, phase, block)
    only: a second request for the same users at another budget was answered from the same bytes,
    and 96% of the OUE reports at 0.05 and 0.1 came out identical."""
    users, d = 20_000, 4
    devices = Devices.from_seed(5, block_size=4096)
    values = np.random.default_rng(1).integers(0, d, users)
    first, second = request("oue", None, users, d, eps=0.05), request("oue", None, users, d, eps=0.1)
    words = [answer_keystream(devices.randomness, r, 0).words(4096) for r in (first, second)]
    assert not np.isin(words[0], words[1]).any()  # 64-bit words: a match by chance has probability 1e-12
    a, b = devices.reports(first, values), devices.reports(second, values)
    # Independent draws give the same row when every bit agrees: the user's own bit with probability
    # p1 p2 + (1 - p1)(1 - p2), each of the d - 1 others with q1 q2 + (1 - q1)(1 - q2). The share of
    # equal rows is binomial: within 5 standard errors but with probability 6e-7.
    (p1, q1), (p2, q2) = ((o.p, o.q) for o in (first.make_oracle(), second.make_oracle()))
    same = (p1 * p2 + (1 - p1) * (1 - p2)) * (q1 * q2 + (1 - q1) * (1 - q2)) ** (d - 1)
    assert abs(np.mean((a == b).all(axis=1)) - same) < 5 * math.sqrt(same * (1 - same) / users)
    assert np.array_equal(devices.reports(Request.from_dict(first.to_dict()), values), a)  # a repeat: the same


def test_sufficient_mode_and_unknown_mode():
    devices = Devices.from_seed(0, mode="sufficient")
    support, n = devices.collect(request("grr", [1, 2, 3]), np.zeros(50, dtype=np.int64))
    assert n == 3 and support.sum() == 3
    with pytest.raises(ParameterError, match="mode"):
        Devices.from_seed(0, mode="fast")


def test_request_asks_and_round_trip():
    r = request("grr", [2, 5, 9])
    assert r.asks([1, 2, 5, 9, 10]).tolist() == [False, True, True, True, False]
    assert request("grr", None).asks([0, 49, 50]).tolist() == [True, True, False]
    back = Request.from_dict(unpack(pack({"r": r.to_dict()}))["r"])
    assert back.users.tolist() == [2, 5, 9] and back.phase is Phase.PUBLICATION and back.oracle == "grr"


# --- population ledger -----------------------------------------------------------------------
@pytest.mark.parametrize("population, count", [(1000, 40), (1000, 400), (100, 60)])  # rejection; fallback x2
def test_population_samples_are_uniform(population, count):
    """Each available user is taken with probability k/A; counts over R draws ~ Bin(R, k/A)."""
    reps = 400
    ledger = PopulationLedger(population, 2)
    blocked = ledger.take(1, population // 4, np.random.default_rng(0))  # make availability uneven
    available = population - blocked.size
    count = min(count, available)
    hits = np.zeros(population)
    state = ledger.state()
    for r in range(reps):
        ledger.load(state)
        taken = ledger.take(2, count, np.random.default_rng(100 + r))
        assert taken.size == count and np.all(np.diff(taken) > 0) and not np.isin(taken, blocked).any()
        hits[taken] += 1
    p = count / available
    free = np.setdiff1d(np.arange(population), blocked)
    # each user's count ~ Bin(R, p): 4 SE per user, plus Bonferroni-free overall mean check
    assert np.abs(hits[free] / reps - p).max() < (SE + 1.5) * math.sqrt(p * (1 - p) / reps)
    assert hits[blocked].sum() == 0


def test_population_recycling_and_state():
    ledger = PopulationLedger(30, 3)
    taken = {}
    for slot in range(1, 8):
        taken[slot] = ledger.take(slot, 4, np.random.default_rng(slot))
        if slot > 1:
            taken[slot] = np.concatenate([taken[slot], ledger.take(slot, 2, np.random.default_rng(50 + slot))])
        in_window = [s for s in taken if s > slot - 3]
        assert ledger.available == 30 - sum(taken[s].size for s in in_window)
        current = np.concatenate([taken[s] for s in in_window])
        assert np.unique(current).size == current.size  # nobody twice in a window
        clone = PopulationLedger(30, 3)
        clone.load(unpack(pack(ledger.state())))
        ledger.end_slot(slot)
        clone.end_slot(slot)
        assert clone.available == ledger.available
        assert clone.state() == ledger.state()


def test_population_running_short_is_a_bug():
    ledger = PopulationLedger(5, 2)
    ledger.take(1, 5, np.random.default_rng(0))
    with pytest.raises(RuntimeError, match="ran short"):
        ledger.take(1, 1, np.random.default_rng(0))


def test_population_state_is_compact():
    population, window = 1_000_000, 20
    ledger = PopulationLedger(population, window)
    rng = np.random.default_rng(0)
    for slot in range(1, window + 1):
        ledger.take(slot, population // window - 1, rng)
    assert len(pack(ledger.state())) <= 16 * 2**20
    assert len(pack(ledger.state())) <= 4.2 * population


# --- user ledger -----------------------------------------------------------------------------
def result(slot, users1=None, eps1=0.0, users2=None, eps2=0.0):
    as_array = lambda u: None if u is None else np.asarray(u)  # noqa: E731
    return LocalStepResult(slot, np.zeros(1), Strategy.PUBLISH, eps1, eps2, users1=as_array(users1), users2=as_array(users2))


def test_user_ledger_budget_and_reports():
    ledger = UserLedger(population=3, window=3)
    spends = [ledger.record(result(t, None, 0.1, [t % 3], 0.5))[0] for t in range(1, 7)]
    assert spends == pytest.approx([0.6, 0.7, 0.8, 0.8, 0.8, 0.8])
    assert ledger.max_window_reports == 4  # three clock reports and one requested in a window
    assert ledger.max_window_spend == pytest.approx(0.8)


@pytest.mark.parametrize("budgets", [(0.25,), (0.25, 0.1), (0.3,)])
@pytest.mark.parametrize("everyone", [False, True])
def test_user_ledger_equals_every_users_own_windows(budgets, everyone):
    """Every slot's (spend, reports) and the costliest window with its user equal those of every
    user's own windows summed exactly: one budget (population division's, counted without a pass
    over the users) or several."""
    from fractions import Fraction

    from wevent.core.exact import round_up

    population, window, slots = 40, 4, 30
    rng = np.random.default_rng(len(budgets) + 2 * everyone)
    ledger, paid, tightest = UserLedger(population, window), [], None
    for t in range(1, slots + 1):
        phases = [(None if everyone and k == 0 else np.sort(rng.choice(population, rng.integers(0, 12), replace=False)),
                   float(rng.choice(budgets))) for k in range(2)]
        paid.append(phases)
        recent = paid[-window:]
        spend = [sum((Fraction(eps) for phases_ in recent for users, eps in phases_ if users is None or u in users),
                     Fraction(0)) for u in range(population)]
        reports = [sum(1 for phases_ in recent for users, _ in phases_ if users is None or u in users)
                   for u in range(population)]
        most = max(spend)
        if tightest is None or most > tightest[0]:
            listed = [spend[u] - sum((Fraction(eps) for phases_ in recent for users, eps in phases_ if users is None),
                                     Fraction(0)) for u in range(population)]
            user = listed.index(max(listed)) if max(listed) > 0 else None  # the first of the largest
            tightest = (most, max(0, t - window), t - 1, user)
        assert ledger.record(LocalStepResult(t, np.zeros(1), Strategy.PUBLISH, phases[0][1], phases[1][1],
                                             users1=phases[0][0], users2=phases[1][0])) == (round_up(most), max(reports))
        window_spend = ledger.tightest()
        assert (window_spend.first, window_spend.last, window_spend.user) == tightest[1:]


@pytest.mark.parametrize("oracle", ["grr", "oue", "hm"])
def test_empty_request(oracle):
    devices = Devices.from_seed(0, block_size=4)
    r = request(oracle, [])
    values = np.zeros(50) if oracle == "hm" else np.zeros(50, dtype=np.int64)
    support, n = devices.collect(r, values)
    assert n == 0 and not np.any(support)
    assert len(devices.reports(r, values)) == 0
