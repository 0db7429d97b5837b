"""Argument parsing helpers shared by the subcommands.

Every option is checked by type and range while the command line is parsed, before any work
starts; a value out of range is one line naming the option and its limit. The size limits are what
one machine of a few GB of memory can take (:data:`LIMITS`): a larger request is refused rather than
left to fail half-way with an out-of-memory error.
"""

from __future__ import annotations

import argparse
import ipaddress
import math
import os
import re
import socket
import sys
import time
import urllib.parse
from typing import Callable, Iterable, TypedDict, TypeVar

from ..core.validation import MIN_EPSILON
from ..errors import Unavailable, UsageError
from ..stream.settings import LOOPBACK, PROPERTIES_FILE_ENV, RELEASE_KEY_ENV, Settings
from ._help import OneLineParser

__all__ = ["UsageError", "OneLineParser", "progress", "serve_metrics", "LIMITS", "check_cells", "integer", "real",
           "probability", "port", "listen_port", "seed", "user_count", "slot_count", "window_length", "bin_count",
           "partition_count", "run_count", "epsilon_value", "readable_file", "writable_file", "directory", "bootstrap_servers",
           "http_url", "shard_spec", "kafka_properties_option", "reachable_kafka", "wait_for_kafka", "bind_address",
           "check_listen"]


T = TypeVar("T")


class Limits(TypedDict):
    """The limits by name: counts are integers, durations and budgets real numbers."""

    users: int
    slots: int
    window: int
    domain: int
    cells: int
    partitions: int
    seed: int
    runs: int
    seconds: float
    epsilon: float


# Size limits of the command line, for one machine with a few GB of memory to spare. A slot of
# --users values takes one byte per user, plus 8 bytes per user for sampling: 10^8 users is about
# 1 GB per slot. "cells" bounds a matrix of float64 numbers, such as slots x bins or users x
# categories: 2 x 10^8 cells are 1.6 GB, and a run holds a few arrays of that size.
LIMITS: Limits = {
    "users": 100_000_000,
    "slots": 10_000_000,
    "window": 10_000_000,
    "domain": 1_000_000,
    "cells": 200_000_000,
    "partitions": 1_024,
    "seed": 2**63 - 1,
    "runs": 1_000,
    "seconds": 366 * 86_400.0,  # timeouts and slot lengths: a year
    "epsilon": 1e6,
}


def _show(bound: float) -> str:
    """A limit as people read it: 10,000,000 rather than 1e+07."""
    return f"{int(bound):,}" if float(bound).is_integer() else f"{bound:g}"


def _number(text: str, convert: Callable[[str], T], kind: str) -> T:
    try:
        return convert(text.strip())
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"must be {kind}, got {text!r}") from None


def integer(minimum: int | None = 1, maximum: int | None = None) -> Callable[[str], int]:
    """An integer in ``[minimum, maximum]`` (``None``: unbounded on that side)."""
    bounds = " and ".join(f"{sign} {_show(bound)}" for sign, bound in ((">=", minimum), ("<=", maximum))
                          if bound is not None)
    kind = f"an integer {bounds}".rstrip()

    def read(text: str) -> int:
        value = _number(text, int, kind)
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"must be {kind}, got {text.strip()}")
        return value

    read.__name__ = "integer"
    return read


def real(minimum: float | None = None, maximum: float | None = None, *, above: float | None = None,
         below: float | None = None) -> Callable[[str], float]:
    """A finite number in ``[minimum, maximum]``, or strictly ``above``/``below`` a bound."""
    parts = [f"{sign} {_show(bound)}" for sign, bound in ((">=", minimum), (">", above), ("<=", maximum), ("<", below))
             if bound is not None]
    kind = " ".join(["a finite number", " and ".join(parts)]).rstrip()

    def read(text: str) -> float:
        value = _number(text, float, kind)
        if not (math.isfinite(value) and (minimum is None or value >= minimum) and (above is None or value > above)
                and (maximum is None or value <= maximum) and (below is None or value < below)):
            raise argparse.ArgumentTypeError(f"must be {kind}, got {text.strip()}")
        return value

    read.__name__ = "number"
    return read


