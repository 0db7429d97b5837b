"""Kafka's own console clients, from the broker's jars, as programs that are not ours: the console
producer writes JSON reports built from the published schema, a `wevent worker` releases them,
and the console consumer reads `releases` and `audit`, every line valid against the schemas.

All on the secured cluster of tests/integration/secure_kafka.py: the console clients as the
producer and subscriber roles over SASL_SSL, the worker over mutual TLS with a client certificate
whose key is encrypted.
"""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from jsonschema import Draft202012Validator

from wevent.core.central import BudgetAbsorption
from wevent.core.randomness import DerivedRandomness, SecretKey
from wevent.stream.settings import Settings
from wevent.stream.wire import schemas
from wevent.stream.wire.records import PublishedRecords
from wevent.stream.wire.seals import release_seal
from wevent.stream.runtime.broker import free_port
from wevent.stream.config import parse_config
from wevent.stream.runtime.child_processes import WorkerProcess, write_config
from tests.integration.secure_kafka import PASSWORD, SCRAM_JAAS, start_secure_kafka

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # three JVMs and a worker: 15-40 s

START = 1_201_910_400.0
USERS, SLOTS, DOMAIN, SEED = 200, 5, 4, 8
# One `reports` partition: the console producer cannot choose a partition per record, and with
# P = 1 every user's partition (user mod P) is 0.
CONFIG = parse_config({"seed": SEED, "report_partitions": 1, "stream_partitions": 1, "streams": [{
    "name": "taxi", "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 4, "domain": DOMAIN,
    "users": USERS, "slot_seconds": 60, "start": START}]})


def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(schemas.load(name))


def client_properties(kafka, user: str, path) -> str:
    """A Java client's properties for a SCRAM user over SASL_SSL, trusting the test's CA (PEM)."""
    jaas = SCRAM_JAAS.replace(" required;", f' required username="{user}" password="{PASSWORD.format(user)}";')
    path.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config={jaas}\n"
                    f"ssl.truststore.type=PEM\nssl.truststore.location={kafka.authority.ca_file}\n")
    return str(path)


def report_lines(values: np.ndarray) -> list[str]:
    """The stream as JSON reports and watermarks, built from the report schema's fields (not by our codec)."""
    stream = CONFIG.stream("taxi")
    lines = []
    for slot in range(1, SLOTS + 1):
        lines += [json.dumps({"version": 1, "stream": "taxi", "user": user, "time": stream.slot_start(slot) + user % 60,
                              "value": int(value)}) for user, value in enumerate(values[slot - 1])]
        lines.append(json.dumps({"version": 1, "type": "watermark", "stream": "taxi", "time": stream.slot_end(slot)}))
    return lines


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    secure = start_secure_kafka(tmp_path_factory.mktemp("console-kafka"), CONFIG.topics())
    try:
        yield secure
    finally:
        secure.cluster.stop()


def test_kafka_console_clients_write_reports_and_read_releases_and_audit(kafka, tmp_path):
    values = np.random.default_rng(SEED).integers(0, DOMAIN, (SLOTS, USERS))
    lines = report_lines(values)
    check = validator("report")
    assert all(check.is_valid(json.loads(line)) for line in lines)

    worker = WorkerProcess(write_config(CONFIG, tmp_path), kafka.bootstrap("MTLS"), free_port(),
                           tmp_path / "worker.log", tansu_compat=False, env=kafka.tls_env("worker-tls"))
    worker.start()
    try:
        produced = subprocess.run(kafka.cluster.java_cmd(
            "kafka.tools.ConsoleProducer", "--bootstrap-server", kafka.bootstrap("SASL_SSL"),
            "--topic", "reports", "--producer.config", client_properties(kafka, "producer", tmp_path / "p.properties")),
            input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120)
        assert produced.returncode == 0, produced.stderr[-2000:]
        consumed = subprocess.run(kafka.cluster.java_cmd(
            "org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", kafka.bootstrap("SASL_SSL"),
            "--include", "releases|audit", "--from-beginning", "--group", "wevent-subscribe-console",
            "--max-messages", str(2 * SLOTS), "--timeout-ms", "90000",
            "--consumer.config", client_properties(kafka, "subscriber", tmp_path / "c.properties")),
            capture_output=True, text=True, timeout=150)
    finally:
        worker.stop()
    lines = [line.encode() for line in consumed.stdout.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]
    assert len(records) == 2 * SLOTS, f"{consumed.stderr[-2000:]}\n{worker.log_tail()}"
    # every line as Kafka's own client printed it verifies under the release public key
    reader = PublishedRecords(release_seal(Settings().noise_key(CONFIG)).public())
    assert [reader.read(line) for line in lines] == [{k: v for k, v in r.items() if k != "signature"} for r in records]
    audit = [r for r in records if r.get("record") == "audit"]
    releases = {r["slot"]: r for r in records if r.get("record") != "audit"}
    for name, found in (("audit", audit), ("release", list(releases.values()))):
        errors = [e.message for record in found for e in validator(name).iter_errors(record)]
        assert not errors, errors[:3]
    assert sorted(releases) == sorted(r["slot"] for r in audit) == list(range(1, SLOTS + 1))
    mechanism = BudgetAbsorption(1.0, 4, DOMAIN, randomness=DerivedRandomness(SecretKey.from_seed(SEED), "taxi"))
    counts = np.stack([np.bincount(v, minlength=DOMAIN) for v in values]).astype(float)
    assert [releases[t]["release"] for t in range(1, SLOTS + 1)] == [r.release.tolist() for r in mechanism.run(counts)]
