"""Child processes of ``wevent run`` and of the integration tests: workers started as `wevent worker`.

Every child ends with its parent: :func:`die_with_parent` asks the kernel to SIGKILL it when the
process that started it dies, however it dies (SIGKILL included, when nothing of the parent runs
to stop it). The request is made in the child between fork and exec, so it holds for programs
that are not ours too: the embedded tansu broker and Apache Kafka's JVM get it the same way.

Nothing is left behind
----------------------

**Nothing is left behind.** The children of `wevent run` and `wevent bench soak` (the embedded
broker, the worker, the device fleet) ask the kernel, between fork and exec, to be killed when
their parent dies (Linux's `PR_SET_PDEATHSIG`); the request survives exec, so it holds for the
tansu binary as for our own processes, without a wrapper. A run SIGKILLed mid-way therefore
takes every child with it. Its working directory (for a local stream, the devices' true values)
records its owner (process id, start time, boot id), and the next `wevent run` or soak deletes
the directories of owners that are gone, never a live run's. When the worker or the device
fleet dies, `wevent run` ends with one line quoting the last line of its log.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from ...errors import EXIT_INTERNAL, EXIT_LOST_STATE, EXIT_UNAVAILABLE, EXIT_USAGE
from ..config import AppConfig, dump_config

PR_SET_PDEATHSIG = 1  # linux/prctl.h
# What a terminal makes of a log but a file does not: CSI sequences, other escapes, control characters.
TERMINAL_CODES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]|[\x00-\x08\x0b-\x1f\x7f]")
#: The exit statuses a child may end with, each with its meaning (wevent.errors); any other end
#: (a signal, an unknown status) is reported as an internal error.
DOCUMENTED_STATUSES = (EXIT_INTERNAL, EXIT_USAGE, EXIT_LOST_STATE, EXIT_UNAVAILABLE)


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` for :class:`subprocess.Popen` that makes the kernel SIGKILL the child when
    this process dies (Linux's ``PR_SET_PDEATHSIG``; None where there is no ``prctl``).

    It runs in the child after fork and before exec, and the setting survives exec (of a program
    that is not set-user-ID and has no file capabilities), so it covers a binary that is not ours,
    such as the tansu broker, without a wrapper. SIGKILL, because nothing is left to escalate a
    SIGTERM that is ignored, and every child is safe to kill: the worker is at-least-once, the
    device fleet's ledger is on disk first, the embedded broker holds nothing worth keeping. The
    signal follows the *thread* that started the child: start children from a thread that
    outlives them (the main thread, as ``wevent run`` does). A parent that died before the child
    asked is noticed (the child's parent changed) and the child kills itself.
    """
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up, and its argument made, before the fork
    except (OSError, AttributeError):
        return None
    parent, kill = os.getpid(), ctypes.c_ulong(signal.SIGKILL)

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, kill)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return arm


def running(process: subprocess.Popen[bytes] | None) -> subprocess.Popen[bytes] | None:
    """``process`` while it runs; None if it was never started or has ended."""
    return process if process is not None and process.poll() is None else None


def describe_exit(code: int | None) -> str:
    """How a process ended, from its return code: "exit status 2", "killed by SIGKILL" or "running"."""
    if code is None:
        return "running"
    return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"


def last_line(text: str) -> str:
    """The last line of a log with something to read, without terminal codes ("" if none)."""
    lines = (TERMINAL_CODES.sub("", line).strip() for line in reversed(text.splitlines()))
    return next((line for line in lines if line), "")


def write_config(config: AppConfig, directory: Path) -> Path:
    path = Path(directory) / "streams.json"
    path.write_text(json.dumps(dump_config(config), indent=2))
    return path


# `python -m` puts the working directory first on sys.path, so a file there named like a module the
# child imports (an inspect.py, a queue.py) would run in its place; -P leaves it out, as the
# `wevent` console script does.
WEVENT_COMMAND = (sys.executable, "-P", "-m", "wevent.cli")


class ChildProcess:
    """A `wevent ...` child process with its own log file, stopped as a process group, and killed
    by the kernel if this process dies first (:func:`die_with_parent`)."""

    def __init__(self, arguments: list[str], log_path: Path, env: dict[str, str] | None = None) -> None:
        self.command = [*WEVENT_COMMAND, *arguments]
        self.log_path = Path(log_path)
        self.env = {**os.environ, **(env or {})}
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> "ChildProcess":
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                        start_new_session=True, preexec_fn=die_with_parent())
        log.close()
        return self

    @property
    def name(self) -> str:
        """The `wevent` subcommand it runs: "worker", "devices", ..."""
        return self.command[len(WEVENT_COMMAND)]

    @property
    def alive(self) -> bool:
        return running(self.process) is not None

    @property
    def returncode(self) -> int | None:
        """How it ended (negative: killed by that signal); None while it runs, or before it starts."""
        return self.process.poll() if self.process else None

    def describe_exit(self) -> str:
        return describe_exit(self.returncode)

    @property
    def exit_status(self) -> int:
        """Its exit status if it is a documented one, else :data:`~wevent.errors.EXIT_INTERNAL`."""
        code = self.returncode
        return code if code in DOCUMENTED_STATUSES else EXIT_INTERNAL

    def kill(self) -> None:
        """SIGKILL: the crash the tests inject."""
        process = running(self.process)
        if process is not None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL if the worker ignores it (it may while its coordinator is gone)."""
        process = running(self.process)
        if process is None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def last_line(self) -> str:
        """The last line of its log with something to read (:func:`last_line`)."""
        return last_line(self.log_tail())


class WorkerProcess(ChildProcess):
    """A `wevent worker` with its own web port (/metrics, /livez, /readyz, /query)."""

    def __init__(self, config_path: Path, bootstrap: str, web_port: int, log_path: Path, *, tansu_compat: bool,
                 datadir: Path | None = None, env: dict[str, str] | None = None, loglevel: str = "warn",
                 report_counts: bool = False) -> None:
        arguments = ["worker", "--config", str(config_path), "--bootstrap", bootstrap, "--web-port", str(web_port),
                     "--loglevel", loglevel]
        if report_counts:  # functions of raw data on /metrics: for tests that count what was refused
            arguments.append("--export-report-counts")
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


def wait_until(predicate: Callable[[], object], timeout: float, interval: float = 0.1) -> bool:
    """Whether ``predicate()`` became true (truthy) within ``timeout`` seconds, asked every ``interval``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
