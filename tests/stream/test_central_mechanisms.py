"""Every central mechanism on the processors, in-process: the releases are `wevent simulate`'s.

The benchmark's mechanisms (FAST_w, RescueDP, DSAT, PeGaSus, AdaPub, BD and BA with grouping) run
as BD and BA do: M1 measures where the mechanism has a dissimilarity (a vector of one per group of
bins for the grouped ones), M2 decides and publishes. Each stream's releases must equal, bit for
bit, those `wevent simulate` writes for the same counts, noise key and stream name, and its audit
records must pass `wevent audit`'s check. Crash and replay tests: tests/stream/test_processors.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from wevent.cli import main
from wevent.stream.audit import verify
from wevent.stream.config import parse_config
from tests.stream.harness import InProcessPipeline

START = 1_200_000_000.0
USERS, SLOTS, DOMAIN, SEED = 900, 40, 8, 11
BENCHMARK = ["fast-w", "rescuedp", "dsat", "pegasus", "adapub", "bd-grouped", "ba-grouped"]
# Two groups of four bins, regrouped every three slots: the grouped mechanisms' M1 is a vector, and
# its partition moves with the releases.
OPTIONS = {"bd-grouped": {"groups": 2, "period": 3}, "ba-grouped": {"groups": 2, "period": 3}}


def drifting(users=USERS, slots=SLOTS, domain=DOMAIN, seed=SEED) -> np.ndarray:
    """Users drifting between neighbouring values now and then, a few of them in bursts: (slots, users)."""
    rng = np.random.default_rng(seed)
    values = np.empty((slots, users), dtype=np.int64)
    current = rng.integers(0, domain, users)
    for t in range(slots):
        move = rng.random(users) < (0.3 if t % 13 == 7 else 0.04)
        current = np.where(move, (current + rng.choice([-1, 1], users)) % domain, current)
        values[t] = current
    return values


def config_of(mechanism: str, name: str = "s"):
    return parse_config({"seed": SEED, "report_partitions": 2, "stream_partitions": 1, "streams": [{
        "name": name, "model": "central", "mechanism": mechanism, "epsilon": 1.0, "window": 10, "domain": DOMAIN,
        "users": USERS, "slot_seconds": 60, "start": START, "options": OPTIONS.get(mechanism, {})}]})


def run_pipeline(mechanism: str, values: np.ndarray) -> InProcessPipeline:
    pipeline = InProcessPipeline(config_of(mechanism))
    stream = pipeline.config.stream("s")
    for slot in range(1, len(values) + 1):
        pipeline.send_slot("s", stream.slot_start(slot), stream.slot_end(slot), np.arange(USERS), values[slot - 1])
    pipeline.run()
    return pipeline


def simulated(mechanism: str, values: np.ndarray, tmp_path, capsys) -> list[dict]:
    """What `wevent simulate` writes for the stream's counts (its seed is the config's, its stream name the stream's)."""
    counts = np.stack([np.bincount(v, minlength=DOMAIN) for v in values])
    csv = tmp_path / "counts.csv"
    csv.write_text(",".join(f"v{j}" for j in range(DOMAIN)) + "\n" + "\n".join(",".join(map(str, r)) for r in counts))
    log = tmp_path / "simulated.jsonl"
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in OPTIONS.get(mechanism, {}).items()]
    code = main(["simulate", "-m", mechanism, "--input", str(csv), "-e", "1", "-w", "10", "--seed", str(SEED),
                 "--stream", "s", "--releases", str(log), "--json", "--no-progress", *flags])
    capsys.readouterr()
    assert code == 0
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.mark.parametrize("mechanism", BENCHMARK)
def test_releases_equal_simulate_and_the_audit_passes(mechanism, tmp_path, capsys):
    values = drifting()
    pipeline = run_pipeline(mechanism, values)
    got = pipeline.releases("s")
    expected = simulated(mechanism, values, tmp_path, capsys)
    assert [r.slot for r in got] == list(range(1, SLOTS + 1))
    for record, simulation in zip(got, expected):
        assert record.release == simulation["release"], record.slot
        assert (record.strategy, record.eps1, record.eps2) == (simulation["strategy"], simulation["eps1"],
                                                               simulation["eps2"]), record.slot
    assert len({r.strategy for r in got}) > 1 or mechanism in ("pegasus", "adapub")  # they publish every slot
    assert not pipeline.log["deadletter"]
    findings = verify([json.loads(v) for v in pipeline.log["audit"]])
    assert len(findings) == 1 and findings[0].ok, findings


@pytest.mark.parametrize("mechanism", ["bd-grouped", "ba-grouped"])
def test_the_grouped_mechanisms_decide_per_group_on_the_stream(mechanism):
    """Some slot publishes one group's bins and repeats the other's: the per-group test is what ran."""
    values = drifting()
    releases = [np.array(r.release) for r in run_pipeline(mechanism, values).releases("s")]
    partly = [t for t in range(1, SLOTS) if 0 < np.count_nonzero(releases[t] != releases[t - 1]) < DOMAIN]
    assert partly, "no slot published some groups only"
