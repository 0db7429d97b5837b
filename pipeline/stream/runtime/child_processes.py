"""Child processes of ``wevent run`` and of the integration tests: workers started as `wevent worker`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..config import AppConfig, dump_config


def write_config(config: AppConfig, directory: Path) -> Path:
    path = Path(directory) / "streams.json"
    path.write_text(json.dumps(dump_config(config), indent=2))
    return path


class ChildProcess:
    """A `wevent ...` child process with its own log file, stopped as a process group."""

    def __init__(self, arguments: list[str], log_path: Path, env: dict | None = None) -> None:
        self.command = [sys.executable, "-m", "wevent.cli", *arguments]
        self.log_path = Path(log_path)
        self.env = {**os.environ, **(env or {})}
        self.process: subprocess.Popen | None = None

    def start(self) -> "ChildProcess":
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                        start_new_session=True)
        log.close()
        return self

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: the crash the tests inject."""
        if self.alive:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL if the worker ignores it (it may while its coordinator is gone)."""
        if not self.alive:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""


class WorkerProcess(ChildProcess):
    """A `wevent worker` with its own web port (/metrics, /healthz, /query)."""

    def __init__(self, config_path: Path, bootstrap: str, web_port: int, log_path: Path, *, tansu_compat: bool,
                 datadir: Path | None = None, env: dict | None = None, loglevel: str = "warn") -> None:
        arguments = ["worker", "--config", str(config_path), "--bootstrap", bootstrap, "--web-port", str(web_port),
                     "--loglevel", loglevel]
        if tansu_compat:
            arguments.append("--tansu-compat")
        if datadir:
            arguments += ["--datadir", str(datadir)]
        super().__init__(arguments, log_path, env)
        self.web_port = web_port


class DevicesProcess(ChildProcess):
    """A `wevent devices` fleet for one shard of a local-model stream's users.

    Its users' ledgers are kept in ``ledger_dir`` (default: ``devices-ledger`` beside the log), so a
    run's fleets never read another run's ledgers and a restarted fleet reads its own. ``new_ledger``
    marks the shard's first start (``--new-ledger``): a restart without it finds its ledger or stops.
    """

    def __init__(self, config_path: Path, stream: str, values: Path, bootstrap: str, log_path: Path, *,
                 tansu_compat: bool, new_ledger: bool, shard: int = 0, shards: int = 1,
                 metrics_port: int | None = None, ledger_dir: Path | None = None) -> None:
        ledger_dir = ledger_dir or Path(log_path).parent / "devices-ledger"
        arguments = ["devices", "--config", str(config_path), "--stream", stream, "--values", str(values),
                     "--bootstrap", bootstrap, "--shard", f"{shard}/{shards}", "--ledger-dir", str(ledger_dir)]
        if new_ledger:
            arguments.append("--new-ledger")
        if tansu_compat:
            arguments.append("--tansu-compat")
        if metrics_port:
            arguments += ["--metrics-port", str(metrics_port)]
        super().__init__(arguments, log_path)
        self.metrics_port = metrics_port


def wait_until(predicate, timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
