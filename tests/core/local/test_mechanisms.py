"""Deterministic oracles of the LDP-IDS methods (worked ledgers and scripted decisions), the slot protocol,
state restoration and input validation."""

import math

import numpy as np
import pytest

from tests.conftest import derived, scripted
from tests.core.local.conftest import audit, make, run
from wevent.core import packing
from wevent.core.base import Strategy, restore
from wevent.core.local import GRR, LPA, MECHANISMS, HybridMechanism, Request
from wevent.core.local.measures import bits_per_user_per_slot, cfpu
from wevent.core.validation import ParameterError

TOL = 1e-12
ALL = tuple(MECHANISMS)


def user_report_slots(results, population):
    """Every user's report slots (M1 and M2), from the users asked in each phase."""
    slots = [[] for _ in range(population)]
    for r in results:
        for users, eps in ((r.users1, r.eps1), (r.users2, r.eps2)):
            if eps > 0:
                for u in (range(population) if users is None else users):
                    slots[u].append(r.slot)
    return slots


# 1. LBU ----------------------------------------------------------------------------------------
def test_lbu_spends_eps_over_w_every_slot():
    eps, w, n = 2.0, 4, 40
    results = run(make("lbu", eps, w, population=n), 10)
    assert all(r.published and r.eps1 == 0 and r.eps2 == pytest.approx(eps / w) for r in results)
    ledger = audit(results, n, w)
    assert ledger.max_window_spend == pytest.approx(eps, abs=TOL)
    assert cfpu(results, n) == 1
    assert all(r.bits == n * 1 for r in results)  # GRR on d=2: 1 bit, no instruction bit


# 2. LSP ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("slots", [10, 12])
def test_lsp_schedule_gaps_and_cfpu(slots):
    w, n = 4, 20
    results = run(make("lsp", 1.0, w, population=n), slots)
    assert [r.slot for r in results if r.published] == list(range(1, slots + 1, w))
    assert all(r.strategy is Strategy.NOT_SAMPLED for r in results if not r.published)
    assert all(np.diff(s).tolist() == [w] * (len(s) - 1) for s in user_report_slots(results, n))
    assert cfpu(results, n) == pytest.approx(math.ceil(slots / w) / slots)


# 3. LPU ----------------------------------------------------------------------------------------
def test_lpu_groups_partition_and_gaps_are_w():
    w, n, slots = 4, 22, 13
    m = make("lpu", 1.0, w, population=n)
    groups = np.concatenate(m.groups)
    assert np.array_equal(np.sort(groups), np.arange(n))
    assert sorted(g.size for g in m.groups) == [5, 5, 6, 6]
    results = run(m, slots)
    for report_slots in user_report_slots(results, n):
        assert np.diff(report_slots).tolist() == [w] * (len(report_slots) - 1)
    expected = sum(m.groups[(t - 1) % w].size for t in range(1, slots + 1)) / (n * slots)
    assert cfpu(results, n) == pytest.approx(expected)


# 4. LBD ----------------------------------------------------------------------------------------
def test_lbd_worked_ledger_and_window_sums():
    eps = 1.0
    m = make("lbd", eps, 3, decision_override=scripted([True, False, True, True, False, False]))
    results = run(m, 6)
    assert [r.eps2 for r in results] == pytest.approx([eps / 4, 0, eps / 8, 3 * eps / 16, 0, 0], abs=TOL)
    assert all(r.eps1 == pytest.approx(eps / 6) for r in results)


@pytest.mark.parametrize("w", [1, 2, 3, 5])
def test_lbd_bounds_under_random_decisions(w):
    eps = 1.0
    rng = np.random.default_rng(w)
    m = make("lbd", eps, w, decision_override=lambda t: bool(rng.random() < 0.6))
    results = run(m, 60)
    eps1 = np.array([r.eps1 for r in results])
    eps2 = np.array([r.eps2 for r in results])
    for t in range(w, 60):
        assert eps1[t - w + 1 : t + 1].sum() == pytest.approx(eps / 2, abs=TOL)
        assert eps2[max(0, t - w + 1) : t + 1].sum() <= eps / 2 * (1 - 2.0**-w) + TOL
    assert audit(results, 60, w).max_window_spend <= eps + TOL


@pytest.mark.parametrize("w", [2, 3, 5])
def test_lbd_always_publish_converges(w):
    results = run(make("lbd", 1.0, w, population=10, decision_override=lambda t: True), 300)
    assert results[-1].eps2 == pytest.approx(1.0 / (2 * (w + 1)), rel=1e-9)


