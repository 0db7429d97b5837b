"""The local model against a real broker, a real worker and real device fleet processes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from wevent.core.data import UserValues
from wevent.stream.runtime.broker import free_port
from wevent.stream.wire.format import DecodeError
from wevent.stream.wire.reports import ReportBatch, decode_report_message
from wevent.stream.wire.messages import ReportsMessage, decode_message, pack_message
from wevent.stream.wire.seals import report_seal, request_seal, seal
from wevent.stream.config import parse_config
from wevent.stream.runtime.kafka import KafkaReportSink, producer_config
from wevent.stream.runtime.child_processes import DevicesProcess
from wevent.stream.runtime.subscription import read_topic
from wevent.stream.settings import Settings
from tests.integration.conftest import assert_local_releases_equal_simulate, metric_value, release_key
from tests.integration.test_central_pipeline import START, categorical_feed, collect

pytestmark = [pytest.mark.integration]

USERS, SLOTS, DOMAIN, SEED, BLOCK = 2000, 60, 8, 21, 512


def local_stream(name, mechanism):
    return {"name": name, "model": "local", "mechanism": mechanism, "epsilon": 1.0, "window": 10, "domain": DOMAIN,
            "users": USERS, "slot_seconds": 60, "start": START,
            "options": {"block_size": BLOCK, "deadline_seconds": 300}}  # a late answer under load is waited for


def test_local_streams_equal_simulate_and_no_raw_value_reaches_any_topic(cluster_factory, tmp_path):
    config = parse_config({"seed": SEED, "report_partitions": 2, "stream_partitions": 2,
                           "streams": [local_stream("lba", "lba"), local_stream("lpa", "lpa")]})
    cluster = cluster_factory(config)
    cluster.start_worker()
    values = categorical_feed(users=USERS, slots=SLOTS, domain=DOMAIN, seed=SEED)
    dump = tmp_path / "values.npz"
    UserValues(values, DOMAIN, user_ids=[str(u) for u in range(USERS)], slot_seconds=60, start=START).save(dump)
    fleets = [DevicesProcess(cluster.config_path, name, dump, cluster.bootstrap, tmp_path / f"devices-{name}-{k}.log",
                             tansu_compat=cluster.tansu_compat, new_ledger=True, shard=k, shards=2).start()
              for name in ("lba", "lpa") for k in range(2)]  # two processes split each stream's users
    # A report from a user the server does not ask at slot 1 (the request is derived, so computable),
    # sent before the request exists: it must wait, then be refused, and change nothing. And a
    # forged answer for an asked user, ahead of their device's: refused, unsigned by the devices.
    from confluent_kafka import Producer

    from wevent.core.local import LPA
    from wevent.core.randomness import DerivedRandomness, SecretKey

    asked = LPA(1.0, 10, DOMAIN, USERS, randomness=DerivedRandomness(SecretKey.from_seed(SEED), "lpa")).open_slot().users
    stranger = next(u for u in range(USERS) if u not in set(asked.tolist()))
    producer = Producer(producer_config(cluster.bootstrap, tansu_compat=cluster.tansu_compat))
    # Raw values sent by mistake, unreadable: a raw batch cut by one byte and a JSON report without
    # a time. Nobody can tell their stream, so their dead letters must not copy them.
    raw_users = np.arange(0, 64, 2)  # users of partition 0
    t0 = round(START * 1000)
    truncated = ReportBatch("lpa", raw_users, values[0, raw_users], np.full(raw_users.size, t0)).encode()[:-1]
    no_time = json.dumps({"stream": "lpa", "user": 6, "value": int(values[0, 6])}).encode()
    for unreadable in (truncated, no_time):
        producer.produce("reports", unreadable, partition=0)
    bad = ReportsMessage("lpa", 1, 1, np.array([stranger]), np.array([0])).encode()
    producer.produce("ldp.reports", seal("ldp.reports", "lpa", bad, report_seal(Settings().device_key(config))), key=b"lpa")
    forged = ReportsMessage("lpa", 1, 1, asked[:1], np.array([DOMAIN - 1]))
    producer.produce("ldp.reports", forged.encode(), key=b"lpa")
    producer.flush()
    try:
        for name in ("lba", "lpa"):
            sink = KafkaReportSink(cluster.bootstrap, name, 2, tansu_compat=cluster.tansu_compat, clock_only=True)
            stream = config.stream(name)
            for slot in range(1, SLOTS + 1):
                sink.send_slot(slot, stream.slot_start(slot), stream.slot_end(slot), None, None)
            sink.close()
        got = collect(cluster.bootstrap, ["lba", "lpa"], 2 * SLOTS, 300, cluster)
    finally:
        for fleet in fleets:
            fleet.stop()
    for name in ("lba", "lpa"):
        assert_local_releases_equal_simulate(got[name], dump, name, name, seed=SEED, window=10, block=BLOCK,
                                             slots=SLOTS, log=tmp_path / f"{name}.jsonl")
    audit = subprocess.run([sys.executable, "-m", "wevent.cli", "audit", "--bootstrap", cluster.bootstrap,
                            "--release-key", release_key(config)], capture_output=True, text=True, timeout=120)
    assert audit.returncode == 0 and audit.stdout.count("PASS") == 2, audit.stdout + audit.stderr
    text = cluster.metrics(cluster.workers[0])
    assert metric_value(text, "wevent_reports_rejected_total", stream="lpa", reason="unrequested") == 1
    assert metric_value(text, "wevent_reports_rejected_total", stream="", reason="malformed") == 2
    assert metric_value(text, "wevent_forged_messages_total", topic="ldp.reports", reason="unauthenticated") == 1

    # Every message of every topic, changelogs included: no raw report, and the devices' reports are
    # perturbed. LPA asks with epsilon = 1, where Ada picks GRR (d = 8 < 3e + 2): a report keeps the
    # true value with p = e/(e+d-1). LBA's budgets are smaller, where Ada picks OUE: a report sets
    # the true value's bit with p = 1/2. Binomial standard errors; 5 of them.
    from confluent_kafka.admin import AdminClient

    topics = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=30).topics
    kept = {"grr": 0, "oue": 0}
    reports = {"grr": 0, "oue": 0}
    messages = 0
    for topic in topics:
        for value in read_topic(cluster.bootstrap, topic):
            if value is None:  # a deleted table key: the tombstone carries nothing
                continue
            messages += 1
            if topic != "reports":  # where the producer put them: no copy anywhere else, as bytes or hex
                assert truncated[-4 * raw_users.size:] not in value and truncated[-64:].hex().encode() not in value
                assert no_time not in value and no_time.hex().encode() not in value, topic
            try:
                decoded = decode_report_message(value)
                assert not hasattr(decoded, "values"), f"a raw report on {topic}"
            except DecodeError:
                pass
            if topic == "ldp.reports":
                message = decode_message(value)
                if isinstance(message, ReportsMessage):
                    truth = values[message.slot - 1, message.users]
                    sent = message.reports
                    oracle = "oue" if sent.ndim == 2 else "grr"
                    if oracle == "oue":
                        sent = np.unpackbits(sent, axis=1, count=DOMAIN)[np.arange(truth.size), truth]
                        truth = np.ones_like(truth)
                    kept[oracle] += int((sent == truth).sum())
                    reports[oracle] += truth.size
    assert messages > 1000 and min(reports.values()) > 5_000
    # GRR over the d values and the devices' "absent": a report keeps the value with e / (e + d)
    for oracle, p in (("grr", np.e / (np.e + DOMAIN)), ("oue", 0.5)):
        assert abs(kept[oracle] / reports[oracle] - p) < 5 * np.sqrt(p * (1 - p) / reports[oracle]), oracle


def test_devices_refuse_a_second_report_in_a_window_and_a_request_over_budget(broker, tmp_path):
    """A misbehaving server: a fleet answers only what each user's own ledger allows."""
    from wevent.stream.runtime.broker import create_topics
    from wevent.stream.runtime.child_processes import write_config

    config = parse_config({"seed": 2, "report_partitions": 1, "stream_partitions": 1,
                           "streams": [local_stream("guarded", "lpa")]})
    create_topics(broker.bootstrap, config.topics())
    values = categorical_feed(users=USERS, slots=SLOTS, domain=DOMAIN, seed=3)
    dump = tmp_path / "values.npz"
    UserValues(values, DOMAIN, slot_seconds=60, start=START).save(dump)
    port = free_port()
    fleet = DevicesProcess(write_config(config, tmp_path), "guarded", dump, broker.bootstrap, tmp_path / "devices.log",
                           tansu_compat=broker.tansu_compat, new_ledger=True, metrics_port=port).start()
    from confluent_kafka import Producer

    producer = Producer(producer_config(broker.bootstrap, tansu_compat=broker.tansu_compat))

    def ask(slot, phase, users, epsilon, signed=True):
        request = {"stream": "guarded", "slot": slot, "phase": phase, "epsilon": epsilon, "oracle": "grr",
                   "domain_size": DOMAIN + 1, "population": USERS, "users": np.asarray(users, dtype=np.int64),
                   "bound": None}  # the values and the devices' "absent"
        value = pack_message("request", request)
        if signed:  # by the server's key (a server that misbehaves still signs its requests)
            value = seal("ldp.requests", "guarded", value, request_seal(Settings().noise_key(config)))
        producer.produce("ldp.requests", value, key=b"guarded")
        producer.flush()

    try:
        ask(1, 1, [1, 2, 3], 1.0)        # fine: users 1-3 spend their whole epsilon
        ask(2, 2, [3, 4], 1.0)           # user 3 again within w = 10 slots: refused; user 4 fine
        ask(3, 1, [5], 1.5)              # more than epsilon in one report: refused
        ask(4, 1, [6, 7], 1.0, signed=False)  # forged by someone else: no device answers, no one is charged
        ask(1, 1, [1, 2, 3], 1.0)        # the first request repeated: the same reports, no new charge
        deadline = time.monotonic() + 60
        while True:  # until the repeated request's answer is in too (or the deadline)
            answered = {}
            for value in read_topic(broker.bootstrap, "ldp.reports"):
                message = ReportsMessage.decode(value)
                answered.setdefault((message.slot, message.phase), []).append(message)
            if len(answered.get((1, 1), [])) >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert {k: sorted(u for e in v for u in e.users.tolist()) for k, v in answered.items()} == {
            (1, 1): [1, 1, 2, 2, 3, 3], (2, 2): [4]}
        first, again = answered[(1, 1)]
        assert np.array_equal(first.reports, again.reports)  # a retried report is identical
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
        assert metric_value(text, "wevent_device_refusals_total", stream="guarded") == 2
        assert metric_value(text, "wevent_forged_messages_total", topic="ldp.requests", reason="unauthenticated") == 1
    finally:
        fleet.stop()