def probability(*, open_low: bool = False, open_high: bool = False) -> Callable[[str], float]:
    """A probability in [0, 1], either end excluded on request."""
    return real(None if open_low else 0.0, None if open_high else 1.0, above=0.0 if open_low else None,
                below=1.0 if open_high else None)


def check_cells(**sizes: int) -> None:
    """Refuse a matrix of these sizes (keyword: option name) over ``LIMITS["cells"]`` cells."""
    cells = math.prod(sizes.values())
    if cells > LIMITS["cells"]:
        names = " x ".join(f"--{name.replace('_', '-')}" for name in sizes)
        raise UsageError(f"{names} must be <= {LIMITS['cells']:,} cells (this machine's limit), got {cells:,}")


def port(text: str) -> int:
    """A TCP port, 1..65535."""
    return integer(1, 65_535)(text)


# The options most subcommands share, with this machine's limits.
user_count = integer(1, LIMITS["users"])
slot_count = integer(1, LIMITS["slots"])
window_length = integer(1, LIMITS["window"])
bin_count = integer(1, LIMITS["domain"])
partition_count = integer(1, LIMITS["partitions"])
run_count = integer(1, LIMITS["runs"])
# The smallest budget is the core's (wevent.core.validation.MIN_EPSILON): below it noise scales overflow.
epsilon_value = real(MIN_EPSILON, LIMITS["epsilon"])


def listen_port(text: str) -> int:
    """A TCP port, 1..65535, that this process can listen on now (not taken, not privileged)."""
    import socket

    number = port(text)
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do: TIME_WAIT is no obstacle
        try:
            probe.bind(("0.0.0.0", number))
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"must be a free port, cannot listen on {number}: {exc.strerror}") \
                from None
    return number


def seed(text: str) -> int:
    """A seed: an integer in 0..2^63-1."""
    return integer(0, LIMITS["seed"])(text)


def readable_file(text: str) -> str:
    """An existing regular file this process may read."""
    if not os.path.exists(text):
        raise argparse.ArgumentTypeError(f"must be an existing file, {text!r} was not found")
    if not os.path.isfile(text):
        raise argparse.ArgumentTypeError(f"must be a file, {text!r} is not a regular file")
    if not os.access(text, os.R_OK):
        raise argparse.ArgumentTypeError(f"must be a readable file, cannot read {text!r}")
    return text


def writable_file(text: str) -> str:
    """A file to write: not a directory, in an existing directory this process may write to."""
    if not text or os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"must be a file to write, {text!r} is a directory")
    parent = os.path.dirname(text) or "."
    if not os.path.isdir(parent):
        raise argparse.ArgumentTypeError(f"must be in an existing directory, there is no directory {parent!r}")
    if not os.access(parent, os.W_OK) or (os.path.exists(text) and not os.access(text, os.W_OK)):
        raise argparse.ArgumentTypeError(f"must be a writable file, cannot write {text!r}")
    return text


def directory(text: str) -> str:
    """A directory to keep data in: an existing one, or a new one whose parent exists."""
    if os.path.exists(text) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"must be a directory, {text!r} is a file")
    parent = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(parent):
        raise argparse.ArgumentTypeError(f"must be in an existing directory, there is no directory {parent!r}")
    return text


_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)$")


def _host_port(address: str, what: str) -> None:
    host, sep, number = address.rpartition(":")
    if not sep or not _HOST.match(host) or not number.isdigit() or not 1 <= int(number) <= 65_535:
        raise argparse.ArgumentTypeError(f"must be {what}, got {address!r}")


def bootstrap_servers(text: str) -> str:
    """Kafka bootstrap servers: comma-separated HOST:PORT, ports 1..65535."""
    for address in text.split(","):
        _host_port(address.strip(), "comma-separated HOST:PORT with ports 1..65535")
    return text


