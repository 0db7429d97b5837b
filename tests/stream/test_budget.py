"""One Budget per stream, from the config to the audit record and the Prometheus gauges."""

import json
from fractions import Fraction

import pytest
from prometheus_client import REGISTRY

from wevent.core.synthetic import synthetic
from wevent.stream.audit import verify
from wevent.stream.config import ConfigError
from tests.stream.harness import InProcessPipeline
from tests.stream.test_processors import START, feed
from tests.helpers import stream_config

SLOTS = 30


def config(name, epsilon=0.9, query=None, model="central", mechanism="ba"):
    if model == "personalized":  # the users' requirements stand for the stream's epsilon and window
        budget = {"epsilon": None, "window": None,
                  "options": {"requirements": {"mix": "groups", "epsilon": 0.6, "window": 8, "seed": 1}}}
    else:
        budget = {"epsilon": epsilon, "window": 5}
    return stream_config(seed=4, name=name, model=model, mechanism=mechanism, domain=2, users=400, start=START,
                         query=query, **budget)


def released(name, **kwargs):
    pipeline = InProcessPipeline(config(name, **kwargs))
    feed(pipeline, name, synthetic("sin", 400, SLOTS, seed=9).values(), SLOTS)
    return pipeline


def gauge(metric, stream):
    return REGISTRY.get_sample_value(metric, {"stream": stream})


def test_the_budget_is_settled_once_with_its_shares():
    stream = config("b", query={"mode": "B", "window": 16, "decay": 0.9, "epsilon": 0.3}).streams[0]
    assert (stream.budget.total, stream.budget.reserved, stream.budget.window) == (0.9, 0.3, 5)
    assert stream.budget is stream.budget  # resolved once, not per use
    assert config("p", model="personalized", mechanism="pba").streams[0].budget is None
    with pytest.raises(ConfigError, match="leaves nothing of the total 0.9"):
        config("b", query={"mode": "B", "window": 16, "decay": 0.9, "epsilon": 0.9})


def test_the_audit_record_carries_the_configured_total_not_host_plus_reserved():
    # 0.9 - 0.3 + 0.3 is 0.9000000000000001 in floats: re-adding the share to the host's budget
    # declared a budget the config never gave
    pipeline = released("carried", query={"mode": "B", "window": 16, "decay": 0.9, "epsilon": 0.3})
    audit = [json.loads(v) for v in pipeline.log["audit"]]
    assert {(a["epsilon"], a["reserved"]) for a in audit} == {(0.9, 0.3)}
    # the host mechanism's budget: the largest float whose exact sum with 0.3 fits 0.9 (0.9 - 0.3
    # rounds up to 0.6000000000000001, a host that would overspend by 5.5e-17)
    assert {r.epsilon for r in pipeline.releases("carried")} == {0.6}
    assert Fraction(0.6) + Fraction(0.3) <= Fraction(0.9) < Fraction(0.9 - 0.3) + Fraction(0.3)
    assert verify(audit)[0].ok


@pytest.mark.parametrize("name, query, reserved", [
    ("gauged", {"mode": "B", "window": 16, "decay": 0.9, "epsilon": 0.3}, 0.3),
    ("gauged-plain", None, 0.0),
])
def test_the_gauges_show_the_host_spend_the_reserved_share_and_the_total(name, query, reserved):
    pipeline = released(name, query=query)
    last = pipeline.releases(name)[-1]
    assert gauge("wevent_window_epsilon_spent", name) == last.window_spend > 0
    assert gauge("wevent_window_epsilon_reserved", name) == reserved
    assert gauge("wevent_window_epsilon_budget", name) == 0.9
    # the alert's condition, on what a healthy stream exports
    assert last.window_spend + reserved <= 0.9 + 1e-9


def test_a_personalized_stream_shows_its_tightest_type_against_its_own_epsilon():
    pipeline = released("gauged-types", model="personalized", mechanism="pba")
    last = pipeline.releases("gauged-types")[-1]
    spent, budget = gauge("wevent_window_epsilon_spent", "gauged-types"), gauge("wevent_window_epsilon_budget",
                                                                                   "gauged-types")
    assert gauge("wevent_window_epsilon_reserved", "gauged-types") == 0.0
    assert spent / budget == pytest.approx(last.extras["window_spend_ratio"], rel=1e-12) and spent <= budget