# 5. LBA / LPA ----------------------------------------------------------------------------------
def test_lba_worked_ledgers():
    u = 1.0 / 6
    script = {1: True, 3: False, 4: True, 6: True}
    results = run(make("lba", 1.0, 3, decision_override=script.get), 6)
    assert [r.strategy.value[0] for r in results] == list("pnapnp")
    assert [r.eps2 / u for r in results] == pytest.approx([2, 0, 0, 2, 0, 1])
    w4 = run(make("lba", 1.0, 4, decision_override=lambda t: True), 6)  # always publish: 2u, N, 1u, 1u, ...
    assert [r.strategy.value[0] for r in w4] == list("pnpppp")
    assert [r.eps2 * 8 for r in w4] == pytest.approx([2, 0, 1, 1, 1, 1])
    late = run(make("lba", 1.0, 4, decision_override=lambda t: t >= 5), 9)  # first publication at t = 5: 4u
    assert late[4].eps2 * 8 == pytest.approx(4)
    assert [r.strategy for r in late[5:8]] == [Strategy.NULLIFIED] * 3 and late[8].published


def explore(factory, depth, visit):
    """Depth-first over every publish/skip string of ``depth`` slots; branches clone via the state."""
    decisions = {}
    hook = decisions.get
    root = factory(hook)
    values = np.zeros(root.population, dtype=np.int64)

    def walk(mechanism, path):
        if len(path) == depth:
            return
        for choice in (True, False):
            decisions[len(path) + 1] = choice
            clone = restore(mechanism.to_bytes(), mechanism.randomness, decision_override=hook, devices=mechanism.devices)
            result = clone.step(values)
            visit(path + [result])
            walk(clone, path + [result])

    walk(root, [])


@pytest.mark.parametrize("name", ["lba", "lpa"])
@pytest.mark.parametrize("w, depth", [(1, 6), (2, 7), (3, 8), (4, 8), pytest.param(5, 12, marks=pytest.mark.slow)])
def test_absorption_exhaustive(name, w, depth):
    n = 8 * w
    probe = make(name, 1.0, w, population=n)
    unit = probe.unit

    def units(r):
        amount = r.eps2 if name == "lba" else r.n2
        k = amount / unit
        assert k == pytest.approx(round(k), abs=1e-9)  # tN stays an integer
        return round(k)

    def visit(path):
        k = [units(r) for r in path]
        assert all(1 <= k[i] <= w for i, r in enumerate(path) if r.published)
        assert sum(k[-w:]) <= w
        for i, r in enumerate(path):
            if r.published:  # exactly k - 1 nullified slots follow
                following = path[i + 1 : i + k[i]]
                assert all(f.strategy is Strategy.NULLIFIED for f in following)
                if i + k[i] < len(path):
                    assert path[i + k[i]].strategy is not Strategy.NULLIFIED

    explore(lambda hook: make(name, 1.0, w, population=n, decision_override=hook), depth, visit)


# 6. LPD / LPA ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["lpd", "lpa"])
@pytest.mark.parametrize("w, n", [(1, 7), (3, 60), (5, 33)])
def test_population_invariants(name, w, n):
    rng = np.random.default_rng(n)
    m = make(name, 1.0, w, population=n, decision_override=lambda t: bool(rng.random() < 0.7))
    values = np.random.default_rng(0).integers(0, 2, (50, n))
    results = []
    for t in range(1, 51):
        in_window = sum(r.n1 + r.n2 for r in results[-(w - 1):]) if w > 1 else 0
        assert m.ledger.available == n - in_window  # |U_A| at the start of t
        results.append(m.step(values[t - 1]))
        r = results[-1]
        assert r.n1 == n // (2 * w) and r.users1.size == r.n1
        if r.users2 is not None:
            assert not np.intersect1d(r.users1, r.users2).size
        assert sum(x.n2 for x in results[-w:]) <= m.pool
    for report_slots in user_report_slots(results, n):
        assert all(np.diff(report_slots) >= w)


