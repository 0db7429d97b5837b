"""How every ``wevent`` command explains itself, and how it reads its command line.

Every command and sub-command is made with :func:`add_command`: a one-line summary for its
parent's list, a description of what it does (paragraphs, filled to the terminal's width), its
options in named argument groups, and examples that run as written, shown after the options under
"Examples:". A usage error is one line and exit status 2 (:class:`OneLineParser`).

This module imports only the standard library: ``wevent --help`` lists the commands without
importing any of them (:mod:`wevent.cli`).

>>> import argparse
>>> sub = OneLineParser(prog="wevent").add_subparsers()
>>> p = add_command(sub, "hello", summary="say hello", description="Say hello to everyone.",
...                 examples=[("greet", "wevent hello")])
>>> print(p.epilog)
Examples:
  # greet
  wevent hello
"""

from __future__ import annotations

import argparse
import re
import shutil
import textwrap
from typing import Sequence

__all__ = ["OneLineParser", "add_command", "examples_text", "EXAMPLES_HEADING"]

EXAMPLES_HEADING = "Examples:"


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit status 2), not the usage block.

    An option's type check fails with "must be ..."; the line then reads "--slots must be ...".
    """

    def error(self, message: str):  # noqa: D401 - argparse API
        named = re.match(r"argument ([^/:\s]+)(?:/\S+)?: (must .*)", message, flags=re.DOTALL)
        if named:
            message = f"{named[1]} {named[2]}"
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def examples_text(examples: Sequence[tuple[str, str]]) -> str:
    """The epilog of a command: each example a comment saying what it shows, then its command line."""
    lines = [EXAMPLES_HEADING]
    for what, command in examples:
        lines += [f"  # {what}", f"  {command}"]
    return "\n".join(lines)


def _filled(text: str) -> str:
    """``text``'s paragraphs (separated by blank lines) filled to the terminal's width, as argparse
    fills help; the description is shown raw so that the examples keep their lines."""
    width = max(40, min(shutil.get_terminal_size().columns, 100) - 2)
    return "\n\n".join(textwrap.fill(" ".join(paragraph.split()), width)
                       for paragraph in text.split("\n\n") if paragraph.strip())


def add_command(subparsers, name: str, *, summary: str, description: str,
                examples: Sequence[tuple[str, str]], **kwargs) -> OneLineParser:
    """A (sub-)command of ``subparsers``: ``summary`` is its line in the parent's list,
    ``description`` says what it does (one or two sentences, and paragraphs after a blank line for
    the details), ``examples`` are (what it shows, command line) pairs that run as written."""
    if not description.strip() or not examples:
        raise TypeError(f"command {name!r} needs a description and examples")
    return subparsers.add_parser(name, help=summary, description=_filled(description),
                                 epilog=examples_text(examples), formatter_class=argparse.RawDescriptionHelpFormatter,
                                 **kwargs)
