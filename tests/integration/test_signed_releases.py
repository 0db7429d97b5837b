"""Releases anyone can verify, through a real broker: anyone can write to ``releases`` (tansu has no
authentication, Kafka without ACLs none either), and `wevent subscribe` keeps the first copy of
each slot. Forgeries written before the genuine releases are dropped and counted; the genuine
ones are shown."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from wevent.core.central import BudgetAbsorption
from wevent.core.randomness import SecretKey
from wevent.stream.config import parse_config
from wevent.stream.runtime.kafka import producer_config
from wevent.stream.settings import Settings
from wevent.stream.wire.records import ReleaseRecord
from wevent.stream.wire.seals import release_seal, seal
from tests.integration.test_central_pipeline import DOMAIN, expected_releases, stream_spec
from tests.integration.test_forgeries import feed_ba

pytestmark = [pytest.mark.integration]

USERS, SLOTS = 600, 8
STRANGER = SecretKey.from_seed(999, "someone else")


def forged_releases(signer) -> dict[int, bytes]:
    """One forgery per kind, for slots 1 to 4, each written before the genuine release of its slot:
    made up and unsigned; signed under the server's own key, then one byte changed; validly
    signed under another key; and signed under the server's key with its signature cut short."""
    def record(slot: int) -> bytes:
        return ReleaseRecord("ba", slot, [1e6] * DOMAIN, "publish", "ba", 1.0, 10, 0.05, 0.95, 1.0).to_bytes()

    changed = seal("releases", "ba", record(2), signer).replace(b"1000000.0", b"1000001.0", 1)
    cut = seal("releases", "ba", record(4), signer)
    return {1: record(1), 2: changed, 3: seal("releases", "ba", record(3), release_seal(STRANGER)),
            4: cut[:-66] + b'"}'}


def subscribe(bootstrap: str, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wevent.cli", "subscribe", "--bootstrap", bootstrap, "--json",
                           "--limit", str(SLOTS), "--stream", "ba", *arguments], capture_output=True, text=True,
                          timeout=240)


def test_wevent_subscribe_drops_forgeries_written_before_the_genuine_releases(cluster_factory):
    config = parse_config({"seed": 5, "report_partitions": 2, "stream_partitions": 1,
                           "streams": [stream_spec("ba", "ba", users=USERS)]})
    cluster = cluster_factory(config)
    signer = release_seal(Settings().noise_key(config))
    from confluent_kafka import Producer

    forger = Producer(producer_config(cluster.bootstrap, tansu_compat=cluster.tansu_compat))
    for message in forged_releases(signer).values():
        forger.produce("releases", message, key=b"ba")
    assert forger.flush(30) == 0
    cluster.start_worker()
    values = feed_ba(cluster, config, USERS, SLOTS)

    verified = subscribe(cluster.bootstrap, "--release-key", signer.public_hex)
    assert verified.returncode == 0, f"{verified.stderr}\n{cluster.logs()}"
    shown = [json.loads(line) for line in verified.stdout.splitlines()]
    assert [r["slot"] for r in shown] == list(range(1, SLOTS + 1))
    assert [r["release"] for r in shown] == [r.release.tolist() for r in expected_releases(BudgetAbsorption, "ba",
                                                                                            values)]
    assert all(line.endswith('"}') and ',"signature":"' in line for line in verified.stdout.splitlines())
    assert verified.stderr.splitlines() == [
        f"wevent subscribe: {SLOTS} releases shown, verified under release key {signer.fingerprint}; "
        "4 dropped (3 with an invalid signature, 1 unsigned)"]
    # What --no-verify gives up: the forgery written first is the slot's release.
    unverified = subscribe(cluster.bootstrap, "--no-verify")
    assert unverified.returncode == 0 and unverified.stderr == ""
    assert json.loads(unverified.stdout.splitlines()[0])["release"] == [1e6] * DOMAIN
