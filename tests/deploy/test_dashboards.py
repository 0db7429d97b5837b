"""A real Prometheus (Debian's binary) scrapes a running `wevent run` and every PromQL expression of
every dashboard panel returns data through Prometheus's HTTP API; the alert rules load and the
budget alert stays silent.

The run uses the stack's stream config (docker/config/streams.toml) with every stream whose kind
the pipeline supports (probed with the real config parser and `logic_for`); the central stream is
fed by `wevent run`, the others by the stack's own replay and device-fleet commands, taken from
docker-compose.yml and pointed at this run. The test sends one malformed message and one late
report so that the rejection and dead-letter panels have something to show. A panel on metrics
that only a stream kind the pipeline refuses would export (the local model's) is skipped with the
refusal as its reason.

`WEVENT_DASHBOARD_PNG=docker/grafana/dashboard.png` also renders the dashboard from this run's data
with docker/grafana/render_dashboard.py (needs matplotlib) and runs the replay longer for it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np
import pytest
import yaml

from wevent.stream.runtime import prometheus as metrics
from wevent.stream.runtime.broker import free_port, wait_for_port
from wevent.stream.wire.reports import ReportBatch
from wevent.stream.config import ConfigError, parse_config
from wevent.stream.runtime.kafka import producer_config
from wevent.stream.agents.processors import logic_for
from wevent.stream.settings import Settings

from .conftest import ALERT_RULES, DASHBOARDS, DOCKER, keys_env, source_of, tool

pytestmark = [pytest.mark.slow, pytest.mark.integration]

# A scrape may take as long as its interval: a worker whose event loop is busy for a second under
# load answers late, not never.
SCRAPE_SECONDS = 2
RATE_INTERVAL = f"{4 * SCRAPE_SECONDS}s"  # Grafana's $__rate_interval: at least four scrape intervals
HEALTH_WINDOW = "30s"  # a target is healthy when one of its scrapes in this window succeeded
RENDER_TO = os.environ.get("WEVENT_DASHBOARD_PNG")
SPEED = 300.0 if RENDER_TO else 600.0  # the feeders' 5-minute slots: 1 or 2 a second
DATA_DEADLINE = 240 if RENDER_TO else 60  # seconds to wait for every panel's data, the run still going
RELEASE_WAIT, FLUSH_WAIT, DUMP_WAIT = 90, 30, 120  # seconds: the first releases, the bad input, the device values
# `wevent run` replays the whole bundled sample (288 5-minute slots), slowly enough to outlast every
# wait of the fixture at its deadline (and a margin for the last queries); the fixture stops it.
FEED_SLOTS = 288
RUN_SECONDS = RELEASE_WAIT + FLUSH_WAIT + DUMP_WAIT + DATA_DEADLINE + 30
RUN_SPEED = min(SPEED, 300 * FEED_SLOTS // RUN_SECONDS)
RENDERER = DOCKER / "grafana" / "render_dashboard.py"
LOCAL_METRICS = {m._name for m in vars(metrics).values()
                 if hasattr(m, "_documentation") and m._documentation.startswith("Local model:")}


def dashboard_panels() -> list[tuple[str, dict]]:
    panels = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        for panel in json.loads(path.read_text())["panels"]:
            for inner in [panel, *panel.get("panels", [])]:  # a collapsed row holds its panels
                if inner.get("targets"):
                    panels.append((path.stem, inner))
    return panels


PANELS = dashboard_panels()


def load_renderer():
    """docker/grafana/render_dashboard.py, which also knows how Grafana fills the dashboard's variables."""
    spec = importlib.util.spec_from_file_location("render_dashboard", RENDERER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GRAFANA_PROMQL = load_renderer().grafana_promql


def promql(expr: str, streams: list[str]) -> str:
    """The expression as Grafana sends it, with the stream variable set to ``streams``."""
    return GRAFANA_PROMQL(expr, streams, RATE_INTERVAL)


def kinds_needed(panel: dict) -> set[str]:
    exprs = " ".join(t["expr"] for t in panel["targets"])
    return {"local"} if any(name in exprs for name in LOCAL_METRICS) else set()


@dataclass
class Run:
    """The config that ran, what the pipeline refused, and what Prometheus answered."""

    streams: list[str]
    unsupported: dict[str, str]  # stream kind -> the config error that refused it
    prometheus: str
    answers: dict[str, list] = field(default_factory=dict)  # expression -> result vector
    rules: list[dict] = field(default_factory=list)
    targets: list[dict] = field(default_factory=list)
    spent: list = field(default_factory=list)  # the series the budget alert compares with the budget
    released: set[str] = field(default_factory=set)  # streams with a scraped release
    jobs: set[str] = field(default_factory=set)  # scrape jobs of the generated config
    up: dict[tuple[str, str], float] = field(default_factory=dict)  # (job, instance) -> best `up` in HEALTH_WINDOW
    stopped_feeders: list[str] = field(default_factory=list)  # feeders that failed during the run
    log: str = ""


def supported_config(raw: dict) -> tuple[dict, dict[str, str]]:
    """The stack's config cut to the streams this pipeline runs; the kinds it refused, with why."""
    top = {k: v for k, v in raw.items() if k != "streams"}
    kept, refused = [], {}
    for stream in raw["streams"]:
        try:
            config = parse_config({**top, "seed": 0, "streams": [stream]})
            logic_for(config, config.streams[0], Settings())
            kept.append(stream)
        except ConfigError as exc:
            refused[stream["model"]] = str(exc)
    return {**top, "streams": kept}, refused


def query(prometheus: str, expr: str) -> list:
    url = f"{prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.loads(response.read())
    assert body["status"] == "success", body
    return body["data"]["result"]


def api(prometheus: str, path: str) -> dict:
    with urllib.request.urlopen(f"{prometheus}/api/v1/{path}", timeout=10) as response:
        return json.loads(response.read())["data"]


def wait_for(predicate, timeout: float, what: str, log) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not within {timeout:.0f} s; wevent run's output:\n{log()}")
        time.sleep(0.5)


def send_bad_input(bootstrap: str, stream: dict) -> None:
    """One malformed message and one report for slot 1, which has closed: both dead-lettered."""
    from confluent_kafka import Producer

    producer = Producer(producer_config(bootstrap, tansu_compat=True))
    late = ReportBatch(stream["name"], np.array([0]), np.array([0]), np.array([round(stream["start"] * 1000)]))
    producer.produce("reports", b"not a report", partition=0)
    producer.produce("reports", late.encode(), partition=0)
    assert producer.flush(FLUSH_WAIT) == 0


def wevent_process(argv: list[str], log: Path, env: dict | None = None) -> subprocess.Popen:
    """Run in the log's directory, as a container in its own: a device fleet keeps its ledger there."""
    return subprocess.Popen([sys.executable, "-m", "wevent.cli", *argv], stdout=subprocess.DEVNULL,
                            stderr=open(log, "ab"), start_new_session=True, env={**os.environ, **(env or {})},
                            cwd=log.parent)


def option(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def feeders(compose: dict, streams: set[str]) -> list[dict]:
    """The stack's services that send one of ``streams`` to Kafka: replays and device-fleet shards."""
    return [s for s in compose["services"].values() if s.get("command", [""])[0] in ("replay", "devices")
            and "--bootstrap" in s["command"] and option(s["command"], "--stream") in streams]


def on_this_machine(service: dict, replacements: dict) -> list[str]:
    """A compose service's `wevent` arguments with some options replaced and its mounted files on the host."""
    argv = list(service["command"])
    for flag, value in replacements.items():
        if flag in argv:
            argv[argv.index(flag) + 1] = str(value)
    host = [source_of(service, arg) if arg.startswith("/") else None for arg in argv]
    return [f"{found[0]}/{found[1]}" if found and found[0].startswith("/") else arg for arg, found in zip(argv, host)]


def start_feeder(compose: dict, service: dict, replacements: dict, env: dict, tmp: Path) -> subprocess.Popen:
    """A feeder as docker-compose runs it; a device shard's values are first dumped by the service
    that writes them there (tests/deploy/test_compose.py checks that one does), once: the shards of
    a stream read the same dump, and a second writer would rewrite it under a running shard."""
    log = tmp / "feeders.log"
    values = option(service["command"], "--values")
    if values:
        writer = next(s for s in compose["services"].values() if "--dump" in s.get("command", [])
                      and source_of(s, option(s["command"], "--dump")) == source_of(service, values))
        dump = tmp / PurePosixPath(values).name
        if not dump.exists():
            assert wevent_process(on_this_machine(writer, {"--dump": dump}), log).wait(DUMP_WAIT) == 0, log.read_text()
        replacements = {**replacements, "--values": dump}
    return wevent_process(on_this_machine(service, replacements), log, env)


@pytest.fixture(scope="module")
def run(compose, streams_raw, tmp_path_factory) -> Run:
    tmp = tmp_path_factory.mktemp("dashboards")
    config, unsupported = supported_config(streams_raw)
    config_path = tmp / "streams.json"
    config_path.write_text(json.dumps(config))
    central = next(s for s in config["streams"] if s["model"] == "central")  # fed by `wevent run`
    scraped = {"--truth-port": "wevent-truth", "--metrics-port": "wevent-devices"}  # feeders' ports -> job
    others = [(service, {flag: free_port() for flag in scraped if flag in service["command"]})
              for service in feeders(compose, {s["name"] for s in config["streams"]} - {central["name"]})]
    worker_port, truth_port, prometheus_port = free_port(), free_port(), free_port()
    targets = {"wevent-worker": [worker_port], "wevent-truth": [truth_port]}
    for _, ports in others:
        for flag, port in ports.items():
            targets.setdefault(scraped[flag], []).append(port)
    (tmp / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": f"{SCRAPE_SECONDS}s", "scrape_timeout": f"{SCRAPE_SECONDS}s",
                   "evaluation_interval": f"{SCRAPE_SECONDS}s"},
        "rule_files": [str(ALERT_RULES)],
        "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [f"127.0.0.1:{p}" for p in ports]}]}
                           for job, ports in targets.items()],
    }))
    prometheus = subprocess.Popen(
        [tool("prometheus", "prometheus"), f"--config.file={tmp / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp / 'tsdb'}", f"--web.listen-address=127.0.0.1:{prometheus_port}", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=open(tmp / "prometheus.log", "wb"), start_new_session=True)
    output = tmp / "wevent-run.log"
    keys = keys_env()
    wevent = wevent_process(["run", "--config", str(config_path), "--stream", central["name"], "--slots",
                             str(FEED_SLOTS), "--speed", str(RUN_SPEED), "--metrics-port", str(worker_port), "--truth-port", str(truth_port),
                             "--quiet"], output, {k: keys[k] for k in ("WEVENT_NOISE_KEY", "WEVENT_DEVICE_PUBLIC_KEY")})
    fleet = []
    result = Run([s["name"] for s in config["streams"]], unsupported, f"http://127.0.0.1:{prometheus_port}",
                 jobs=set(targets))
    log = lambda: output.read_text(errors="replace")  # noqa: E731
    try:
        wait_for_port("127.0.0.1", prometheus_port)
        wait_for(lambda: re.search(r"^broker (\S+)", log(), flags=re.M), 60, "wevent run's broker", log)
        bootstrap = re.search(r"^broker (\S+)", log(), flags=re.M).group(1)
        released = f'wevent_last_released_slot{{stream="{central["name"]}"}} >= 2'
        wait_for(lambda: query(result.prometheus, released), RELEASE_WAIT, "a scraped release of slot 2", log)
        send_bad_input(bootstrap, central)
        env = {**{k: keys[k] for k in ("WEVENT_DEVICE_KEY", "WEVENT_REQUEST_PUBLIC_KEY")}, "WEVENT_TANSU_COMPAT": "1"}
        devices_first = sorted(others, key=lambda other: other[0]["command"][0] != "devices")  # before the requests
        fleet = [start_feeder(compose, service, {**ports, "--config": config_path, "--bootstrap": bootstrap,
                                                 "--speed": SPEED}, env, tmp) for service, ports in devices_first]
        expressions = {promql(t["expr"], result.streams): not kinds_needed(panel) & set(unsupported)
                       for _, panel in PANELS for t in panel["targets"]}  # expression -> its data is expected
        answers = {}
        deadline = time.monotonic() + DATA_DEADLINE
        while wevent.poll() is None and time.monotonic() < deadline:  # instant queries see live series only
            answers.update({expr: got for expr in expressions.keys() - answers.keys()
                            if (got := query(result.prometheus, expr))})
            result.released = {r["metric"]["stream"] for r in query(result.prometheus, "wevent_last_released_slot")}
            if not RENDER_TO and all(expr in answers for expr, expected in expressions.items() if expected) \
                    and result.released == set(result.streams):
                break
            time.sleep(1)
        result.answers = {expr: answers.get(expr, []) for expr in expressions}
        result.stopped_feeders = [" ".join(p.args[3:]) for p in fleet if p.poll() not in (None, 0)]
        assert wevent.poll() is None, f"wevent run ended while the test was still querying:\n{log()}"
        result.rules = [rule for group in api(result.prometheus, "rules")["groups"] for rule in group["rules"]]
        result.targets = api(result.prometheus, "targets")["activeTargets"]
        result.up = {(r["metric"]["job"], r["metric"]["instance"]): float(r["value"][1])
                     for r in query(result.prometheus, f"max_over_time(up[{HEALTH_WINDOW}])")}
        result.spent = query(result.prometheus, "wevent_window_epsilon_spent")
        if RENDER_TO:  # rates over 20 s, as Grafana draws them with the compose stack's 5 s scrapes
            subprocess.run([os.environ.get("WEVENT_RENDER_PYTHON", sys.executable), str(RENDERER),
                            "--prometheus", result.prometheus, "--minutes", "4.5", "--rate-interval", "20s",
                            "--out", RENDER_TO, *result.streams], check=True)
        feeders_log = tmp / "feeders.log"
        result.log = log() + (f"\nfeeders (docker-compose commands):\n{feeders_log.read_text(errors='replace')[-3000:]}"
                              if feeders_log.exists() else "")
    finally:
        for process in (*fleet, wevent, prometheus):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGINT if process is wevent else signal.SIGTERM)
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
    return result


