"""What many test files need: the ``wevent`` command (in a child process, or ``main(argv)`` in this
one), a one-stream config, and the counters of refused reports and dead letters."""

from __future__ import annotations

import os
import subprocess
import sys

from prometheus_client import REGISTRY

from wevent.cli import main
from wevent.stream.config import AppConfig, parse_config
from wevent.stream.wire.records import DeadLetter

CENTRAL_STREAM = {"name": "s", "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 10, "domain": 4,
                  "users": 10, "slot_seconds": 60, "start": 0}


def wevent(*args: str, check: bool = True, timeout: float = 120, env: dict | None = None,
           cwd=None) -> subprocess.CompletedProcess:
    """``wevent ARGS`` as a user runs it: a child process, its exit status, stdout and stderr (text).
    The child sees this environment without ``WEVENT_BOOTSTRAP`` (no Kafka unless the arguments name
    one), plus ``env``; ``check`` asserts exit status 0."""
    environment = {k: v for k, v in os.environ.items() if k != "WEVENT_BOOTSTRAP"} | (env or {})
    proc = subprocess.run([sys.executable, "-m", "wevent.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=environment, cwd=cwd)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def run_main(capsys, *args) -> tuple[int, str, str]:
    """``wevent ARGS`` in this process (``main(argv)``): exit status, stdout and stderr. For the
    checks of arguments and of input, which stop before any work: no interpreter to start."""
    capsys.readouterr()  # what the test printed before is not the command's
    status = main([str(a) for a in args])
    out = capsys.readouterr()
    return status, out.out, out.err


def stream_config(*, seed: int = 1, report_partitions: int = 1, stream_partitions: int = 1, app: str | None = None,
                  **stream) -> AppConfig:
    """A config of one stream: :data:`CENTRAL_STREAM` with ``stream``'s fields (a field given as
    None is left out)."""
    fields = {k: v for k, v in (CENTRAL_STREAM | stream).items() if v is not None}
    app_fields = {"app": app} if app is not None else {}
    return parse_config({**app_fields, "seed": seed, "report_partitions": report_partitions,
                         "stream_partitions": stream_partitions, "streams": [fields]})


def rejected(stream: str, reason: str) -> float:
    """Reports of ``stream`` refused for ``reason`` so far in this process (wevent_reports_rejected_total)."""
    return REGISTRY.get_sample_value("wevent_reports_rejected_total", {"stream": stream, "reason": reason}) or 0.0


def dead_lettered(reason: str) -> float:
    """Messages dead-lettered for ``reason`` so far in this process (wevent_dead_letters_total)."""
    return REGISTRY.get_sample_value("wevent_dead_letters_total", {"reason": reason}) or 0.0


def dead_letters(pipeline) -> list[DeadLetter]:
    """The dead letters an in-process pipeline (``tests.stream.harness``) wrote, in order."""
    return [DeadLetter.from_json(v) for v in pipeline.log["deadletter"]]
