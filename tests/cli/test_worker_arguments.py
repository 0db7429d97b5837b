"""`wevent worker` refuses a web address it cannot listen on in one line (exit 2), before it starts."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

CONFIG = {"seed": 1, "report_partitions": 1, "stream_partitions": 1, "streams": [{
    "name": "a", "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 5, "domain": 4, "users": 10,
    "slot_seconds": 60, "start": 0}]}


def worker(tmp_path, *arguments: str) -> subprocess.CompletedProcess:
    config = tmp_path / "streams.json"
    config.write_text(json.dumps(CONFIG))
    return subprocess.run([sys.executable, "-m", "wevent.cli", "worker", "--config", str(config), "--bootstrap",
                           "127.0.0.1:1", *arguments], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("arguments, message", [
    (["--web-host", "localhost"], "argument --web-host: not an IP address: 'localhost'"),
    (["--web-host", "203.0.113.7", "--web-port", "6066"], "cannot listen on 203.0.113.7:6066"),  # not this machine's
    (["--web-port", "0"], "--web-port must be an integer >= 1"),
])
def test_an_address_the_worker_cannot_listen_on_is_one_line(tmp_path, arguments, message):
    result = worker(tmp_path, *arguments)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


def test_a_taken_web_port_is_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = worker(tmp_path, "--web-port", str(port))
    assert result.returncode == 2 and result.stderr == f"wevent worker: error: cannot listen on 127.0.0.1:{port}: " \
                                                       "Address already in use\n"