@pytest.mark.parametrize("dashboard, panel", PANELS, ids=[f"{d}: {p['title']}" for d, p in PANELS])
def test_every_panel_expression_returns_data(run, dashboard, panel):
    missing = kinds_needed(panel) & set(run.unsupported)
    if missing:
        kind = missing.pop()
        pytest.skip(f"panel {panel['title']!r} shows {kind}-model metrics; the pipeline refuses that kind "
                    f"yet: {run.unsupported[kind]}")
    empty = [promql(t["expr"], run.streams) for t in panel["targets"] if not run.answers[promql(t["expr"], run.streams)]]
    assert not empty, (f"dashboard {dashboard!r}, panel {panel['title']!r}: no data for\n  " + "\n  ".join(empty)
                       + f"\nstreams {run.streams}; wevent run's output:\n{run.log}")


def test_the_stack_feeders_keep_running(run):
    """The replays and device shards of docker-compose.yml never fail (a replay may finish its feed)."""
    assert run.stopped_feeders == [], run.log


def test_every_stream_of_the_run_is_released(run):
    """Each supported stream's feeder from docker-compose.yml reaches the worker (not only `wevent run`'s)."""
    assert run.released == set(run.streams), run.log


def test_prometheus_scraped_every_target(run):
    """Every target of every job answered a scrape in the last HEALTH_WINDOW, the run still going.
    Judged over a window, not by the last scrape alone: a worker whose event loop was busy past the
    scrape timeout under load fails one scrape and answers the next."""
    assert {t["labels"]["job"] for t in run.targets} == run.jobs
    down = {t["scrapeUrl"]: (t["labels"]["job"], t["lastError"]) for t in run.targets
            if run.up.get((t["labels"]["job"], t["labels"]["instance"])) != 1}
    assert down == {}, run.log


def test_alert_rules_evaluate_and_the_budget_alert_stays_silent(run):
    assert run.rules and all(rule["health"] == "ok" for rule in run.rules), run.rules
    budget = next(rule for rule in run.rules if rule.get("name") == "WeventWindowSpendAboveBudget")
    assert budget["state"] == "inactive" and budget["alerts"] == []
    assert run.spent, "the budget alert was evaluated on no data"
