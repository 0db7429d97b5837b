"""The local model at the LDP-IDS paper's population (200,000 users, d = 2, the LNS, Sin and Log
streams) through a real broker, one worker and a device fleet in two shards: every mechanism runs
as its own stream of one config for more than 2w slots, its releases equal `wevent simulate`'s
and the audit passes. Before compact state, M2's first message outgrew the broker's 1 MB default.
The peak resident memory of the worker and of each fleet shard is recorded (``record_property``)
and printed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pipeline.core.data import UserValues
from pipeline.core.local import MECHANISMS
from pipeline.core.synthetic import synthetic
from pipeline.stream.config import parse_config
from pipeline.stream.kafka import KafkaReportSink
from tests.integration.conftest import assert_local_releases_equal_simulate
from tests.integration.device_helpers import fleet_of_streams
from tests.integration.run_helpers import peak_rss_mib
from tests.integration.test_central_pipeline import START, collect

pytestmark = [pytest.mark.integration, pytest.mark.slow]

USERS, WINDOW, SEED, BLOCK, SHARDS = 200_000, 5, 5, 65_536, 2
SLOTS = 2 * WINDOW + 2
DATASETS = ("lns", "sin", "log")


def record_peak_memory(record_property, processes: dict) -> None:
    """Each live process's peak RSS (MiB) as a test property and on stdout (seen with ``-s``)."""
    for name, process in processes.items():
        mib = peak_rss_mib(process.process.pid)
        record_property(f"peak_rss_mib_{name}", round(mib))
        print(f"peak RSS {name}: {mib:.0f} MiB")


def test_every_local_mechanism_at_200000_users_equals_simulate_and_passes_the_audit(cluster_factory, tmp_path,
                                                                                    record_property):
    mechanisms = sorted(MECHANISMS)
    dataset_of = {m: DATASETS[k % len(DATASETS)] for k, m in enumerate(mechanisms)}
    config = parse_config({"seed": SEED, "report_partitions": 2, "stream_partitions": 2, "streams": [{
        "name": m, "model": "local", "mechanism": m, "epsilon": 1.0, "window": WINDOW, "domain": 2, "users": USERS,
        "slot_seconds": 60, "start": START, "options": {"block_size": BLOCK}} for m in mechanisms]})
    cluster = cluster_factory(config)
    worker = cluster.start_worker()
    dumps = {}
    for name in DATASETS:
        dumps[name] = tmp_path / f"{name}.npz"
        UserValues(synthetic(name, USERS, SLOTS, seed=SEED).values(), 2, slot_seconds=60, start=START).save(dumps[name])
    fleets = [fleet_of_streams(cluster.config_path, {m: dumps[dataset_of[m]] for m in mechanisms}, cluster.bootstrap,
                               tmp_path, shard, SHARDS) for shard in range(SHARDS)]
    try:
        sinks = {m: KafkaReportSink(cluster.bootstrap, m, 2, tansu_compat=True, clock_only=True) for m in mechanisms}
        for slot in range(1, SLOTS + 1):
            for m, sink in sinks.items():
                sink.send_slot(slot, config.stream(m).slot_start(slot), config.stream(m).slot_end(slot), None, None)
        for sink in sinks.values():
            sink.close()
        got = collect(cluster.bootstrap, mechanisms, len(mechanisms) * SLOTS, 600, cluster)
        record_peak_memory(record_property, {"worker": worker} | {f"fleet_{k}of{SHARDS}": f for k, f in enumerate(fleets)})
    finally:
        for fleet in fleets:
            fleet.stop()
    publications = {}
    for m in mechanisms:
        simulated = assert_local_releases_equal_simulate(got[m], dumps[dataset_of[m]], m, m, seed=SEED, window=WINDOW,
                                                         block=BLOCK, slots=SLOTS, log=tmp_path / f"simulated-{m}.jsonl")
        publications[m] = sum(r.strategy == "publish" for r in simulated)
    assert all(publications.values()), publications  # every mechanism published fresh estimates
    audit = subprocess.run([sys.executable, "-m", "pipeline.cli", "audit", "--bootstrap", cluster.bootstrap],
                           capture_output=True, text=True, timeout=300)
    assert audit.returncode == 0 and audit.stdout.count("PASS") == len(mechanisms), audit.stdout + audit.stderr
