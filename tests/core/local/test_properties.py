"""Property-based checks of the per-user w-event guarantee (LDP-IDS Sections 1.4-1.5):
over random N, epsilon, w, d, beta and scripted decisions, no user of a population-division
method reports twice in any window of w slots, and no user of a budget-division method spends
more than epsilon in any window."""

import math

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.conftest import scripted
from tests.core.local.conftest import audit, make, run
from wevent.core.validation import ParameterError

ADAPTIVE = ("lbd", "lba", "lpd", "lpa", "lp-dsat")


@st.composite
def setups(draw, names):
    name = draw(st.sampled_from(names))
    w = draw(st.integers(1, 8))
    population = draw(st.integers(2 * w, 160))
    slots = draw(st.integers(1, 3 * w + 10))
    options = {}
    if name in ADAPTIVE:
        options["beta"] = draw(st.floats(0.05, 0.95))
        options["decision_override"] = scripted(draw(st.lists(st.sampled_from([True, False, None]), min_size=slots, max_size=slots)))
    if name in ("lpd", "lpa"):
        options["pool"] = draw(st.sampled_from(["floor", "rest"]))
    return dict(name=name, epsilon=draw(st.floats(0.05, 5.0)), window=w, domain=draw(st.integers(2, 6)),
                population=population, seed=draw(st.integers(0, 2**16)), options=options, slots=slots)


def build_and_run(setup):
    try:
        m = make(setup["name"], setup["epsilon"], setup["window"], domain=setup["domain"],
                 population=setup["population"], seed=setup["seed"], **setup["options"])
    except ParameterError as exc:  # beta * N / w < 1 leaves no dissimilarity user: not a valid set-up
        assume(not any(reason in str(exc) for reason in ("dissimilarity users", "no unit", "cutoff", "cannot fill", "n_max")))
        raise
    return m, run(m, setup["slots"], seed=setup["seed"])


@settings(max_examples=80, deadline=None)
@given(setups(["lsp", "lpu", "lpd", "lpa", "lp-dsat", "lp-rescuedp"]))
def test_population_division_one_report_per_user_per_window(setup):
    m, results = build_and_run(setup)
    ledger = audit(results, m.population, m.window)
    assert ledger.max_window_reports <= 1
    assert ledger.max_window_spend <= m.epsilon * (1 + 1e-12)


@settings(max_examples=80, deadline=None)
@given(setups(["lbu", "lbd", "lba"]))
def test_budget_division_window_spend_at_most_epsilon(setup):
    m, results = build_and_run(setup)
    ledger = audit(results, m.population, m.window)
    assert ledger.max_window_spend <= m.window_spend_bound + 1e-12
    assert m.window_spend_bound <= m.epsilon * (1 + 1e-12)
    assert math.isfinite(ledger.max_window_spend)
