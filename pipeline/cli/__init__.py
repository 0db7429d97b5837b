"""The ``wevent`` command: one module per subcommand, each with ``register(subparsers)``.

Every user-facing failure (bad parameter, unreadable input, unreachable broker) is one line on
stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ..core.state import StateError
from ..core.validation import ParameterError
from ._common import OneLineParser, UsageError

# Subcommand modules, in the order `wevent --help` lists them.
COMMANDS = ("run", "simulate", "replay", "worker", "devices", "keys", "subscribe", "audit", "query", "bench")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="wevent", description="w-event differentially private stream statistics")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=OneLineParser)
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except (ParameterError, StateError, UsageError) as exc:
        print(f"wevent {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"wevent {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
