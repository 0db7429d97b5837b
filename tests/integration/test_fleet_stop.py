"""`wevent devices` says at start that SIGTERM stops it, and SIGTERM does: within seconds, with one
line and status 0, after leaving its consumer group."""

from __future__ import annotations

import signal

import numpy as np
import pytest

from wevent.core.data import UserValues
from wevent.stream.config import parse_config
from wevent.stream.runtime.broker import create_topics
from wevent.stream.runtime.child_processes import DevicesProcess, wait_until, write_config

pytestmark = pytest.mark.integration

START = 1_700_000_000
CONFIG = parse_config({"seed": 3, "report_partitions": 1, "stream_partitions": 1, "streams": [
    {"name": "devices", "model": "local", "mechanism": "lpa", "epsilon": 1.0, "window": 5, "domain": 4, "users": 10,
     "slot_seconds": 60, "start": START}]})


def test_sigterm_stops_a_fleet_waiting_for_requests(broker, tmp_path):
    create_topics(broker.bootstrap, CONFIG.topics())
    values = tmp_path / "values.npz"
    UserValues(np.zeros((2, 10), dtype=np.int64), 4, slot_seconds=60, start=START).save(values)
    fleet = DevicesProcess(write_config(CONFIG, tmp_path), "devices", values, broker.bootstrap,
                           tmp_path / "devices.log", tansu_compat=broker.tansu_compat, new_ledger=True).start()
    try:
        assert wait_until(lambda: "waiting for requests until SIGTERM" in fleet.log_tail(), 60), fleet.log_tail()
        fleet.process.send_signal(signal.SIGTERM)
        assert fleet.process.wait(15) == 0, fleet.log_tail()  # well within Kubernetes' default grace of 30 s
    finally:
        fleet.kill()
    lines = fleet.log_path.read_text().splitlines()
    assert lines[0].endswith("waiting for requests until SIGTERM"), lines
    assert lines[-1] == "wevent devices: SIGTERM: stopping", lines
