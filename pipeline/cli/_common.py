"""Argument parsing helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import sys
from typing import Iterable, TypeVar

from ..errors import UsageError

__all__ = ["UsageError", "OneLineParser", "progress", "serve_metrics"]

T = TypeVar("T")


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit status 2), not the usage block."""

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {message}\n")


def progress(iterable: Iterable[T], enabled: bool | None, total: int | None = None, desc: str = "slots") -> Iterable[T]:
    """A progress bar on stderr for long runs; ``enabled=None`` shows it only on a terminal."""
    if enabled is False:
        return iterable
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, unit="slot", disable=None if enabled is None else False,
                file=sys.stderr, mininterval=0.5, leave=False)


def serve_metrics(port: int, address: str = "0.0.0.0") -> None:
    """Serve this process's Prometheus metrics on ``port`` (/metrics); a busy port is a usage error."""
    from prometheus_client import start_http_server

    try:
        start_http_server(port, addr=address)
    except OSError as exc:
        raise UsageError(f"cannot serve metrics on port {port}: {exc.strerror}") from None
