"""docker/prometheus: `promtool check` accepts the rules and the scrape config, `promtool test
rules` shows each alert firing on the series it is for and staying silent on healthy ones, and
every alert's runbook_url names a section of the runbook in docker/README.md."""

from __future__ import annotations

import math
import re
import subprocess

import yaml

from wevent.core.decayed import host_epsilon

from .conftest import ALERT_RULES, PROMETHEUS_CONFIG, tool

ALERTS = ("WeventWindowSpendAboveBudget", "WeventReleasesStalled", "WeventDeadLettersRising", "WeventConsumerLagGrowing",
          "WeventAllWorkersDown", "WeventWorkerDown", "WeventStreamMetricsAbsent", "WeventStreamSeriesAbsent")


def promtool(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([tool("promtool", "prometheus"), *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_promtool_accepts_the_alert_rules():
    result = promtool("check", "rules", str(ALERT_RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    rules = [r for g in yaml.safe_load(ALERT_RULES.read_text())["groups"] for r in g["rules"]]
    assert {r["alert"] for r in rules if "alert" in r} == set(ALERTS)
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout


def anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a document's headings: lower case, punctuation dropped, spaces as '-'."""
    return {re.sub(r"[^a-z0-9 _-]", "", heading.strip().lower()).replace(" ", "-")
            for heading in re.findall(r"^#+ (.+)$", markdown, flags=re.M)}


def test_every_alert_links_a_runbook_section_that_exists():
    readme = ALERT_RULES.parents[1] / "README.md"
    sections = anchors(readme.read_text())
    rules = [r for g in yaml.safe_load(ALERT_RULES.read_text())["groups"] for r in g["rules"] if "alert" in r]
    for rule in rules:
        path, _, anchor = rule["annotations"]["runbook_url"].partition("#")
        assert path == "docker/README.md" and anchor in sections, f"{rule['alert']}: no section #{anchor}"
        section = readme.read_text().split(f"### {rule['alert']}")[1].split("\n### ")[0]
        assert all(part in section for part in ("**Means**", "**Check**", "**Do**")), rule["alert"]


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
                series("up", "1x60"),
                series("up", "1x10 0x50", instance="worker-2:6066"),
                # a stream whose series vanish at 10m; one handed from worker-1 to worker-2 at 10m
                series("wevent_last_release_timestamp_seconds", "0+60x10 _x50", stream="gone"),
                series("wevent_last_release_timestamp_seconds", "0+60x10 _x50", stream="handed"),
                series("wevent_last_release_timestamp_seconds", "_x10 660+60x50", stream="handed",
                       instance="worker-2:6066"),
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
                alert("WeventWorkerDown", "12m"),
                {"eval_time": "20m", "alertname": "WeventWorkerDown", "exp_alerts": [{"exp_labels": {
                    "job": "wevent-worker", "instance": "worker-2:6066", "severity": "warning"}}]},
                {"eval_time": "30m", "alertname": "WeventAllWorkersDown", "exp_alerts": []},
                {"eval_time": "30m", "alertname": "WeventStreamMetricsAbsent", "exp_alerts": []},
                {"eval_time": "15m", "alertname": "WeventStreamSeriesAbsent", "exp_alerts": []},
                {"eval_time": "30m", "alertname": "WeventStreamSeriesAbsent", "exp_alerts": [{"exp_labels": {
                    "stream": "gone", "severity": "warning"}}]},
            ],
        }, {
            "interval": "1m",  # every worker down
            "input_series": [series("up", "0x30"), series("up", "0x30", instance="worker-2:6066")],
            "alert_rule_test": [
                {"eval_time": "1m", "alertname": "WeventAllWorkersDown", "exp_alerts": []},
                {"eval_time": "5m", "alertname": "WeventAllWorkersDown", "exp_alerts": [{"exp_labels": {
                    "severity": "critical"}}]},
            ],
        }, {
            "interval": "1m",  # no worker scraped at all
            "input_series": [series("wevent_dead_letters_total", "0x30")],
            "alert_rule_test": [
                {"eval_time": "5m", "alertname": "WeventAllWorkersDown", "exp_alerts": [{"exp_labels": {
                    "job": "wevent-worker", "severity": "critical"}}]},
                {"eval_time": "30m", "alertname": "WeventStreamMetricsAbsent", "exp_alerts": []},
            ],
        }, {
            "interval": "1m",  # workers up, no stream's metrics
            "input_series": [series("up", "1x30")],
            "alert_rule_test": [
                {"eval_time": "10m", "alertname": "WeventStreamMetricsAbsent", "exp_alerts": []},
                {"eval_time": "20m", "alertname": "WeventStreamMetricsAbsent", "exp_alerts": [{"exp_labels": {
                    "severity": "warning"}}]},
            ],
        }],
    }
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests))
    result = promtool("test", "rules", "tests.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
