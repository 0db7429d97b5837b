"""The mechanisms' options as flags of ``wevent simulate``, made from their declarations.

Every option a mechanism of a family declares (:mod:`wevent.core.options`) is one flag, named after
it (``budget_shift`` is ``--budget-shift``; a boolean also has its ``--no-`` form), in the group of
the first family whose mechanisms take it; its help says which mechanisms take it, what it means,
its range and its default. A flag left out leaves every mechanism at its own default; a flag given
applies to every mechanism run that takes it (:func:`given_options`) and to no other; a flag that no
mechanism run takes is refused (:func:`settle_options`), as is a family's own setting (``--oracle``)
when no mechanism of that family runs. An option
that mechanisms take with different ranges (``threshold``) is checked, while parsing, to fit one of
them, and then against the range of each mechanism run.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable, Iterable

from ..core.base import Mechanism
from ..core.options import Option, options_of
from ..core.registry import mechanisms
from ._common import UsageError, integer, real

__all__ = ["add_option_flags", "given_options", "settle_options", "flag"]


def flag(name: str) -> str:
    """The command line flag of option ``name``."""
    return "--" + name.replace("_", "-")


def _one_of(choices: tuple[str, ...]) -> Callable[[str], str]:
    def read(text: str) -> str:
        if text not in choices:
            raise argparse.ArgumentTypeError(f"must be one of {', '.join(choices)}, got {text!r}")
        return text

    return read


def _reader(option: Option) -> Callable[[str], Any]:
    """What turns a flag's text into ``option``'s value, or fails with "must be ..., got ..."."""
    if option.kind == "integer":
        minimum, maximum = option.minimum, option.maximum
        assert (minimum is None or isinstance(minimum, int)) and (maximum is None or isinstance(maximum, int)), \
            "Option.integer has integer bounds"
        return integer(minimum, maximum)
    if option.kind == "number":
        low, high = option.minimum, option.maximum
        return real(None if option.open_low else low, None if option.open_high else high,
                    above=low if option.open_low else None, below=high if option.open_high else None)
    return _one_of(option.choices)


def _must_be(reader: Callable[[str], Any], text: str) -> str | None:
    """What ``reader`` says ``text`` must be ("an integer >= 1, ..."), or None if it reads it."""
    try:
        reader(text)
    except argparse.ArgumentTypeError as exc:
        return str(exc).removeprefix("must be ").rpartition(", got ")[0]
    return None


def _text_reader(declared: dict[str, Option]) -> Callable[[str], str]:
    """The flag's text, if some mechanism taking it reads it (each reads it again when it runs)."""
    kinds: dict[Option, list[str]] = {}
    for mechanism, option in declared.items():
        kinds.setdefault(_kind(option), []).append(mechanism)

    def read(text: str) -> str:
        refusals = [(_must_be(_reader(kind), text), names) for kind, names in kinds.items()]
        if all(must for must, _ in refusals):
            if len(refusals) == 1:
                raise argparse.ArgumentTypeError(f"must be {refusals[0][0]}, got {text.strip()}")
            raise argparse.ArgumentTypeError("must be " + " or ".join(f"{must} (for {', '.join(names)})"
                                                                       for must, names in refusals)
                                             + f", got {text.strip()}")
        return text

    read.__name__ = "value"
    return read


def _kind(option: Option) -> Option:
    """The declaration without what does not change the values it takes (its name, meaning, default)."""
    return Option(option.kind, "", None, option.minimum, option.maximum, option.open_low, option.open_high,
                  option.choices)


