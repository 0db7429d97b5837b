"""`wevent worker` refuses a web address it cannot listen on in one line (exit 2), before it starts
(in this process: it stops before it connects to anything)."""

from __future__ import annotations

import socket

import pytest

from wevent.stream.runtime.child_processes import write_config
from tests.helpers import run_main, stream_config


@pytest.fixture
def worker(tmp_path, capsys):
    """`wevent worker` of a one-stream config with ``arguments``: exit status, stdout, stderr."""
    config = write_config(stream_config(name="a", window=5), tmp_path)
    return lambda *arguments: run_main(capsys, "worker", "--config", config, "--bootstrap", "127.0.0.1:1", *arguments)


@pytest.mark.parametrize("arguments, message", [
    (["--web-host", "localhost"], "argument --web-host: not an IP address: 'localhost'"),
    (["--web-host", "203.0.113.7", "--web-port", "6066"], "cannot listen on 203.0.113.7:6066"),  # not this machine's
    (["--web-port", "0"], "--web-port must be an integer >= 1"),
])
def test_an_address_the_worker_cannot_listen_on_is_one_line(worker, arguments, message):
    status, _, err = worker(*arguments)
    assert status == 2 and err.count("\n") == 1 and message in err, err


def test_a_taken_web_port_is_one_line(worker):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        status, _, err = worker("--web-port", port)
    assert status == 2 and err == f"wevent worker: error: cannot listen on 127.0.0.1:{port}: Address already in use\n"
