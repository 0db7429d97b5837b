"""The local model at the LDP-IDS paper's scales through a real broker, one worker and a device
fleet in two shards, for more than 2w slots: releases equal `wevent simulate`'s and the audit
passes.

- 200,000 users, d = 2 (the LNS, Sin and Log streams): every mechanism as its own stream of one
  config.
- A Taobao-shaped stream: 1,023,154 users, d = 117 categories, OUE, with LPA (population
  division) and LBA (budget division: every user reports in every slot).

Before compact state, M2's first message outgrew the broker's 1 MB default. The peak resident
memory of the worker, the broker and each fleet shard is recorded (``record_property``) and printed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from wevent.core.data import UserValues
from wevent.core.local import MECHANISMS
from wevent.core.synthetic import synthetic
from wevent.stream.config import parse_config
from wevent.stream.runtime.kafka import KafkaReportSink
from tests.integration.conftest import assert_local_releases_equal_simulate, release_key
from tests.integration.device_helpers import fleet_of_streams
from tests.integration.run_helpers import record_peak_memory, window_under_test
from tests.integration.test_central_pipeline import START, collect

pytestmark = [pytest.mark.integration, pytest.mark.slow,
              pytest.mark.tansu_only("the papers' scale is about the embedded broker's memory and "
                                     "throughput; what Apache Kafka changes (batched clients, group "
                                     "hand-over) the smaller pipeline tests check")]

USERS, SEED, BLOCK, SHARDS = 200_000, 5, 65_536, 2
WINDOW = window_under_test()
SLOTS = 2 * WINDOW + 2
DATASETS = ("lns", "sin", "log")
TAOBAO_USERS, TAOBAO_DOMAIN = 1_023_154, 117


def run_local_streams(cluster_factory, tmp_path, record_property, streams: dict[str, dict],
                      dumps: dict[str, Path]) -> dict:
    """Run ``streams`` (name -> stream fields but the name) for ``SLOTS`` slots, each on its dump,
    with one worker and a fleet of ``SHARDS`` processes serving them all; check every stream's
    releases against `wevent simulate` and the audit; return name -> simulated releases."""
    config = parse_config({"seed": SEED, "report_partitions": 2, "stream_partitions": 2, "streams": [
        {"name": name, "model": "local", "epsilon": 1.0, "window": WINDOW, "slot_seconds": 60, "start": START,
         "options": {"block_size": BLOCK, "deadline_seconds": 300}}  # a late answer under load is waited for
        | fields for name, fields in streams.items()]})
    cluster = cluster_factory(config)
    worker = cluster.start_worker()
    fleets = [fleet_of_streams(cluster.config_path, dumps, cluster.bootstrap, tmp_path, shard, SHARDS,
                               cluster.tansu_compat)
              for shard in range(SHARDS)]
    try:
        sinks = {name: KafkaReportSink(cluster.bootstrap, name, 2, tansu_compat=cluster.tansu_compat, clock_only=True)
                 for name in streams}
        for slot in range(1, SLOTS + 1):
            for name, sink in sinks.items():
                stream = config.stream(name)
                sink.send_slot(slot, stream.slot_start(slot), stream.slot_end(slot), None, None)
        for sink in sinks.values():
            sink.close()
        got = collect(cluster.bootstrap, list(streams), len(streams) * SLOTS, 900, cluster)
        shards = {f"fleet_{k}of{SHARDS}": fleet.process.pid for k, fleet in enumerate(fleets)}
        processes = {"worker": worker.process.pid, "broker": cluster.broker.process.pid} | shards
        record_peak_memory(record_property, processes)
    finally:
        for fleet in fleets:
            fleet.stop()
    simulated = {name: assert_local_releases_equal_simulate(
        got[name], dumps[name], fields["mechanism"], name, seed=SEED, window=WINDOW, block=BLOCK, slots=SLOTS,
        log=tmp_path / f"simulated-{name}.jsonl", oracle=fields.get("oracle", "ada"))
        for name, fields in streams.items()}
    audit = subprocess.run([sys.executable, "-m", "wevent.cli", "audit", "--bootstrap", cluster.bootstrap,
                            "--release-key", release_key(cluster.config)], capture_output=True, text=True, timeout=300)
    assert audit.returncode == 0 and audit.stdout.count("PASS") == len(streams), audit.stdout + audit.stderr
    return simulated


def test_every_local_mechanism_at_200000_users_equals_simulate_and_passes_the_audit(cluster_factory, tmp_path,
                                                                                    record_property):
    mechanisms = sorted(MECHANISMS)
    dataset_of = {m: DATASETS[k % len(DATASETS)] for k, m in enumerate(mechanisms)}
    datasets = {}
    for name in DATASETS:
        datasets[name] = tmp_path / f"{name}.npz"
        values = synthetic(name, USERS, SLOTS, seed=SEED).values()
        UserValues(values, 2, slot_seconds=60, start=START).save(datasets[name])
    simulated = run_local_streams(cluster_factory, tmp_path, record_property,
                                  {m: {"mechanism": m, "domain": 2, "users": USERS} for m in mechanisms},
                                  {m: datasets[dataset_of[m]] for m in mechanisms})
    publications = {m: sum(r.strategy == "publish" for r in releases) for m, releases in simulated.items()}
    assert all(publications.values()), publications  # every mechanism published fresh estimates


def test_a_taobao_shaped_stream_of_1023154_users_equals_simulate_and_passes_the_audit(cluster_factory, tmp_path,
                                                                                      record_property):
    rng = np.random.default_rng(SEED)
    popularity = 1 / np.arange(1, TAOBAO_DOMAIN + 1) ** 1.1  # a Zipf-like category mix, as in shopping logs
    values = rng.choice(TAOBAO_DOMAIN, (SLOTS, TAOBAO_USERS), p=popularity / popularity.sum()).astype(np.int8)
    dump = tmp_path / "taobao.npz"
    UserValues(values, TAOBAO_DOMAIN, slot_seconds=60, start=START).save(dump)
    streams = {m: {"mechanism": m, "oracle": "oue", "domain": TAOBAO_DOMAIN, "users": TAOBAO_USERS}
               for m in ("lpa", "lba")}
    simulated = run_local_streams(cluster_factory, tmp_path, record_property, streams, dict.fromkeys(streams, dump))
    assert sum(r.strategy == "publish" for r in simulated["lpa"]) >= 2