def http_url(text: str) -> str:
    """An http(s) URL of a host (and port 1..65535)."""
    what = "an http:// or https:// URL of HOST[:PORT] with a port in 1..65535"
    try:
        parsed = urllib.parse.urlsplit(text)
    except ValueError:  # e.g. an unclosed IPv6 bracket
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
    try:
        valid_port = parsed.port is None or 1 <= parsed.port <= 65_535
    except ValueError:
        valid_port = False
    if parsed.scheme not in ("http", "https") or not parsed.hostname or not valid_port:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
    return text


def shard_spec(text: str) -> str:
    """``K/N``: shard K of N, 0 <= K < N <= 10^6 (the text, checked)."""
    k, sep, n = text.partition("/")
    try:
        index, count = int(k), int(n)
    except ValueError:
        index, count = -1, 0
    if not sep or not 0 <= index < count <= 1_000_000:
        raise argparse.ArgumentTypeError(f"must be K/N with 0 <= K < N <= 1,000,000, got {text!r}")
    return text


def progress(iterable: Iterable[T], enabled: bool | None, total: int | None = None, desc: str = "slots") -> Iterable[T]:
    """A progress bar on stderr for long runs; ``enabled=None`` shows it only on a terminal."""
    if enabled is False:
        return iterable
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, unit="slot", disable=None if enabled is None else False,
                file=sys.stderr, mininterval=0.5, leave=False)


def bind_address(text: str) -> str:
    """An argparse type: the IP address an HTTP port listens on (0.0.0.0 for every interface)."""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an IP address: {text!r}") from None


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


def kafka_properties_option(parser) -> None:
    """The network commands' ``--kafka-properties FILE`` (:func:`wevent.cli.main` applies it to
    ``args.settings``)."""
    parser.add_argument("--kafka-properties", type=readable_file, metavar="FILE",
                        help=f"Kafka client properties, one per line in Java's form (e.g. a managed Kafka's "
                        f"client.properties; default: ${PROPERTIES_FILE_ENV}); WEVENT_KAFKA_* variables win over it")


def reachable_kafka(explicit: str | None, settings: Settings, timeout: float = 10.0, config=None) -> str:
    """The Kafka to use (``explicit``, else $WEVENT_BOOTSTRAP, else the properties file's
    ``bootstrap.servers``, as ``settings`` give them), reached with the client properties
    ``settings`` and ``config`` give, checked to answer within ``timeout`` s.

    A refused connection or an unknown host fails at once (:class:`~wevent.errors.Unavailable`:
    Kafka may be down now and up later); a property librdkafka does not take or an OAUTHBEARER
    token endpoint that refuses the client fails at once too, and a listener that is not Kafka
    after ``timeout`` (usage errors: the address or the settings are wrong). Either way the failure
    is one line, not the client library's retries and log.
    """
    import socket

    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from ..stream.runtime.broker import ask_again
    from ..stream.runtime.kafka import client_config

    bootstrap = settings.kafka_bootstrap(explicit)
    if not bootstrap:
        raise UsageError("no Kafka to connect to: pass --bootstrap or set WEVENT_BOOTSTRAP")
    try:
        bootstrap_servers(bootstrap)
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"Kafka bootstrap servers {exc}") from None
    credentials = settings.kafka_credentials(config)
    if credentials is not None and credentials.oauthbearer:
        from ..stream.runtime.oauth import ClientCredentialsTokens

        ClientCredentialsTokens.of(credentials).check()
    errors = []
    for address in bootstrap.split(","):
        host, _, number = address.strip().rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(number)), timeout=timeout).close()
            break
        except OSError as exc:
            errors.append(f"{address.strip()}: {exc.strerror or exc}")
    else:
        raise Unavailable(f"cannot reach Kafka at {bootstrap}: {'; '.join(errors)}")
    try:  # log_level 0: the one line below says it all
        client = AdminClient({**client_config(bootstrap, credentials), "log_level": 0})
    except KafkaException as exc:  # a property librdkafka refuses, before it connects
        raise UsageError(f"the Kafka client properties: {exc.args[0].str()}") from None
    try:
        ask_again(lambda seconds: client.list_topics(timeout=seconds), timeout)
    except KafkaException as exc:
        raise UsageError(f"no Kafka answered at {bootstrap} within {timeout:g} s: {exc.args[0].str()}") from None
    return bootstrap