def test_lpd_always_publish_sizes_and_u_min():
    n, w = 1600, 4
    p = n // 2
    results = run(make("lpd", 1.0, w, population=n, decision_override=lambda t: True), 60)
    assert [r.n2 for r in results[:4]] == [p // 2, p // 4, p // 8, p // 16]
    assert results[-1].n2 == pytest.approx(p / (w + 1), abs=2)
    # a pool too small to halve: N_pp = 0 never publishes (u_min = 1), err = V(eps, 0) = inf
    tiny = run(make("lpd", 1.0, 2, population=4, decision_override=lambda t: True), 10)
    assert all(r.published == (r.n2 > 0) for r in tiny)
    assert any(r.threshold == math.inf and not r.published for r in tiny)


# 7. CFPU under scripted decisions --------------------------------------------------------------
@pytest.mark.parametrize("m_pubs", [1, 2, 4])
def test_cfpu_lpd_one_window_formula(m_pubs):
    w, n = 8, 2 * 8 * 64  # n1 = 64 and P = 512 halve exactly
    spacing = w // m_pubs
    results = run(make("lpd", 1.0, w, population=n, decision_override=lambda t: (t - 1) % spacing == 0), w)
    assert sum(r.published for r in results) == m_pubs
    assert cfpu(results, n) == pytest.approx(1 / w - 1 / (w * 2 ** (m_pubs + 1)), rel=1e-12)


@pytest.mark.parametrize("spacing", [1, 3, 5])
def test_cfpu_lpa_evenly_spaced_formula(spacing):
    w, n, slots = 15, 2 * 15 * 20, 15 * 6
    m_pubs = w / spacing  # publications per window; each absorbs (w + m)/(2m) = (spacing + 1)/2 units
    script = lambda t: (t - 1) % spacing == 0  # noqa: E731
    results = run(make("lpa", 1.0, w, population=n, decision_override=script), slots)
    # the literal init k_0 = 0 shifts single publications (k alternates around (spacing + 1)/2), not the total
    assert sum(r.n2 for r in results) == slots // spacing * (spacing + 1) / 2 * 20
    assert cfpu(results, n) == pytest.approx(1 / (2 * w) + (w + m_pubs) / (4 * w**2), rel=1e-12)


@pytest.mark.parametrize("name", ["lbd", "lba"])
def test_cfpu_budget_division_is_one_plus_publications(name):
    results = run(make(name, 1.0, 4, decision_override=lambda t: t % 3 == 0), 30)
    published = sum(r.published for r in results)
    assert cfpu(results, 60) == pytest.approx(1 + published / 30)
    assert audit(results, 60, 4).max_window_reports == 4 + max(
        sum(r.published for r in results[i : i + 4]) for i in range(27))


# 8. Bits (Table 2 set-ups of the papers) ----------------------------------------------------------
@pytest.mark.parametrize("name, population, slots, domain, expected", [
    ("lpu", 200_000, 800, 2, 0.1),  # LNS
    ("lsp", 10_357, 886, 5, 0.2032),  # Taxi, GRR 3 bits + 1 instruction bit
    ("lsp", 1_023_154, 432, 118, 6.0602),  # Taobao, OUE 118 bits + 1
])
def test_table2_bits(name, population, slots, domain, expected):
    m = make(name, 1.0, 20, domain=domain, population=population)
    zeros = np.zeros(population, dtype=np.int64)
    results = [m.step(zeros) for _ in range(slots)]
    assert bits_per_user_per_slot(results, population) == pytest.approx(expected, abs=5e-5)


# --- the slot protocol and state -------------------------------------------------------------------
def drive(m, values, calls):
    """Run the protocol by hand; ``calls(m, point)`` runs after every call; yields results."""
    request = m.open_slot()
    calls(m, "open")
    if request is not None:
        m.measure(*m.devices.collect(request, values))
        calls(m, "measure")
    outcome = m.decide()
    calls(m, "decide")
    if isinstance(outcome, Request):
        outcome = m.publish(*m.devices.collect(outcome, values))
    return outcome


def same(a, b):
    same_users = all((x is None and y is None) or np.array_equal(x, y) for x, y in ((a.users1, b.users1), (a.users2, b.users2)))
    return a.slot == b.slot and a.strategy == b.strategy and np.array_equal(a.release, b.release) and same_users and (
        a.n1, a.n2, a.bits, a.eps1, a.eps2) == (b.n1, b.n2, b.bits, b.eps1, b.eps2)


def finish(m, values):
    """Complete the slot a (restored) mechanism is in the middle of; its result."""
    if m.expecting == "open_slot":
        return m.step(values)
    if m.expecting == "measure":
        m.measure(*m.devices.collect(m.pending, values))
    if m.expecting == "decide":
        outcome = m.decide()
        if not isinstance(outcome, Request):
            return outcome
    return m.publish(*m.devices.collect(m.pending, values))


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("mode", ["report", "sufficient"])
def test_state_restores_at_every_protocol_point(name, mode):
    """Serialise after every protocol call; the restored copy continues exactly like the original."""
    w, n, slots, more = 3, 40, 9, 2
    values = np.random.default_rng(1).integers(0, 3, (slots + more + 1, n))
    reference = run(make(name, 1.0, w, domain=3, population=n, mode=mode), slots + more + 1, values)
    m = make(name, 1.0, w, domain=3, population=n, mode=mode)
    points = []

    def check(live, point):
        data = live.to_json() if len(points) % 2 else live.to_bytes()
        clone = restore(data, live.randomness, devices=live.devices)
        assert (clone.slot, clone.expecting) == (live.slot, live.expecting)
        continued = [] if clone.expecting == "open_slot" else [finish(clone, values[clone.slot])]
        continued += [clone.step(values[clone.slot]) for _ in range(more)]
        assert all(same(r, reference[r.slot - 1]) for r in continued)
        points.append(point)

    for t in range(1, slots + 1):
        assert same(drive(m, values[t - 1], check), reference[t - 1])
    assert len(points) >= 2 * slots


def test_a_state_holding_its_dissimilarity_as_a_list_is_refused():
    """The measured dissimilarity as its five fields in order, before they were named, is an older layout."""
    values = np.random.default_rng(2).integers(0, 3, 40)
    live = make("lpa", 1.0, 3, domain=3, population=40)
    live.measure(*live.devices.collect(live.open_slot(), values))
    state = packing.unpack(live.to_bytes())
    named = state["dynamic"]["dissimilarity"]
    assert set(named) == {"slot", "value", "epsilon", "reporters", "variance"}
    state["dynamic"]["dissimilarity"] = [named[k] for k in ("slot", "value", "epsilon", "reporters", "variance")]
    with pytest.raises(packing.LayoutError, match="^a dissimilarity of an older layout .* start a new one$"):
        restore(packing.pack(state), live.randomness, devices=live.devices)


def test_protocol_rejects_calls_out_of_turn_and_bad_answers():
    m = make("lpa", 1.0, 3)
    with pytest.raises(ParameterError, match="out of turn"):
        m.decide()
    request = m.open_slot()
    with pytest.raises(ParameterError, match="out of turn"):
        m.open_slot()
    with pytest.raises(ParameterError, match="answers"):
        m.measure(np.zeros(2), request.size + 1)
    dis = m.measure(*m.devices.collect(request, np.zeros(60, dtype=np.int64)))
    other = make("lpa", 1.0, 3, seed=1)
    other_dis = other.measure(*other.devices.collect(other.open_slot(), np.ones(60, dtype=np.int64)))
    with pytest.raises(ParameterError, match="not the one measured"):
        m.decide(other_dis)
    assert m.decide(dis) is not None


def test_missing_users():
    m = make("lpd", 1.0, 3, decision_override=lambda t: True)
    request = m.open_slot()
    dis = m.measure(np.zeros(2), 0)  # nobody answered M1
    assert dis.value == -math.inf and dis.reporters == 0
    publication = m.decide(dis)  # forced: the override replaces dis > err
    result = m.publish(np.array([3, 4]), 7)  # 7 of the requested users answered
    assert result.published and result.n2 == 7 and result.n1 == 0 and result.eps1 == 1.0
    assert request.size == 10 and publication.size == 15
    m.open_slot()
    m.measure(np.array([5, 5]), 10)
    m.decide()
    empty = m.publish(np.zeros(2), 0)  # nobody answered M2: the last release stands, the users were charged
    assert empty.strategy is Strategy.APPROXIMATE and empty.eps2 == 1.0 and np.array_equal(empty.release, result.release)


def test_step_without_devices_and_bad_values():
    m = LPA(1.0, 3, 2, 60, randomness=derived(0))
    with pytest.raises(ParameterError, match="devices"):
        m.step(np.zeros(60, dtype=np.int64))
    m = make("lpa", 1.0, 3)
    with pytest.raises(ParameterError, match="all 60 users"):
        m.step(np.zeros(59, dtype=np.int64))
    with pytest.raises(ParameterError, match="outside the domain"):
        m.step(np.full(60, 2))


@pytest.mark.parametrize("call, message", [
    (lambda: make("lpd", 1.0, 10, population=19), "N >= 2w"),
    (lambda: make("lpa", 1.0, 10, population=19), "N >= 2w"),
    (lambda: make("lpu", 1.0, 10, population=9), "N >= w"),
    (lambda: make("lbu", 0.0), "epsilon"),
    (lambda: make("lbd", -1.0), "epsilon"),
    (lambda: make("lbu", 1.0, domain=1, oracle="grr"), "d >= 2"),
    (lambda: make("lbu", 1.0, domain=1), "d >= 2"),  # Ada picks GRR on one value
    (lambda: make("lbu", 1.0, domain=3, oracle="hm"), "d must be 1"),
    (lambda: make("lbu", 1.0, oracle="laplace"), "unknown oracle"),
    (lambda: make("lbd", 1.0, beta=1.0), "beta"),
    (lambda: make("lpd", 1.0, u_min=0), "u_min"),
    (lambda: make("lpa", 1.0, pool="all"), "pool"),
])
def test_invalid_parameters_are_parameter_errors(call, message):
    with pytest.raises(ParameterError, match=message):
        call()


def test_mean_estimation_variant():
    """Every method with the Hybrid Mechanism: fresh releases lie within 5 standard deviations
    (sqrt of V_HM(eps_2, n_2) = (B/2)^2 Var*(eps_2) / n_2) of the slot's true mean."""
    n, bound = 3000, 4.0
    values = np.random.default_rng(0).uniform(0, bound, (12, n))
    for name in ALL:
        m = make(name, 2.0, 4, domain=1, population=n, oracle="hm", bound=bound, mode="report",
                 **({"decision_override": lambda t: True} if name in ("lbd", "lba", "lpd", "lpa") else {}))
        results = run(m, 12, values)
        assert all(r.release.shape == (1,) for r in results)
        for r in results:
            if r.published:
                assert r.oracle2 == "hm"
                sd = math.sqrt(HybridMechanism(r.eps2, bound).variance(r.n2))
                assert abs(r.release[0] - values[r.slot - 1].mean()) < 5 * sd


# --- LP-DSAT_w ----------------------------------------------------------------------------------
def test_lp_dsat_exhaustion_and_window_pool():
    n, w = 400, 6
    m = make("lp-dsat", 1.0, w, population=n, cutoff=2, decision_override=lambda t: True)
    results = run(m, 40)
    n2, m2 = n - n // 2, (n - n // 2) // 2
    for i, r in enumerate(results):
        assert r.n2 in (0, m2)
        assert sum(x.n2 for x in results[max(0, i - w + 1) : i + 1]) <= n2
        window_pubs = sum(x.n2 for x in results[max(0, i - w + 1) : i])  # the previous w-1 slots
        if n2 - window_pubs < m2:  # nothing left: nobody asked, not even for M1
            assert r.strategy is Strategy.NULLIFIED and r.n1 == 0 and r.users1 is None
        else:
            assert r.n1 == n // 2 // w
    assert audit(results, n, w).max_window_reports == 1


def test_lp_dsat_controller_steps():
    """u = theta |(|rate - C/w| - sigma)| / sigma with theta = T0/10, sigma = 0.05, C/w = 2/8:
    at rate 0 the step is 0.4 T0 down; a publication at t = 1 makes rate(2) = 1/2 and the step
    0.4 T0 up; never publishing drives T to its floor 0."""
    thresholds = {}
    for publish in (True, False):
        m = make("lp-dsat", 1.0, 8, population=800, cutoff=2, decision_override=lambda t, p=publish: p)
        thresholds[publish] = []
        for row in np.zeros((4, 800), dtype=np.int64):
            m.step(row)
            thresholds[publish].append(m.threshold / m.initial_threshold)
    assert thresholds[True][:2] == pytest.approx([0.6, 1.0])
    assert thresholds[False] == pytest.approx([0.6, 0.2, 0.0, 0.0])
    with pytest.raises(ParameterError, match="cutoff"):
        make("lp-dsat", 1.0, 4, population=800, cutoff=4)


# --- LP-RescueDP --------------------------------------------------------------------------------
def test_lp_rescuedp_kalman_and_interval():
    """First sample: release = K z with K = (P0 + Q)/(P0 + Q + R); the second sample updates the
    interval by theta (1 - (delta / sqrt(R))^2) with delta = (Kp + Ki) E (one error so far)."""
    n, w = 1000, 5
    m = make("lp-rescuedp", 1.0, w, population=n)
    assert m.open_slot() is None
    request = m.decide()
    z = np.array([0.7, 0.3])
    oracle = request.make_oracle()
    support = (z * (oracle.p - oracle.q) + oracle.q) * request.size  # the support whose estimate is z
    first = m.publish(support, request.size)
    r = oracle.variance(request.size)
    k = (1 + 1e-5) / (1 + 1e-5 + r)
    assert first.release == pytest.approx(k * z)
    assert m.next_sample == 2 and m.interval == 1.0  # no interval update at the first sample
    m.open_slot()
    second_request = m.decide()
    z2 = np.array([0.6, 0.4])
    oracle2 = second_request.make_oracle()
    covariance = (1 + 1e-5) * (1 - k) + 1e-5
    second = m.publish((z2 * (oracle2.p - oracle2.q) + oracle2.q) * second_request.size, second_request.size)
    r2 = oracle2.variance(second_request.size)
    k2 = covariance / (covariance + r2)
    assert second.release == pytest.approx(first.release + k2 * (z2 - first.release))
    error = float(np.mean(np.abs(second.release - first.release)))
    interval = max(1.0, 1.0 + 10 * (1 - ((0.9 + 0.1) * error / math.sqrt(r2)) ** 2))
    assert m.interval == pytest.approx(interval)
    assert m.next_sample == 2 + math.floor(interval)


def test_lp_rescuedp_retries_when_nobody_answers():
    m = make("lp-rescuedp", 1.0, 4, population=500)
    m.open_slot()
    m.decide()
    assert m.publish(np.zeros(2), 0).strategy is Strategy.APPROXIMATE
    assert m.next_sample == 2


def test_a_publication_budget_no_report_can_carry_approximates_even_when_forced():
    """LBD halves what is left at each publication: with publications forced at every slot of a long
    window the budget falls below MIN_REPORT_EPSILON, where no oracle exists; those slots approximate."""
    from wevent.core.local.device_reports import Devices
    from wevent.core.local.lbd import LBD
    from wevent.core.local.oracle import MIN_REPORT_EPSILON

    m = LBD(1.0, 60, 2, population=20, devices=Devices.from_seed(0), decision_override=lambda t: True)
    eps2 = [r.eps2 for r in m.run(np.zeros((60, 20), dtype=int))]
    published = [e for e in eps2 if e > 0]
    assert min(published) >= MIN_REPORT_EPSILON and len(published) < 60  # the rest approximated
    assert all(e == 0 for e in eps2[len(published):])


# Users without a value --------------------------------------------------------------------------
@pytest.mark.parametrize("name", ALL)
def test_with_absent_users_the_devices_answer_one_more_category_and_releases_drop_it(name):
    """Every asked user answers, a user without a value in the absent category (the last of d + 1):
    requests, oracles and supports cover the d + 1 categories, releases the d values."""
    m = make(name, 1.0, 4, domain=3, population=400, absent=True, mode="report", decision_override=lambda t: True)
    values = np.random.default_rng(2).integers(0, 4, (8, 400))  # 3: no value
    requests = []
    for row in values:
        first = m.open_slot()
        if first is not None:
            requests.append(first)
            m.measure(*m.devices.collect(first, row))
        outcome = m.decide()
        if isinstance(outcome, Request):
            requests.append(outcome)
            outcome = m.publish(*m.devices.collect(outcome, row))
        assert outcome.release.shape == (3,)
        assert outcome.reports == outcome.n1 + outcome.n2 and outcome.n1 == (0 if first is None else first.size)
    assert m.categories == 4 and requests and all(r.domain_size == 4 for r in requests)
    assert restore(m.to_bytes(), derived(0)).params() == m.params() and m.params()["absent"] is True


def test_a_release_with_absent_users_estimates_each_values_share_of_all_the_users():
    """LBU at eps = w asks everyone at eps = 1 per slot; GRR over d + 1 = 4 categories is unbiased for
    each category's share of the N users, so the released bins estimate the values' shares of all
    the users. Each release's bins have variance at most V(1, N) averaged over the categories times
    d + 1 (one bin's variance is at most the sum): 5 of those standard deviations per bin."""
    users = 20_000
    shares = np.array([0.5, 0.2, 0.1, 0.2])  # the last: users without a value
    values = np.repeat(np.arange(4), (shares * users).astype(int))
    m = make("lbu", 4.0, 4, domain=3, population=users, absent=True, mode="report", oracle="grr")
    release = m.step(values).release
    bound = 5 * math.sqrt(4 * GRR(1.0, 4).variance(users))
    assert release.shape == (3,) and np.all(np.abs(release - shares[:3]) < bound)


def test_a_mean_has_no_absent_category():
    with pytest.raises(ParameterError, match="every user's value in every slot"):
        make("lbu", oracle="hm", domain=1, absent=True)