def _help(declared: dict[str, Option]) -> str:
    """Which mechanisms take an option, what it means to them, its range and its default."""
    meanings: dict[tuple[str, str], dict[str, list[str]]] = {}  # (meaning, range) -> default -> mechanisms
    for mechanism, option in declared.items():
        values = "" if option.kind == "boolean" else f"{option.range}; "
        default = {"false": "off", "true": "on"}.get(option.default_text, option.default_text)
        warning = "NOT PRIVATE: " if option.nonprivate else ""
        meanings.setdefault((f"{warning}{option.doc}", values), {}).setdefault(default, []).append(mechanism)
    parts = []
    for (doc, values), defaults in meanings.items():
        names = [name for mechanisms_ in defaults.values() for name in mechanisms_]
        default = next(iter(defaults)) if len(defaults) == 1 else ", ".join(
            f"{value} for {', '.join(mechanisms_)}" for value, mechanisms_ in defaults.items())
        parts.append(f"{', '.join(names)}: {doc} ({values}default: {default})")
    return "; ".join(parts).replace("%", "%%")


def add_option_flags(parser: argparse.ArgumentParser, families: Iterable) -> None:
    """A group per family (its own flags, :meth:`add_arguments`, then the options its mechanisms take
    that no earlier family's do), each option one flag."""
    by_option: dict[str, dict[str, Option]] = {}
    home: dict[str, Any] = {}  # option -> the argument group of its flag
    settings: dict[str, tuple[str, str, Any]] = {}  # a family's own setting: dest -> (family, flag, default)
    for family in families:
        group = parser.add_argument_group(f"{family.name} model options")
        before = len(parser._actions)
        family.add_arguments(group)
        for action in parser._actions[before:]:  # left out (None) or given: settle_options tells them apart
            settings[action.dest] = (family.name, action.option_strings[0], action.default)
            action.default = None
        shared = []
        for mechanism in family.mechanisms:
            cls = mechanisms().get(mechanism)
            for name, option in (options_of(cls) if cls is not None else {}).items():
                if name not in by_option:
                    home[name] = group
                elif home[name] is not group and flag(name) not in shared:
                    shared.append(flag(name))
                by_option.setdefault(name, {})[mechanism] = option
        if shared:
            also = f"Options above that mechanisms of this model take too: {', '.join(shared)}."
            group.description = f"{group.description} {also}" if group.description else also
    for name, declared in by_option.items():
        kinds = {option.kind == "boolean" for option in declared.values()}
        if len(kinds) > 1:
            raise TypeError(f"option {name!r} is a boolean for some mechanisms and not for others: "
                            f"{', '.join(declared)}")
        if kinds == {True}:
            home[name].add_argument(flag(name), action=argparse.BooleanOptionalAction, default=None,
                                    help=_help(declared))
        else:
            home[name].add_argument(flag(name), type=_text_reader(declared), default=None, metavar=name.upper(),
                                    help=_help(declared))
    parser.set_defaults(family_settings=settings, option_takers={name: tuple(declared)
                                                                 for name, declared in by_option.items()})


def settle_options(args, runs: list[tuple[str, str]]) -> None:
    """Refuse what the (family, mechanism) ``runs`` would ignore: a mechanism option none of them
    declares, a family's setting when none of them is of that family; then give every family
    setting left out its default."""
    names = ", ".join(mechanism for _, mechanism in runs)
    for name, takers in args.option_takers.items():
        if getattr(args, name) is not None and not any(mechanism in takers for _, mechanism in runs):
            raise UsageError(f"{flag(name)} applies to {', '.join(takers)}, not to {names}")
    families = {family for family, _ in runs}
    for dest, (family, option, default) in args.family_settings.items():
        if getattr(args, dest) is None:
            setattr(args, dest, default)
        elif family not in families:
            raise UsageError(f"{option} is a setting of the {family} model's mechanisms, not of {names}")


def given_options(args, cls: type[Mechanism]) -> dict[str, Any]:
    """The options given on the command line that ``cls`` takes, read as it declares them."""
    given = {}
    for name, option in options_of(cls).items():
        value = getattr(args, name, None)
        if value is None:
            continue
        if option.kind != "boolean":
            try:
                value = _reader(option)(value)
            except argparse.ArgumentTypeError as exc:
                must, _, got = str(exc).rpartition(", got ")
                raise UsageError(f"{flag(name)} {must} for {cls.name}, got {got}") from None
        given[name] = value
    return given
