"""The central model at 1,000,000 users per slot and d = 10,000 through the embedded broker and a
worker: BA and Uniform streams of one config, fed by the report sink (batches of at most 65,536
reports), for more than 2w slots. The releases equal `wevent simulate`'s on the same values and
the audit passes. The peak resident memory of the worker and of the broker is recorded
(``record_property``) and printed."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from wevent.core.data import UserValues
from wevent.stream.config import parse_config
from wevent.stream.runtime.kafka import KafkaReportSink
from tests.integration.conftest import release_key
from tests.integration.test_central_pipeline import START, collect
from tests.integration.run_helpers import record_peak_memory, window_under_test

pytestmark = [pytest.mark.integration, pytest.mark.slow,
              pytest.mark.tansu_only("the papers' scale is about the embedded broker's memory and "
                                     "throughput; what Apache Kafka changes (batched clients, group "
                                     "hand-over) the smaller pipeline tests check")]

USERS, DOMAIN, SEED = 1_000_000, 10_000, 5
WINDOW = window_under_test()
SLOTS = 2 * WINDOW + 2
MECHANISMS = ("ba", "uniform")


def drifting_zipf_values(rng: np.random.Generator) -> np.ndarray:
    """(slots, users) categories: a Zipf-like popularity whose ranking shifts a little every slot,
    so that BA sees both calm slots and changes worth publishing."""
    popularity = 1 / np.arange(1, DOMAIN + 1) ** 1.1
    values = np.empty((SLOTS, USERS), dtype=np.int16)
    for t in range(SLOTS):  # one vectorised draw per slot
        shift = 0 if t < SLOTS // 2 else 50 * (t - SLOTS // 2 + 1)
        values[t] = (rng.choice(DOMAIN, USERS, p=popularity / popularity.sum()) + shift) % DOMAIN
    return values


def test_a_million_users_per_slot_at_d_10000_equals_simulate_and_passes_the_audit(broker, cluster_factory, tmp_path,
                                                                                  record_property):
    config = parse_config({"seed": SEED, "report_partitions": 2, "stream_partitions": 1, "streams": [{
        "name": m, "model": "central", "mechanism": m, "epsilon": 1.0, "window": WINDOW, "domain": DOMAIN,
        "users": USERS, "slot_seconds": 60, "start": START} for m in MECHANISMS]})
    cluster = cluster_factory(config)
    worker = cluster.start_worker()
    values = drifting_zipf_values(np.random.default_rng(SEED))
    users = np.arange(USERS)
    sinks = {m: KafkaReportSink(cluster.bootstrap, m, 2, tansu_compat=cluster.tansu_compat) for m in MECHANISMS}
    for slot in range(1, SLOTS + 1):
        for m, sink in sinks.items():
            stream = config.stream(m)
            sink.send_slot(slot, stream.slot_start(slot), stream.slot_end(slot), users, values[slot - 1])
    for sink in sinks.values():
        sink.close()
    got = collect(cluster.bootstrap, list(MECHANISMS), len(MECHANISMS) * SLOTS, 600, cluster)
    record_peak_memory(record_property, {"worker": worker.process.pid, "broker": broker.process.pid})
    dump = tmp_path / "values.npz"
    UserValues(values, DOMAIN, slot_seconds=60, start=START).save(dump)
    for m in MECHANISMS:
        log = tmp_path / f"simulated-{m}.jsonl"
        subprocess.run([sys.executable, "-m", "wevent.cli", "simulate", "-m", m, "--input", str(dump), "-e", "1",
                        "-w", str(WINDOW), "--seed", str(SEED), "--stream", m, "--releases", str(log), "--json"],
                       check=True, capture_output=True, timeout=300)
        simulated = [json.loads(line) for line in log.read_text().splitlines()]
        assert [r["slot"] for r in simulated] == list(range(1, SLOTS + 1))
        for record in simulated:
            assert got[m][record["slot"]].release == record["release"], f"{m} slot {record['slot']}"
            assert got[m][record["slot"]].strategy == record["strategy"], f"{m} slot {record['slot']}"
    audit = subprocess.run([sys.executable, "-m", "wevent.cli", "audit", "--bootstrap", cluster.bootstrap,
                            "--release-key", release_key(config)], capture_output=True, text=True, timeout=300)
    assert audit.returncode == 0 and audit.stdout.count("PASS") == len(MECHANISMS), audit.stdout + audit.stderr