RETRY_LIMIT_SECONDS = 10.0  # the longest wait between two attempts to reach Kafka


def wait_for_kafka(explicit: str | None, settings: Settings, command: str,
                   waiting: Callable[[str, str, float], None] = lambda bootstrap, error, seconds: None,
                   sleep: Callable[[float], object] = time.sleep, config=None) -> str:
    """:func:`reachable_kafka`, tried again while Kafka cannot be reached, with a backoff from 1 s
    doubling up to :data:`RETRY_LIMIT_SECONDS`, for as long as it takes: for the long-running
    commands (a worker, a device fleet), whose supervisor would only start them again.

    ``command`` says one line on stderr when the wait starts and one when Kafka answers;
    ``waiting(bootstrap, error, seconds)`` hears of every failed attempt. Any other failure (no
    bootstrap, a listener that is not Kafka) ends the wait as :func:`reachable_kafka` raises it.
    """
    started, delay, said = time.monotonic(), 1.0, False
    while True:
        try:
            bootstrap = reachable_kafka(explicit, settings, config=config)
        except Unavailable as exc:
            waiting(settings.kafka_bootstrap(explicit) or "", str(exc), time.monotonic() - started)
            if not said:
                print(f"{command}: {exc}; trying again until it answers", file=sys.stderr, flush=True)
                said = True
            sleep(delay)
            delay = min(2 * delay, RETRY_LIMIT_SECONDS)
            continue
        if said:
            print(f"{command}: Kafka at {bootstrap} answers, after {time.monotonic() - started:.0f} s",
                  file=sys.stderr, flush=True)
        return bootstrap


def add_verification(parser, records: str) -> None:
    """``--release-key HEX`` and ``--no-verify``, one or the other, for a command reading ``records``."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--release-key", metavar="HEX", help=f"the server's release public key, which {records} must "
                       f"be signed with: 64 hexadecimal characters (default: ${RELEASE_KEY_ENV}; `wevent keys` prints "
                       "it). Records that do not verify are dropped and counted")
    group.add_argument("--no-verify", action="store_true", help=f"take {records} without checking their signatures. "
                       "This gives up knowing who wrote them: anyone who can write to the broker (or to the file) can "
                       "add records of their own, and a forged copy of a slot that comes first is the one kept, "
                       "hiding the real one")


def release_key(args, command: str):
    """The public key ``args`` say to verify with, or None with ``--no-verify``; without either, a usage error."""
    if args.no_verify:
        return None
    key = args.settings.release_checker(args.release_key)
    if key is None:
        raise UsageError(f"no key to verify {command} with: pass --release-key HEX or set {RELEASE_KEY_ENV} "
                         "(`wevent keys` prints it), or --no-verify to accept records anyone could have written")
    return key


def add_release_display(group) -> None:
    """``--clip-negative`` and ``--round [DIGITS]``: post-processing of the release lines a command prints
    (:class:`~wevent.stream.runtime.subscription.ReleaseDisplay`)."""
    group.add_argument("--clip-negative", action="store_true", help="show negative bins as 0. Post-processing of a "
                       "differentially private release costs no privacy; a clipped release is no longer unbiased. "
                       "Logs and --json keep the releases as published")
    group.add_argument("--round", nargs="?", const=0, type=integer(0, 15), metavar="DIGITS", help="show every bin "
                       "rounded to DIGITS decimals (without DIGITS: whole numbers, for counts; a local stream's shares "
                       "of users read well with --round 3). Post-processing: costs no privacy")


def release_display(args, names, printed: str | None):
    """The display of release lines ``args`` ask for, with bin ``names`` (stream -> labels); ``printed`` names the
    option under which no line is printed (``--json``, ``--quiet``), which post-processing does not go with."""
    from ..stream.runtime.subscription import ReleaseDisplay

    for given, flag in ((args.clip_negative, "--clip-negative"), (args.round is not None, "--round")):
        if given and printed:
            raise UsageError(f"{flag} post-processes the release lines shown: it does not go with {printed}")
    return ReleaseDisplay(names, clip_negative=args.clip_negative, digits=args.round)
