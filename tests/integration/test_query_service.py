"""The query service of a running worker: answers against the releases it consumed, 400s."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import numpy as np
import pytest

from wevent.core.decayed import RTPDMM, CombinedIndex, ReleaseIndex
from wevent.core.randomness import DerivedRandomness, SecretKey
from wevent.stream.config import parse_config
from wevent.stream.runtime.kafka import KafkaReportSink
from wevent.stream.agents.index import release_variance
from tests.integration.test_central_pipeline import START, categorical_feed, collect, counts_of

pytestmark = [pytest.mark.integration]

SLOTS, W, P = 40, 24, 0.95


def get(port, **params):
    url = f"http://127.0.0.1:{port}/query?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_worker_answers_range_queries_over_what_it_consumed(cluster_factory):
    def spec(name, mechanism, query):
        return {"name": name, "model": "central", "mechanism": mechanism, "epsilon": 1.0, "window": 10, "domain": 8,
                "users": 3000, "slot_seconds": 60, "start": START, "query": query}

    config = parse_config({"seed": 8, "report_partitions": 2, "stream_partitions": 2, "streams": [
        spec("ba", "ba", {"mode": "A", "window": W, "decay": P}),
        spec("bd", "bd", {"mode": "C", "window": W, "decay": P, "epsilon": 0.2})]})
    cluster = cluster_factory(config)
    worker = cluster.start_worker()
    values = categorical_feed(slots=SLOTS)
    for name in ("ba", "bd"):
        sink = KafkaReportSink(cluster.bootstrap, name, 2, tansu_compat=cluster.tansu_compat)
        stream = config.stream(name)
        for slot in range(1, SLOTS + 1):
            sink.send_slot(slot, stream.slot_start(slot), stream.slot_end(slot), np.arange(3000), values[slot - 1])
        sink.close()
    got = collect(cluster.bootstrap, ["ba", "bd"], 2 * SLOTS, 240, cluster)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the index agent follows the releases
        if all(get(worker.web_port, stream=s, **{"from": SLOTS, "to": SLOTS})[1].get("slot") == SLOTS for s in ("ba", "bd")):
            break
        time.sleep(0.5)

    status, body = get(worker.web_port, stream="ba", **{"from": 25, "to": 38})
    releases = got["ba"]
    naive = sum(P ** (SLOTS - i) * np.asarray(releases[i].release) for i in range(25, 39))
    assert status == 200 and body["slot"] == SLOTS and np.allclose(body["answer"], naive, rtol=1e-12)

    direct = ReleaseIndex(W, P, bins=8)
    raw = RTPDMM(0.2, W, P, bins=8, privacy_window=10, randomness=DerivedRandomness(SecretKey.from_seed(8), "bd"))
    for slot, counts in zip(range(1, SLOTS + 1), counts_of(values)):
        record = got["bd"][slot]
        direct.insert(record.release, release_variance(record), repeated=record.strategy != "publish")
        raw.insert(counts)
    answer, error = CombinedIndex(direct, raw).query(20, 40)
    status, body = get(worker.web_port, stream="bd", **{"from": 20, "to": 40})
    assert status == 200 and np.allclose(body["answer"], answer) and np.allclose(body["standard_error"], error)

    for params, reason in ((dict(stream="nope", **{"from": 1, "to": 2}), "unknown stream"),
                           (dict(stream="ba", **{"from": 1, "to": 5}), "window"),
                           (dict(stream="ba", **{"from": 30, "to": 29}), "from"),
                           (dict(stream="ba", **{"from": 30, "to": 31}, decay=1.5), "decay"),
                           (dict(stream="ba", **{"from": 30, "to": 31}, decay=0), "decay")):
        status, body = get(worker.web_port, **params)
        assert status == 400 and reason in body["error"], body

    cli = subprocess.run([sys.executable, "-m", "wevent.cli", "query", "--url", f"http://127.0.0.1:{worker.web_port}",
                          "--stream", "ba", "--from", "30", "--to", "40", "--json"], capture_output=True, text=True,
                         timeout=60)
    assert cli.returncode == 0 and json.loads(cli.stdout)["slot"] == SLOTS
    bad = subprocess.run([sys.executable, "-m", "wevent.cli", "query", "--url", f"http://127.0.0.1:{worker.web_port}",
                          "--stream", "ba", "--from", "40", "--to", "30"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "refused" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
