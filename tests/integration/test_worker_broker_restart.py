"""A worker whose broker goes away stays alive (/livez), says so on /readyz, logs little, and exits
with one line when the broker comes back without its data (tansu keeps everything in memory:
restarted, it is empty). A worker started while its broker is down waits for it, saying so once,
and comes up when it starts."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from wevent.stream.runtime.broker import EmbeddedBroker, free_port
from wevent.stream.runtime.child_processes import WorkerProcess, wait_until
from wevent.stream.runtime.subscription import read_topic
from tests.integration.test_replay_delivery import replay_command, write_taxi_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OUTAGE = 30.0  # seconds the broker stays away
FIRST_SLOT = 281  # the stream starts at the sample's slot 281: a short replay of its last 8 slots


def health(worker: WorkerProcess, path: str = "/readyz") -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{worker.web_port}{path}", timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())
    except OSError:
        return 0, {}


def released(bootstrap: str) -> bool:
    try:
        return bool(read_topic(bootstrap, "releases", timeout=5))
    except Exception:  # the topic is not there yet
        return False


def replay_last_slots(path: Path, bootstrap: str, tansu_compat: bool = True) -> None:
    done = subprocess.run(replay_command(path, bootstrap, "--from-slot", str(FIRST_SLOT), tansu_compat=tansu_compat),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def start_worker(path: Path, bootstrap: str, log: Path) -> WorkerProcess:
    return WorkerProcess(path, bootstrap, free_port(), log, tansu_compat=True, datadir=log.with_suffix(".data")).start()


def test_lost_broker_unready_then_exit_when_it_returns_empty(tmp_path):
    config, path = write_taxi_config(tmp_path, FIRST_SLOT)
    broker = EmbeddedBroker().start()
    worker = None
    try:
        worker = start_worker(path, broker.bootstrap, tmp_path / "worker.log")  # it creates the topics
        assert wait_until(lambda: health(worker)[0] == 200, 60), worker.log_tail()
        replay_last_slots(path, broker.bootstrap)
        assert wait_until(lambda: released(broker.bootstrap), 120), worker.log_tail()

        broker.process.kill()
        broker.process.wait()
        lines_before = len(worker.log_path.read_text(errors="replace").splitlines())
        down = time.monotonic()
        # 60 s here and for the exit below: promptly, not for ever, on a loaded machine
        assert wait_until(lambda: health(worker)[0] == 503, 60), health(worker)
        status, body = health(worker)
        assert body["problems"][0]["reason"] == "broker unreachable", body
        while time.monotonic() - down < OUTAGE:  # alive all along: the outage is no reason to restart it
            assert health(worker, "/livez")[0] == 200
            time.sleep(1.0)
        outage_log = worker.log_path.read_text(errors="replace").splitlines()[lines_before:]
        assert len(outage_log) <= 20, "\n".join(outage_log)  # one line per kind of error per 30 s

        broker = EmbeddedBroker(broker.port).start()  # empty: no topics, no offsets, no tables
        try:
            worker.process.wait(60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the worker runs on against a broker that lost its data: {health(worker)}")
        assert worker.process.returncode == 3
        last = worker.log_tail(1)
        assert "lost this worker's data (topics" in last and "exiting" in last, last
        assert "Traceback" not in worker.log_path.read_text(errors="replace")
    finally:
        if worker:
            worker.stop()
        broker.stop()


def test_a_worker_started_before_its_broker_waits_for_it_then_releases(tmp_path):
    config, path = write_taxi_config(tmp_path, FIRST_SLOT)
    broker = EmbeddedBroker()  # not started yet: its port is known
    worker = start_worker(path, broker.bootstrap, tmp_path / "worker.log")
    try:
        assert wait_until(lambda: health(worker)[0] == 503, 30), worker.log_tail()
        time.sleep(5)  # a few attempts: still one line
        status, body = health(worker)
        assert status == 503 and body["problems"][0]["reason"] == "broker unreachable", body
        assert health(worker, "/livez")[0] == 200
        # Its own lines, and any line saying a connection failed (a client library's), are that one
        # line: other warnings a loaded machine brings (a late timer, say) are not about the attempts.
        said = [line for line in worker.log_path.read_text().splitlines()
                if line.startswith("wevent ") or re.search(r"(?i)refused|connect call failed|unable connect", line)]
        assert worker.alive and said == [
            f"wevent worker: cannot reach Kafka at {broker.bootstrap}: {broker.bootstrap}: Connection refused; "
            "trying again until it answers"], worker.log_tail()

        broker.start()
        assert wait_until(lambda: health(worker)[0] == 200, 60), (health(worker), worker.log_tail())
        replay_last_slots(path, broker.bootstrap)
        assert wait_until(lambda: released(broker.bootstrap), 120), worker.log_tail()
        lines = worker.log_path.read_text().splitlines()
        assert lines[1].startswith(f"wevent worker: Kafka at {broker.bootstrap} answers, after "), lines
        assert sum("cannot reach Kafka" in line for line in lines) == 1, lines
        assert lines[2] == (f"wevent worker: app wevent, streams taxi (central ba); Kafka at {broker.bootstrap} "
                            f"(tansu); web http://127.0.0.1:{worker.web_port} (/metrics, /livez, /readyz, /query); stops on "
                            "SIGTERM"), lines
    finally:
        worker.stop()
        broker.stop()
