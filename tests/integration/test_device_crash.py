"""A device fleet that stops mid-answer, by SIGKILL or by a failure, answers the request after its restart.

A request's offset is committed only once its answer is delivered, and a re-delivered request is
answered with the identical reports (its ledger entry makes the repeat free), so every asked user's
report reaches the collector exactly once and the releases are those of a run without crashes.
"""

from __future__ import annotations

import os
import random
import time

import numpy as np
import pytest

from wevent.core.data import UserValues
from wevent.stream.wire.messages import ReportsMessage, decode_message
from wevent.stream.config import parse_config
from wevent.stream.runtime.kafka import KafkaReportSink
from wevent.stream.runtime.child_processes import DevicesProcess, wait_until
from wevent.stream.runtime.subscription import read_topic
from tests.integration.conftest import assert_local_releases_equal_simulate, metric_value
from tests.integration.device_helpers import DOMAIN, WINDOW, answers, committed, kept_stream
from tests.integration.test_central_pipeline import START, categorical_feed, collect

pytestmark = [pytest.mark.integration]



def test_a_fleet_that_fails_before_its_answer_leaves_answers_the_request_after_restart(broker, tmp_path):
    stream = kept_stream(broker, tmp_path, users=500, slots=5)
    ledger = stream.ledger

    def ask(slot):
        stream.ask(slot, 1, np.arange(10 * slot, 10 * slot + 10), 0.5)

    fleet = stream.start_fleet(0)
    try:
        ask(1)
        assert wait_until(lambda: (1, 1) in answers(broker.bootstrap), 60), fleet.log_tail()
        # The ledger cannot be written (its temporary file is taken by a directory): the fleet
        # stops on slot 2's request before any report of it leaves.
        (ledger / "kept-0of1.ledger.tmp").mkdir()
        ask(2)
        assert wait_until(lambda: not fleet.alive, 60), fleet.log_tail()
        assert fleet.process.returncode == 2 and "cannot write device ledger" in fleet.log_tail()
        assert "Traceback" not in fleet.log_path.read_text()
        assert committed(broker.bootstrap) == 1  # slot 2's request is not
        (ledger / "kept-0of1.ledger.tmp").rmdir()
        fleet = stream.start_fleet(1)
        assert wait_until(lambda: (2, 1) in answers(broker.bootstrap), 60), fleet.log_tail()
        assert wait_until(lambda: committed(broker.bootstrap) == 2, 60)
    finally:
        fleet.stop()
    got = answers(broker.bootstrap)
    assert sorted(got) == [(1, 1), (2, 1)] and [len(v) for v in got.values()] == [1, 1]
    assert ReportsMessage.decode(got[(2, 1)][0]).users.tolist() == list(range(20, 30))


def changes(path):
    """A token that changes whenever ``path`` is replaced (the ledger is written by a rename)."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_ino, stat.st_mtime_ns


def test_fleets_killed_mid_answer_release_what_a_run_without_crashes_releases(cluster_factory, tmp_path):
    """SIGKILL right after the fleet's ledger is written (before, while or after its reports leave),
    then a restart: every asked user's report is counted once, and the releases equal `wevent simulate`'s."""
    users, slots, block, seed = 2000, 30, 256, 9
    config = parse_config({"seed": seed, "report_partitions": 1, "stream_partitions": 1, "streams": [{
        "name": "lpa", "model": "local", "mechanism": "lpa", "epsilon": 1.0, "window": WINDOW, "domain": DOMAIN,
        "users": users, "slot_seconds": 60, "start": START,
        "options": {"block_size": block, "deadline_seconds": 300}}]})  # a restart never misses a deadline
    cluster = cluster_factory(config)
    cluster.start_worker()
    values = categorical_feed(users=users, slots=slots, domain=DOMAIN, seed=seed)
    dump = tmp_path / "values.npz"
    UserValues(values, DOMAIN, slot_seconds=60, start=START).save(dump)
    ledger = tmp_path / "ledger" / "lpa-0of2.ledger"

    def start_fleet(shard, n=0):
        return DevicesProcess(cluster.config_path, "lpa", dump, cluster.bootstrap,
                              tmp_path / f"devices-{shard}-{n}.log", tansu_compat=cluster.tansu_compat,
                              new_ledger=n == 0, shard=shard, shards=2, ledger_dir=ledger.parent).start()

    fleets = [start_fleet(0), start_fleet(1)]
    sink = KafkaReportSink(cluster.bootstrap, "lpa", 1, tansu_compat=cluster.tansu_compat, clock_only=True)
    stream = config.stream("lpa")
    for slot in range(1, slots + 1):
        sink.send_slot(slot, stream.slot_start(slot), stream.slot_end(slot), None, None)
    sink.close()
    rng = random.Random(seed)
    kills = 0
    try:
        for _ in range(4):  # shard 0 is killed 4 times, each just after one of its ledger writes
            seen = changes(ledger)
            assert wait_until(lambda: changes(ledger) != seen, 120, interval=0.001), fleets[0].log_tail()
            time.sleep(rng.uniform(0, 0.02))
            fleets[0].kill()
            kills += 1
            fleets[0] = start_fleet(0, kills)
        got = collect(cluster.bootstrap, ["lpa"], slots, 300, cluster)
    finally:
        for fleet in fleets:
            fleet.stop()
    assert_local_releases_equal_simulate(got["lpa"], dump, "lpa", "lpa", seed=seed, window=WINDOW, block=block,
                                         slots=slots, log=tmp_path / "simulated.jsonl")
    # No asked user went missing, and every report re-sent after a restart is the first one, byte for byte.
    text = cluster.metrics(cluster.workers[0])
    assert metric_value(text, "wevent_ldp_missing_reports_total", stream="lpa") == 0
    sent: dict[tuple, list[bytes]] = {}
    for value in read_topic(cluster.bootstrap, "ldp.reports"):
        message = decode_message(value)
        if isinstance(message, ReportsMessage):
            users = np.asarray(message.users)
            sent.setdefault((message.slot, message.phase, users.tobytes(), users.size), []).append(value)
    assert all(len(set(copies)) == 1 for copies in sent.values())
    # The collector dropped exactly the re-sent reports (as duplicates while their round was open, late after).
    resent = sum((len(copies) - 1) * size for (*_, size), copies in sent.items())
    dropped = sum(metric_value(text, "wevent_reports_rejected_total", stream="lpa", reason=reason)
                  for reason in ("duplicate", "late"))
    assert dropped == resent
    assert all("Traceback" not in (tmp_path / f"devices-0-{n}.log").read_text() for n in range(kills))
