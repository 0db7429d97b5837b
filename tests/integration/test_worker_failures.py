"""A worker whose processor fails on every message: every failure counted, the log stays short."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from wevent.stream.wire.records import DeadLetter
from wevent.stream.wire.reports import ReportBatch
from wevent.stream.config import parse_config
from wevent.stream.runtime.kafka import producer_config
from wevent.stream.runtime.broker import free_port
from wevent.stream.runtime.child_processes import WEVENT_COMMAND, WorkerProcess, wait_until
from wevent.stream.runtime.subscription import read_topic
from tests.integration.conftest import metric_value
from tests.integration.test_central_pipeline import START, stream_spec

pytestmark = [pytest.mark.integration]

SECRET = "raw value 5 of user 3"  # what an exception's text may quote from its input
BATCHES, PER_BATCH = 300, 5

# The worker's assembler raises on every message it reads: a bug, injected into a real worker.
BROKEN_WORKER = f"""
import sys
from wevent.stream.agents import assemble

def apply(self, *args):
    raise RuntimeError({SECRET!r})

assemble.Assembler.apply = apply
from wevent.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_failing_processor_counts_every_message_and_logs_one_line(cluster_factory, tmp_path):
    config = parse_config({"seed": 3, "report_partitions": 1, "stream_partitions": 1,
                           "streams": [stream_spec("ba", "ba")]})
    cluster = cluster_factory(config)
    worker = WorkerProcess(cluster.config_path, cluster.bootstrap, free_port(), tmp_path / "worker.log",
                           tansu_compat=cluster.tansu_compat, report_counts=True)
    worker.command = [sys.executable, "-c", BROKEN_WORKER, *worker.command[len(WEVENT_COMMAND):]]  # `wevent worker ...`, broken
    cluster.workers.append(worker.start())
    from confluent_kafka import Producer

    producer = Producer(producer_config(cluster.bootstrap, tansu_compat=cluster.tansu_compat))
    for n in range(BATCHES):
        users = np.arange(n * PER_BATCH, (n + 1) * PER_BATCH)
        batch = ReportBatch("ba", users, users % 8, np.full(PER_BATCH, round(START * 1000)))
        producer.produce("reports", batch.encode(), partition=0)
    producer.flush()

    def dead_lettered() -> float:
        try:
            return metric_value(cluster.metrics(worker), "wevent_dead_letters_total", reason="internal_error")
        except OSError:  # the web port is not up yet
            return 0.0

    assert wait_until(lambda: dead_lettered() == BATCHES, 120), cluster.logs()
    text = cluster.metrics(worker)
    assert metric_value(text, "wevent_reports_rejected_total", stream="ba", reason="internal_error") == \
        BATCHES * PER_BATCH
    letters = [DeadLetter.from_json(v) for v in read_topic(cluster.bootstrap, "deadletter")]
    assert len(letters) == BATCHES and {(d.reason, d.stream) for d in letters} == {("internal_error", "ba")}
    assert all(d.detail.startswith("RuntimeError at ") and SECRET not in d.detail for d in letters)
    log = worker.log_path.read_text()
    # Within the minute: one line for the 300 failures, no traceback, no input quoted.
    assert log.count("assemble failed on reports[0]@") == 1, log[-3000:]
    assert "Traceback" not in log and SECRET not in log
