"""PeGaSus and BA with grouping through a real worker on the embedded broker.

PeGaSus has no dissimilarity phase (M2 runs the whole slot, its open groups' counts in M2's state);
BA with grouping measures a vector in M1 (one dissimilarity per group of bins) and regroups the bins
as its releases move, in M1 and M2 alike. Both streams' releases must equal `wevent simulate`'s on
the same counts and noise, and `wevent audit` must pass on their records. (Every benchmark mechanism
is checked in-process in tests/stream/test_central_mechanisms.py.)
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.integration.conftest import release_key
from tests.integration.test_central_pipeline import START, collect
from tests.stream.test_central_mechanisms import DOMAIN, OPTIONS, drifting
from wevent.stream.config import parse_config
from wevent.stream.runtime.kafka import KafkaReportSink

pytestmark = [pytest.mark.integration,
              pytest.mark.tansu_only("the mechanisms' parity does not depend on the broker; the embedded one is "
                                     "what `wevent run` starts")]

USERS, SLOTS, SEED = 1200, 36, 13
MECHANISMS = ("pegasus", "ba-grouped")


def simulated(mechanism: str, values: np.ndarray, tmp_path) -> list[dict]:
    counts = np.stack([np.bincount(v, minlength=DOMAIN) for v in values])
    csv = tmp_path / f"{mechanism}.csv"
    csv.write_text(",".join(f"v{j}" for j in range(DOMAIN)) + "\n" + "\n".join(",".join(map(str, r)) for r in counts))
    log = tmp_path / f"{mechanism}.jsonl"
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in OPTIONS.get(mechanism, {}).items()]
    subprocess.run([sys.executable, "-m", "wevent.cli", "simulate", "-m", mechanism, "--input", str(csv), "-e", "1",
                    "-w", "10", "--seed", str(SEED), "--stream", mechanism, "--releases", str(log), "--json", *flags],
                   check=True, capture_output=True, timeout=120)
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_releases_equal_simulate_and_the_audit_passes(cluster_factory, tmp_path):
    config = parse_config({"seed": SEED, "report_partitions": 2, "stream_partitions": 2, "streams": [
        {"name": m, "model": "central", "mechanism": m, "epsilon": 1.0, "window": 10, "domain": DOMAIN,
         "users": USERS, "slot_seconds": 60, "start": START, "options": OPTIONS.get(m, {})} for m in MECHANISMS]})
    cluster = cluster_factory(config)
    cluster.start_worker()
    values = drifting(users=USERS, slots=SLOTS, seed=SEED)
    stream = config.stream(MECHANISMS[0])
    for name in MECHANISMS:
        sink = KafkaReportSink(cluster.bootstrap, name, 2, tansu_compat=cluster.tansu_compat)
        for slot in range(1, SLOTS + 1):
            sink.send_slot(slot, stream.slot_start(slot), stream.slot_end(slot), np.arange(USERS), values[slot - 1])
        sink.close()
    got = collect(cluster.bootstrap, list(MECHANISMS), len(MECHANISMS) * SLOTS, 240, cluster)
    for name in MECHANISMS:
        expected = simulated(name, values, tmp_path)
        assert [r["slot"] for r in expected] == sorted(got[name]) == list(range(1, SLOTS + 1))
        for record in expected:
            release = got[name][record["slot"]]
            assert release.release == record["release"], (name, record["slot"])
            assert (release.strategy, release.eps1, release.eps2) == (record["strategy"], record["eps1"],
                                                                      record["eps2"])
    assert {r.strategy for r in got["ba-grouped"].values()} > {"publish"}  # it also repeats and nullifies
    audit = subprocess.run([sys.executable, "-m", "wevent.cli", "audit", "--bootstrap", cluster.bootstrap,
                            "--release-key", release_key(config)], capture_output=True, text=True, timeout=120)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert audit.stdout.count("PASS") == len(MECHANISMS), audit.stdout


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wevent_run_runs_it(mechanism, tmp_path):
    """`wevent run -m MECHANISM`: the broker, a worker and the bundled feed, every slot released and audited."""
    from wevent.stream.audit import read_jsonl, verify

    releases, audit = tmp_path / "releases.jsonl", tmp_path / "audit.jsonl"
    done = subprocess.run([sys.executable, "-m", "wevent.cli", "run", "-m", mechanism, "--slots", "12", "--speed", "0",
                           "--quiet", "--seed", "3", "--release-log", str(releases), "--audit-log", str(audit)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["slot"] for line in releases.read_text().splitlines()] == list(range(1, 13))
    assert {json.loads(line)["mechanism"] for line in releases.read_text().splitlines()} == {mechanism}
    findings = verify(read_jsonl(audit))
    assert len(findings) == 1 and findings[0].ok, findings
