"""docker/prometheus: `promtool check` accepts the rules and the scrape config, and `promtool test
rules` shows each alert firing on the series it is for and staying silent on healthy ones."""

from __future__ import annotations

import math
import subprocess

import yaml

from wevent.core.decayed import host_epsilon

from .conftest import ALERT_RULES, PROMETHEUS_CONFIG, tool

ALERTS = ("WeventWindowSpendAboveBudget", "WeventReleasesStalled", "WeventDeadLettersRising", "WeventConsumerLagGrowing")


def promtool(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([tool("promtool", "prometheus"), *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_promtool_accepts_the_alert_rules():
    result = promtool("check", "rules", str(ALERT_RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    rules = [r for g in yaml.safe_load(ALERT_RULES.read_text())["groups"] for r in g["rules"]]
    assert {r["alert"] for r in rules if "alert" in r} == set(ALERTS)
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout


def test_promtool_accepts_the_stack_scrape_config():
    result = promtool("check", "config", str(PROMETHEUS_CONFIG))
    assert result.returncode == 0, result.stdout + result.stderr


def series(name: str, values: str, **labels) -> dict:
    labels = {"job": "wevent-worker", "instance": "worker-1:6066", **labels}
    return {"series": name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}", "values": values}


def alert(name: str, at: str, *expected: dict) -> dict:
    return {"eval_time": at, "alertname": name,
            "exp_alerts": [{"exp_labels": {"job": "wevent-worker", "instance": "worker-1:6066", **labels}}
                           for labels in expected]}


def test_each_alert_fires_on_its_condition_only(tmp_path):
    budget = 1.0
    rules = yaml.safe_load(ALERT_RULES.read_text())
    for group in rules["groups"]:  # annotations are templates checked by `check rules`; compared here: conditions
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    # The worker exports a window's exact spend rounded up: a spend of exactly the budget, and one
    # ulp over it.
    spend = {"exact": budget, "one_ulp": math.nextafter(budget, 2.0)}
    # A query index reserves a share of every window. Reserving 0.25, the host may spend 0.75:
    # spending 0.8 is an overspend smaller than the reserved share, which a host-spend-against-
    # total rule misses, and spending one ulp more than 0.75 is 1 + 2^-53 in all, which a float
    # sum rounds to exactly 1. Reserving 0.1, the host's share is the largest float that fits,
    # 0.8999999999999999; 0.9 (1 - 0.1 rounded to nearest) is over by 2.8e-17.
    shared = {"shared_exact": (0.75, 0.25), "shared_over": (0.8, 0.25),
              "shared_ulp": (math.nextafter(0.75, 1.0), 0.25),
              "shared_tenth_exact": (host_epsilon(budget, 0.1), 0.1), "shared_tenth_over": (1 - 0.1, 0.1)}
    tests = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [
                *(series("wevent_window_epsilon_spent", f"{value!r}x30", stream=s) for s, value in spend.items()),
                *(series("wevent_window_epsilon_reserved", "0x30", stream=s) for s in spend),
                *(series("wevent_window_epsilon_budget", f"{budget!r}x30", stream=s) for s in spend),
                *(series("wevent_window_epsilon_spent", f"{value!r}x30", stream=s) for s, (value, _) in shared.items()),
                *(series("wevent_window_epsilon_reserved", f"{reserved!r}x30", stream=s)
                  for s, (_, reserved) in shared.items()),
                *(series("wevent_window_epsilon_budget", f"{budget!r}x30", stream=s) for s in shared),
                # a worker that exports no reserved share (one from before it) is still checked
                series("wevent_window_epsilon_spent", f"{budget + 0.5!r}x30", stream="unshared_over"),
                series("wevent_window_epsilon_budget", f"{budget!r}x30", stream="unshared_over"),
                series("wevent_window_epsilon_spent", f"{math.nextafter(budget, 2.0)!r}x30", stream="unshared_ulp"),
                series("wevent_window_epsilon_budget", f"{budget!r}x30", stream="unshared_ulp"),
                series("wevent_window_epsilon_spent", f"{budget!r}x30", stream="unshared_exact"),
                series("wevent_window_epsilon_budget", f"{budget!r}x30", stream="unshared_exact"),
                # last release at t = 0 and never again, versus one release a minute
                series("wevent_last_release_timestamp_seconds", "0x30", stream="stalled"),
                series("wevent_last_release_timestamp_seconds", "0+60x30", stream="flowing"),
                series("wevent_dead_letters_total", "0+3x60", reason="late"),
                series("wevent_dead_letters_total", "7x60", reason="malformed"),  # some once, none since
                series("wevent_faust_topic_partition_end_offset", "0+100x60", topic="reports", partition="0"),
                series("wevent_faust_topic_partition_offset_commited", "0+60x60", topic="reports", partition="0"),
                series("wevent_faust_topic_partition_end_offset", "0+100x60", topic="slots", partition="0"),
                series("wevent_faust_topic_partition_offset_commited", "0+100x60", topic="slots", partition="0"),
            ],
            "alert_rule_test": [
                alert("WeventWindowSpendAboveBudget", "10m", *({"severity": "critical", "stream": s}
                                                               for s in ("one_ulp", "shared_over", "shared_tenth_over",
                                                                         "shared_ulp", "unshared_over", "unshared_ulp"))),
                alert("WeventReleasesStalled", "10m"),
                alert("WeventReleasesStalled", "20m", {"severity": "warning", "stream": "stalled"}),
                alert("WeventDeadLettersRising", "5m"),
                alert("WeventDeadLettersRising", "30m", {"severity": "warning", "reason": "late"}),
                alert("WeventConsumerLagGrowing", "10m"),
                alert("WeventConsumerLagGrowing", "40m", {"severity": "warning", "topic": "reports"}),
            ],
        }],
    }
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests))
    result = promtool("test", "rules", "tests.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
