"""Argument parsing helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import ipaddress
import math
import os
import socket
import sys
from pathlib import Path
from typing import Callable, Iterable, TypeVar

from ..errors import UsageError

__all__ = ["UsageError", "OneLineParser", "progress", "serve_metrics", "check_listen", "number", "bind_address",
           "output_file", "LOOPBACK"]

LOOPBACK = "127.0.0.1"  # the default address of every HTTP port: open it to the network explicitly

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


def number(kind: type, low: float | None = None, high: float | None = None, *,
           low_open: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite ``kind`` (int or float) in [low, high] (or (low, high] when ``low_open``).

    NaN and infinities are refused here, at parse time, before any work starts.
    """
    def read(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {'an integer' if kind is int else 'a number'}: {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be finite, got {text!r}")
        if low is not None and (value <= low if low_open else value < low):
            raise argparse.ArgumentTypeError(f"must be {'>' if low_open else '>='} {low:g}, got {text!r}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be <= {high:g}, got {text!r}")
        return value
    return read


def bind_address(text: str) -> str:
    """An argparse type: the IP address an HTTP port listens on (0.0.0.0 for every interface)."""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an IP address: {text!r}") from None


def output_file(text: str) -> str:
    """An argparse type: a file this command will write, checked at parse time (its directory
    exists and is writable, and it is not a directory) so that a long run cannot fail at its end."""
    path = Path(text)
    directory = path.parent
    if not directory.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text}: no directory {directory}")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text}: it is a directory")
    if not os.access(path if path.exists() else directory, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot write {text}: permission denied")
    return text


def check_listen(address: str, port: int) -> None:
    """Fail now, in one line, if ``address:port`` cannot be listened on (the port is taken, or the
    address is not this machine's), rather than in a server's traceback later."""
    family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: a closing socket is no conflict
        try:
            probe.bind((address, port))
        except OSError as exc:
            raise UsageError(f"cannot listen on {address}:{port}: {exc.strerror}") from None


def serve_metrics(port: int, address: str = LOOPBACK) -> None:
    """Serve this process's Prometheus metrics on ``port`` (/metrics); a busy port is a usage error."""
    from prometheus_client import start_http_server

    try:
        start_http_server(port, addr=address)
    except OSError as exc:
        raise UsageError(f"cannot serve metrics on {address}:{port}: {exc.strerror}") from None
