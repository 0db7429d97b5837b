"""LPA at the LDP-IDS paper's population (200,000 users, Sin, d = 2) through a real broker, worker
and a device fleet in two shards, for 2w slots: the releases equal `wevent simulate`'s and the
audit passes. Before compact state, M2's first message outgrew the broker's 1 MB default."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pipeline.core.data import UserValues
from pipeline.core.synthetic import synthetic
from pipeline.stream.config import parse_config
from pipeline.stream.kafka import KafkaReportSink
from pipeline.stream.processes import DevicesProcess
from tests.integration.conftest import assert_local_releases_equal_simulate
from tests.integration.test_central_pipeline import START, collect

pytestmark = [pytest.mark.integration, pytest.mark.slow]

USERS, WINDOW, SEED, BLOCK = 200_000, 20, 5, 65_536
SLOTS = 2 * WINDOW


def test_lpa_at_200000_users_equals_simulate_and_passes_the_audit(cluster_factory, tmp_path):
    config = parse_config({"seed": SEED, "report_partitions": 2, "stream_partitions": 1, "streams": [{
        "name": "sin", "model": "local", "mechanism": "lpa", "epsilon": 1.0, "window": WINDOW, "domain": 2,
        "users": USERS, "slot_seconds": 60, "start": START, "options": {"block_size": BLOCK}}]})
    cluster = cluster_factory(config)
    cluster.start_worker()
    values = synthetic("sin", USERS, SLOTS, seed=SEED).values()
    dump = tmp_path / "sin.npz"
    UserValues(values, 2, user_ids=[str(u) for u in range(USERS)], slot_seconds=60, start=START).save(dump)
    fleets = [DevicesProcess(cluster.config_path, "sin", dump, cluster.bootstrap, tmp_path / f"devices-{k}.log",
                             tansu_compat=cluster.tansu_compat, shard=k, shards=2).start() for k in range(2)]
    try:
        sink = KafkaReportSink(cluster.bootstrap, "sin", 2, tansu_compat=cluster.tansu_compat, clock_only=True)
        stream = config.stream("sin")
        for slot in range(1, SLOTS + 1):
            sink.send_slot(slot, stream.slot_start(slot), stream.slot_end(slot), None, None)
        sink.close()
        got = collect(cluster.bootstrap, ["sin"], SLOTS, 600, cluster)["sin"]
    finally:
        for fleet in fleets:
            fleet.stop()
    simulated = assert_local_releases_equal_simulate(got, dump, "lpa", "sin", seed=SEED, window=WINDOW, block=BLOCK,
                                                     slots=SLOTS, log=tmp_path / "simulated.jsonl")
    assert sum(r.strategy == "publish" for r in simulated) >= 2  # the publication pool is exercised
    audit = subprocess.run([sys.executable, "-m", "pipeline.cli", "audit", "--bootstrap", cluster.bootstrap],
                           capture_output=True, text=True, timeout=300)
    assert audit.returncode == 0 and audit.stdout.count("PASS") == 1, audit.stdout + audit.stderr
