"""The central pipeline against a real broker and real worker processes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import numpy as np
import pytest

from wevent.core.central import BudgetAbsorption, BudgetDistribution
from wevent.core.randomness import DerivedRandomness, SecretKey
from wevent.stream.audit import verify
from wevent.stream.wire.records import DeadLetter
from wevent.stream.wire.reports import ReportBatch
from wevent.stream.config import parse_config
from wevent.stream.runtime.kafka import KafkaReportSink, producer_config
from wevent.stream.runtime.subscription import Releases
from tests.integration.conftest import metric_value, release_key

pytestmark = [pytest.mark.integration]

START = 1_201_910_400.0
USERS, SLOTS, DOMAIN, SEED = 3000, 60, 8, 5


def categorical_feed(users=USERS, slots=SLOTS, domain=DOMAIN, seed=SEED) -> np.ndarray:
    """Each user drifts between neighbouring cells now and then: a smooth, realistic histogram stream."""
    rng = np.random.default_rng(seed)
    values = np.empty((slots, users), dtype=np.int64)
    current = rng.integers(0, domain, users)
    for t in range(slots):
        move = rng.random(users) < 0.05
        current = np.where(move, (current + rng.choice([-1, 1], users)) % domain, current)
        values[t] = current
    return values


def counts_of(values: np.ndarray, domain=DOMAIN) -> np.ndarray:
    return np.stack([np.bincount(v, minlength=domain) for v in values]).astype(float)


def stream_spec(name, mechanism, users=USERS):
    return {"name": name, "model": "central", "mechanism": mechanism, "epsilon": 1.0, "window": 10,
            "domain": DOMAIN, "users": users, "slot_seconds": 60, "start": START}


def expected_releases(mechanism_cls, name, values):
    m = mechanism_cls(1.0, 10, DOMAIN, randomness=DerivedRandomness(SecretKey.from_seed(SEED), name))
    return m.run(counts_of(values))


def collect(bootstrap, streams, count, timeout, cluster):
    got = {}
    with Releases(bootstrap, streams=streams) as releases:
        deadline = time.monotonic() + timeout
        while sum(len(v) for v in got.values()) < count and time.monotonic() < deadline:
            for record in releases.follow(idle_timeout=1.0):
                got.setdefault(record.stream, {})[record.slot] = record
                if sum(len(v) for v in got.values()) >= count:
                    break
        assert not releases.conflicts, f"two different releases for {releases.conflicts}"
    assert sum(len(v) for v in got.values()) == count, cluster.logs()
    return got


def test_parity_with_simulate_and_bad_input(cluster_factory, tmp_path):
    from wevent.core.data import UserValues
    from wevent.core.personalized import generate

    requirements = tmp_path / "requirements.csv"
    generate("groups", USERS, 0.6, 12, seed=3).save_csv(requirements)
    personalized = {"name": "pba", "model": "personalized", "mechanism": "pba", "domain": DOMAIN, "users": USERS,
                    "slot_seconds": 60, "start": START, "options": {"requirements": str(requirements)}}
    config = parse_config({"seed": SEED, "report_partitions": 3, "stream_partitions": 2, "streams": [
        stream_spec("bd", "bd"), stream_spec("ba", "ba"), stream_spec("dirty", "ba"), personalized]})
    cluster = cluster_factory(config)
    worker = cluster.start_worker()
    values = categorical_feed()
    sinks = {name: KafkaReportSink(cluster.bootstrap, name, 3, tansu_compat=cluster.tansu_compat) for name in ("bd", "ba", "dirty", "pba")}
    from confluent_kafka import Producer

    raw = Producer(producer_config(cluster.bootstrap, tansu_compat=cluster.tansu_compat))
    dirty = config.stream("dirty")
    for slot in range(1, SLOTS + 1):
        t0 = round(dirty.slot_start(slot) * 1000)
        bad = [
            b"\xff\x00 not a report",  # malformed bytes
            ReportBatch("no-such-stream", np.array([1]), np.array([0]), np.array([t0])).encode(),
            ReportBatch("dirty", np.array([10]), np.array([DOMAIN + 3]), np.array([t0])).encode(),  # out of domain
            ReportBatch("dirty", np.array([USERS + 5]), np.array([0]), np.array([t0])).encode(),  # unknown user
        ]
        for value in bad:
            raw.produce("reports", value, partition=slot % 3)
        # user 1 belongs on partition 1, where it reports too: a second copy on partition 0 is refused
        stray = ReportBatch("dirty", np.array([1]), (values[slot - 1, 1:2] + 1) % DOMAIN, np.array([t0])).encode()
        raw.produce("reports", stray, partition=0)
        raw.flush()
        users = np.arange(USERS)
        for name, sink in sinks.items():
            if name != "dirty":
                sink.send_slot(slot, dirty.slot_start(slot), dirty.slot_end(slot), users, values[slot - 1])
                continue
            # One producer keeps per-partition order: user 0 reports, reports again (duplicate),
            # the slot's other reports and its watermark follow, then user 1 reports too late.
            first = ReportBatch("dirty", np.array([0]), values[slot - 1, :1], np.array([t0])).encode()
            sink._produce(first, 0)
            sink._produce(first, 0)
            sink.send_slot(slot, dirty.slot_start(slot), dirty.slot_end(slot), users[1:], values[slot - 1, 1:])
            late = np.array([3])  # user 3 is on partition 0 (3 mod 3)
            sink._produce(ReportBatch("dirty", late, values[slot - 1, late], np.array([t0])).encode(), 0)
    for sink in sinks.values():
        sink.close()
    got = collect(cluster.bootstrap, ["bd", "ba", "dirty", "pba"], 4 * SLOTS, 240, cluster)
    # the PBA stream equals `wevent simulate` on the same data and requirements
    dump = tmp_path / "feed.npz"
    UserValues(values, DOMAIN, user_ids=[str(u) for u in range(USERS)], slot_seconds=60, start=START).save(dump)
    simulated_log = tmp_path / "simulated.jsonl"
    subprocess.run([sys.executable, "-m", "wevent.cli", "simulate", "-m", "pba", "--input", str(dump),
                    "--requirements", str(requirements), "--seed", str(SEED), "--stream", "pba",
                    "--releases", str(simulated_log), "--json"], check=True, capture_output=True, timeout=120)
    simulated = [json.loads(line) for line in simulated_log.read_text().splitlines()]
    simulated = [r for r in simulated if r["mechanism"] == "pba"]
    assert [r["slot"] for r in simulated] == list(range(1, SLOTS + 1))
    for record in simulated:
        assert got["pba"][record["slot"]].release == record["release"]
        assert got["pba"][record["slot"]].extras == record["extras"]
    audit = subprocess.run([sys.executable, "-m", "wevent.cli", "audit", "--bootstrap", cluster.bootstrap,
                            "--release-key", release_key(config)], capture_output=True, text=True, timeout=120)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert audit.stdout.count("PASS") == 4 and "requirement types" in audit.stdout
    for name, cls in (("bd", BudgetDistribution), ("ba", BudgetAbsorption), ("dirty", BudgetAbsorption)):
        assert sorted(got[name]) == list(range(1, SLOTS + 1))
        for result in expected_releases(cls, name, values):
            record = got[name][result.slot]
            assert record.release == result.release.tolist(), f"{name} slot {result.slot}"
            assert record.strategy == result.strategy.value
    text = cluster.metrics(worker)
    for reason, expected in (("out_of_domain", SLOTS), ("unknown_user", SLOTS), ("duplicate", SLOTS), ("late", SLOTS),
                             ("wrong_partition", SLOTS)):
        assert metric_value(text, "wevent_reports_rejected_total", stream="dirty", reason=reason) == expected, reason
    assert metric_value(text, "wevent_reports_rejected_total", stream="", reason="malformed") == SLOTS
    assert metric_value(text, "wevent_reports_rejected_total", stream="", reason="unknown_stream") == SLOTS
    assert metric_value(text, "wevent_releases_total", stream="ba", strategy="publish") == sum(
        r.strategy == "publish" for r in got["ba"].values())
    letters = _read_all(cluster.bootstrap, "deadletter")
    reasons = {}
    for value in letters:
        reasons[DeadLetter.from_json(value).reason] = reasons.get(DeadLetter.from_json(value).reason, 0) + 1
    assert reasons == {"malformed": SLOTS, "unknown_stream": SLOTS, "out_of_domain": SLOTS, "unknown_user": SLOTS,
                       "duplicate": SLOTS, "late": SLOTS, "wrong_partition": SLOTS}
    malformed = [DeadLetter.from_json(v).payload for v in letters if DeadLetter.from_json(v).reason == "malformed"]
    assert all(set(p) == {"bytes", "blake2b_128"} and p["bytes"] == len(b"\xff\x00 not a report") for p in malformed)


def _read_all(bootstrap, topic):
    from wevent.stream.runtime.subscription import read_topic

    return read_topic(bootstrap, topic)


@pytest.mark.slow
def test_crash_and_restart_loses_nothing_and_spends_nothing_twice(cluster_factory):
    slots = 80
    config = parse_config({"seed": SEED, "report_partitions": 2, "stream_partitions": 1,
                           "streams": [stream_spec("ba", "ba")]})
    cluster = cluster_factory(config)
    cluster.start_worker()
    values = categorical_feed(slots=slots)
    sink = KafkaReportSink(cluster.bootstrap, "ba", 2, tansu_compat=cluster.tansu_compat)
    stream = config.stream("ba")
    sent = 0
    seen = {}
    kills = 0
    with Releases(cluster.bootstrap, streams=["ba"]) as releases:
        deadline = time.monotonic() + 600
        while len(seen) < slots and time.monotonic() < deadline:
            while sent < min(slots, len(seen) + 6):  # keep a few slots in flight
                sent += 1
                sink.send_slot(sent, stream.slot_start(sent), stream.slot_end(sent), np.arange(USERS), values[sent - 1])
                sink.producer.flush()
            for record in releases.follow(idle_timeout=0.5):
                seen[record.slot] = record
                break
            if kills < 3 and len(seen) >= (kills + 1) * 20:
                cluster.workers[-1].kill()  # SIGKILL mid-stream: slots are in flight at every stage
                kills += 1
                cluster.start_worker()
        assert not releases.conflicts, f"different releases for one slot: {releases.conflicts}"
    sink.close()
    assert kills == 3
    assert sorted(seen) == list(range(1, slots + 1)), cluster.logs()
    for result in expected_releases(BudgetAbsorption, "ba", values):
        assert seen[result.slot].release == result.release.tolist()
    audit = [json.loads(v) for v in _read_all(cluster.bootstrap, "audit")]
    findings = verify(audit)
    assert findings and all(f.ok for f in findings), findings
    assert sorted({r["slot"] for r in audit}) == list(range(1, slots + 1))


@pytest.mark.slow
def test_wevent_run_then_audit(tmp_path):
    log = tmp_path / "releases.jsonl"
    run = subprocess.run([sys.executable, "-m", "wevent.cli", "run", "--slots", "30", "--release-log", str(log), "--quiet"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = log.read_text().splitlines()
    assert len(lines) == 30 and sorted(json.loads(l)["slot"] for l in lines) == list(range(1, 31))
    key = re.search(r"signed with release public key ([0-9a-f]{64})", run.stderr).group(1)  # what the run prints
    audit = subprocess.run([sys.executable, "-m", "wevent.cli", "audit", str(log), "--release-key", key],
                           capture_output=True, text=True, timeout=60)
    assert audit.returncode == 0 and audit.stdout.startswith("PASS"), audit.stdout + audit.stderr
    assert audit.stderr == ""  # nothing dropped: every line is signed
