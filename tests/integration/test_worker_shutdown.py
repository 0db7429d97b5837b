"""A worker stopped with SIGTERM while it is busy ends cleanly: no crash in its log, exit status 0."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from wevent.stream.config import parse_config
from wevent.stream.runtime.broker import create_topics, free_port
from wevent.stream.runtime.child_processes import WorkerProcess, write_config
from wevent.stream.runtime.kafka import KafkaReportSink
from wevent.stream.runtime.subscription import Releases

pytestmark = [pytest.mark.integration, pytest.mark.tansu_only("it pauses the broker's process, which is ours only there")]

USERS = 100  # reports per slot: small messages, so that the worker's table writes outpace its sends
SLOTS = 3_000  # far more than the worker applies before the signal: it is mid-backlog when stopped


def test_sigterm_to_a_worker_mid_replay_logs_no_crash_and_exits_0(broker, tmp_path):
    """A replay sends its slots while the worker applies them; once releases flow, the broker is
    paused (SIGSTOP) for a moment, as a loaded broker stalls, and the worker gets SIGTERM meanwhile,
    with table writes waiting to be sent. Its agents must stop first, then its pending writes be
    sent (once the broker answers again), then its producer close: no "crash", traceback or
    ProducerClosed in its log, and exit status 0.

    Before, the worker flushed its producer while its agents still ran, gave the flush up after
    0.1 s without a confirmation, and closed the producer with writes still queued: the queued
    writes were then sent on a closed producer (ProducerClosed, "We experienced a crash!").
    """
    config = parse_config({"seed": 1, "report_partitions": 2, "stream_partitions": 1, "streams": [{
        "name": "busy", "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 20, "domain": 100,
        "users": USERS, "slot_seconds": 60.0, "start": 0.0}]})
    create_topics(broker.bootstrap, config.topics())
    worker = WorkerProcess(write_config(config, tmp_path), broker.bootstrap, free_port(), tmp_path / "worker.log",
                           tansu_compat=True, datadir=tmp_path / "data").start()
    stream = config.stream("busy")
    sink = KafkaReportSink(broker.bootstrap, "busy", 2, tansu_compat=True)
    rng = np.random.default_rng(1)
    stop = threading.Event()

    def replay() -> None:
        for slot in range(1, SLOTS + 1):
            if stop.is_set():
                break
            sink.send_slot(slot, stream.slot_start(slot), stream.slot_end(slot), np.arange(USERS),
                           rng.integers(0, 100, USERS))
        sink.producer.flush(30)

    sender = threading.Thread(target=replay)
    sender.start()
    try:
        with Releases(broker.bootstrap, streams=["busy"]) as releases:
            released = next(iter(releases.follow(idle_timeout=120)), None)
        assert released is not None, f"no release within 120 s: {worker.log_tail()}"
        os.kill(broker.process.pid, signal.SIGSTOP)
        try:
            time.sleep(1.0)  # the worker's writes wait for the broker
            assert worker.alive, worker.log_tail()
            os.killpg(worker.process.pid, signal.SIGTERM)
            time.sleep(2.0)  # the signal is handled while the broker does not answer
        finally:
            os.kill(broker.process.pid, signal.SIGCONT)
        worker.process.wait(60)
        log = worker.log_path.read_text(errors="replace")
        assert worker.process.returncode == 0, log
        for sign in ("crash", "Traceback", "ProducerClosed"):
            assert sign not in log, log
    finally:
        stop.set()
        sender.join()
        worker.kill()
