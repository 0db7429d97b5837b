"""HTTP ports listen on loopback unless told otherwise, and Faust's /table views are off.

The worker's web port serves /query and /metrics, the device fleet's its counters; Faust's table
views would serve the tables' contents (partial counts of raw reports, ledgers). None of it is
authenticated, so none of it may be reachable from another machine by default.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from wevent.core.data import UserValues
from wevent.stream.runtime.broker import free_port, wait_for_port
from wevent.stream.config import parse_config
from wevent.stream.runtime.child_processes import ChildProcess, DevicesProcess, WorkerProcess
from tests.integration.conftest import compat_flags
from tests.integration.run_helpers import listening_addresses, non_loopback_address, refuses, wait_for

pytestmark = pytest.mark.slow

TDRIVE = Path(__file__).resolve().parents[2] / "producers" / "fixtures" / "tdrive"
START = 1_700_000_000
CENTRAL = {"name": "open", "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 5, "domain": 4,
           "users": 10, "slot_seconds": 60, "start": START}
LOCAL = CENTRAL | {"name": "devices", "model": "local", "mechanism": "lpa"}


def status(url: str) -> int:
    """The HTTP status, or 0 when nothing answers (a starting worker hands its port from the server
    that answers its probes while it starts to its app's, which binds it a moment later)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def assert_loopback_only(port: int) -> None:
    assert listening_addresses(port) == {"127.0.0.1"}
    address = non_loopback_address()
    if address:  # the machine has another interface: the port does not answer there
        assert refuses(address, port)


def test_the_worker_listens_on_loopback_and_serves_no_table_views(cluster_factory):
    cluster = cluster_factory(parse_config({"seed": 3, "report_partitions": 1, "stream_partitions": 1,
                                            "streams": [CENTRAL]}))
    worker = cluster.start_worker()
    wait_for_port("127.0.0.1", worker.web_port, timeout=60)
    assert wait_for(lambda: status(f"http://127.0.0.1:{worker.web_port}/readyz") == 200, 60), cluster.logs()
    assert_loopback_only(worker.web_port)
    for table in ("assembler", "publication-state", "dissimilarity-state"):
        assert status(f"http://127.0.0.1:{worker.web_port}/table/{table}/") == 404
        assert status(f"http://127.0.0.1:{worker.web_port}/table/{table}/{CENTRAL['name']}/") == 404
    assert status(f"http://127.0.0.1:{worker.web_port}/table/") == 404


def test_the_worker_and_the_devices_listen_on_every_interface_only_when_told(broker, tmp_path):
    from wevent.stream.runtime.broker import create_topics
    from wevent.stream.runtime.child_processes import write_config

    config = parse_config({"seed": 3, "report_partitions": 1, "stream_partitions": 1, "streams": [CENTRAL, LOCAL]})
    create_topics(broker.bootstrap, config.topics())
    config_path = write_config(config, tmp_path)
    values = tmp_path / "values.npz"
    UserValues(np.zeros((2, 10), dtype=np.int64), 4, slot_seconds=60, start=START).save(values)
    devices, open_devices = free_port(), free_port()
    processes: list[ChildProcess] = [
        DevicesProcess(config_path, "devices", values, broker.bootstrap, tmp_path / "devices.log", tansu_compat=broker.tansu_compat,
                       new_ledger=True, metrics_port=devices),
        DevicesProcess(config_path, "devices", values, broker.bootstrap, tmp_path / "devices-open.log",
                       tansu_compat=broker.tansu_compat, new_ledger=True, shard=1, shards=2, metrics_port=open_devices,
                       ledger_dir=tmp_path / "ledger-open"),  # another sharding: a directory of its own
        WorkerProcess(config_path, broker.bootstrap, free_port(), tmp_path / "worker.log", tansu_compat=broker.tansu_compat,
                      datadir=tmp_path / "data"),
    ]
    processes[1].command += ["--metrics-host", "0.0.0.0"]
    processes[2].command += ["--web-host", "0.0.0.0"]
    try:
        for process in processes:
            process.start()
        for port in (devices, open_devices, processes[2].web_port):
            wait_for_port("127.0.0.1", port, timeout=60)
        # the worker's app, not the server answering its probes while it starts, has the port
        assert wait_for(lambda: status(f"http://127.0.0.1:{processes[2].web_port}/readyz") == 200, 60)
        assert_loopback_only(devices)
        assert listening_addresses(open_devices) == {"0.0.0.0"}
        assert listening_addresses(processes[2].web_port) == {"0.0.0.0"}
    finally:
        for process in processes:
            process.stop()


def test_the_replay_serves_the_error_against_the_truth_on_loopback_only(broker, tmp_path):
    from wevent.stream.runtime.broker import create_topics
    from wevent.stream.runtime.child_processes import write_config

    config = parse_config({"seed": 3, "report_partitions": 1, "stream_partitions": 1, "streams": [
        CENTRAL | {"name": "taxi", "domain": 16, "users": 248, "slot_seconds": 300, "start": 1201968059}]})
    create_topics(broker.bootstrap, config.topics())
    truth = free_port()
    replay = ChildProcess(["replay", "tdrive", str(TDRIVE), "--grid", "4x4", "--slot-seconds", "300", "--config",
                           str(write_config(config, tmp_path)), "--bootstrap", broker.bootstrap, *compat_flags(broker),
                           "--truth-port", str(truth), "--no-progress"], tmp_path / "replay.log").start()
    try:
        wait_for_port("127.0.0.1", truth, timeout=60)
        assert_loopback_only(truth)
    finally:
        replay.stop()
