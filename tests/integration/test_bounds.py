"""Poison messages and backlogs against a real broker and a real worker: the worker
stays up, every stream keeps releasing, and a full-speed replay of the bundled sample equals
`wevent simulate` at a flat release rate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from wevent.core.central import BudgetAbsorption
from wevent.core.data import UserValues
from wevent.core.randomness import DerivedRandomness, SecretKey
from wevent.stream.wire.reports import ReportBatch, report_partition
from wevent.stream.config import parse_config
from wevent.stream.runtime.kafka import KafkaReportSink
from wevent.stream.agents.assemble import slots_ahead
from wevent.stream.runtime.subscription import Releases
from tests.integration.conftest import compat_flags, metric_value

pytestmark = [pytest.mark.integration]

TDRIVE = Path(__file__).resolve().parents[2] / "producers" / "fixtures" / "tdrive"
START = 1_201_910_400.0
USERS, DOMAIN, SEED, PARTITIONS = 400, 6, 3, 2


def central(name, users=USERS, domain=DOMAIN, **extra):
    return {"name": name, "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 10, "domain": domain,
            "users": users, "slot_seconds": 60, "start": START, **extra}


def feed(slots, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, DOMAIN, (slots, USERS))


def expected(name, values):
    mechanism = BudgetAbsorption(1.0, 10, DOMAIN, randomness=DerivedRandomness(SecretKey.from_seed(SEED), name))
    counts = np.stack([np.bincount(v, minlength=DOMAIN) for v in values]).astype(float)
    return {r.slot: r.release.tolist() for r in mechanism.run(counts)}


def follow(bootstrap, streams, count, timeout, cluster, arrivals=None, clock=time.monotonic):
    """slot -> release per stream, until ``count`` releases came; ``arrivals`` gets ``clock()`` as each
    one arrives."""
    got = {}
    deadline = time.monotonic() + timeout
    with Releases(bootstrap, streams=streams) as releases:
        while sum(map(len, got.values())) < count and time.monotonic() < deadline:
            for record in releases.follow(idle_timeout=1.0):
                if record.slot not in got.setdefault(record.stream, {}) and arrivals is not None:
                    arrivals.append(clock())
                got[record.stream][record.slot] = record.release
                if sum(map(len, got.values())) >= count:
                    break
        assert not releases.conflicts, f"two different releases for {releases.conflicts}"
    assert sum(map(len, got.values())) == count, cluster.logs()
    return got


def send(cluster, name, values, first_slot=1):
    stream = cluster.config.stream(name)
    sink = KafkaReportSink(cluster.bootstrap, name, PARTITIONS, tansu_compat=cluster.tansu_compat)
    for slot in range(first_slot, first_slot + len(values)):
        sink.send_slot(slot, stream.slot_start(slot), stream.slot_end(slot), np.arange(USERS), values[slot - first_slot])
    sink.close()


def test_a_9999_slot_batch_does_not_stop_the_worker_or_any_stream(cluster_factory):
    """One valid user reporting at slots 7..10,005 (in the old horizon): the worker once wrote a
    2.95 MB state value, failed, and crash-looped with every stream down."""
    config = parse_config({"seed": SEED, "report_partitions": PARTITIONS, "stream_partitions": 2,
                           "streams": [central("victim"), central("other")]})
    cluster = cluster_factory(config)
    worker = cluster.start_worker()
    slots = 20
    values = {"victim": feed(slots, 1), "other": feed(slots, 2)}
    user = 5
    victim = config.stream("victim")
    poison_slots = np.arange(7, 10_006)  # the user's own values where it reports anyway: no release may change
    poison = ReportBatch("victim", np.full(poison_slots.size, user),
                         np.where(poison_slots <= slots, values["victim"][np.minimum(poison_slots, slots) - 1, user], 0),
                         np.round((victim.start + (poison_slots - 1) * 60.0) * 1000))
    sink = KafkaReportSink(cluster.bootstrap, "victim", PARTITIONS, tansu_compat=cluster.tansu_compat)
    sink._produce(poison.encode(), int(report_partition(np.array([user]), PARTITIONS)[0]))
    sink.close()
    for name in values:
        send(cluster, name, values[name])
    got = follow(cluster.bootstrap, ["victim", "other"], 2 * slots, 180, cluster)
    for name in values:
        assert got[name] == expected(name, values[name]), name
    assert worker.alive, cluster.logs()
    refused = poison_slots.size - (slots_ahead(victim) - 6)
    assert metric_value(cluster.metrics(worker), "wevent_reports_rejected_total", stream="victim",
                        reason="too_far_ahead") == refused
    assert "Error" not in worker.log_tail(200), worker.log_tail(200)


@pytest.mark.slow
def test_a_backlog_of_1000_slots_keeps_the_other_streams_releasing(cluster_factory):
    """A producer 1,000 slots ahead of the worker: the backlog is released in full, equal to the
    simulation, while a stream sent afterwards releases meanwhile."""
    config = parse_config({"seed": SEED, "report_partitions": PARTITIONS, "stream_partitions": 2,
                           "streams": [central("backlog"), central("other")]})
    cluster = cluster_factory(config)
    worker = cluster.start_worker()
    backlog, others = feed(1000, 3), feed(20, 4)
    send(cluster, "backlog", backlog)
    send(cluster, "other", others)
    started = time.monotonic()
    got = follow(cluster.bootstrap, ["other"], 20, 300, cluster)
    other_done = time.monotonic() - started
    assert got["other"] == expected("other", others)
    got = follow(cluster.bootstrap, ["backlog"], 1000, 900, cluster)
    assert got["backlog"] == expected("backlog", backlog)
    assert worker.alive, cluster.logs()
    print(f"other stream released 20 slots within {other_done:.1f} s of a 1,000-slot backlog")


def cpu_seconds(*pids: int) -> float:
    """The user plus system CPU time that processes ``pids`` have used so far (utime and stime, the
    14th and 15th fields of /proc/PID/stat, in clock ticks)."""
    ticks = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()  # fields from the 3rd on: the name may hold spaces
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def run_cli(*arguments, timeout=600):
    done = subprocess.run([sys.executable, "-m", "wevent.cli", *arguments], capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.slow
@pytest.mark.tansu_only("README's replay runs on the embedded broker; the full 1,439 slots run once, and the "
                        "worker's state and rate do not depend on the broker")
def test_a_full_speed_replay_of_the_sample_equals_simulate_at_a_flat_rate(cluster_factory, tmp_path):
    """README's fast replay (default profile, speed 0) into one BA stream: the worker once died on a
    1 MB state message after 91-181 of 1,439 slots, and its release rate fell with the backlog."""
    dump = tmp_path / "taxi.npz"
    run_cli("replay", "tdrive", str(TDRIVE), "--dump", str(dump), "--no-progress")
    data = UserValues.load(dump)
    assert data.slots == 1439
    config = parse_config({"seed": SEED, "report_partitions": 2, "stream_partitions": 2, "streams": [{
        "name": "taxi", "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 20,
        "domain": data.domain_size, "users": data.users, "slot_seconds": data.slot_seconds, "start": data.start}]})
    cluster = cluster_factory(config)
    worker = cluster.start_worker()
    # Each release is seen as it is made (the follower starts before the replay), with the CPU time
    # the worker and the broker have used by then: the rate per CPU-second does not depend on what
    # else the machine runs, as a rate per wall-clock second does.
    system = (worker.process.pid, cluster.broker.process.pid)
    arrivals = []
    with ThreadPoolExecutor(1) as pool:
        following = pool.submit(follow, cluster.bootstrap, ["taxi"], data.slots, 1800, cluster, arrivals,
                                lambda: (time.monotonic(), cpu_seconds(*system)))
        started = time.monotonic()
        run_cli("replay", "tdrive", str(TDRIVE), "--config", str(cluster.config_path), "--bootstrap", cluster.bootstrap,
                *compat_flags(cluster), "--no-progress")
        sent = time.monotonic() - started
        got = following.result()["taxi"]
    simulated_log = tmp_path / "simulated.jsonl"
    run_cli("simulate", "-m", "ba", "--input", str(dump), "--seed", str(SEED), "--stream", "taxi", "-e", "1", "-w", "20",
            "--releases", str(simulated_log), "--json")
    simulated = {r["slot"]: r["release"] for r in map(json.loads, simulated_log.read_text().splitlines())}
    assert sorted(got) == sorted(simulated) == list(range(1, data.slots + 1))
    assert all(got[slot] == simulated[slot] for slot in simulated)
    assert worker.alive, cluster.logs()
    seen, cpu = np.array(arrivals).T
    first, last = 200 / (cpu[199] - cpu[0]), 200 / (cpu[-1] - cpu[-200])
    print(f"replay sent in {sent:.1f} s; all {data.slots} releases in {seen[-1] - started:.1f} s; "
          f"{200 / (seen[199] - seen[0]):.1f} slots/s over the first 200, {200 / (seen[-1] - seen[-200]):.1f} over "
          f"the last 200; {first:.1f} and {last:.1f} slots per CPU-second of the worker and broker")
    assert last > first / 2  # flat: the old worker fell from 11.5 to 1.7 slots/s as its backlog grew
