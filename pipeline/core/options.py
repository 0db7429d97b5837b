"""Mechanism options, declared once, on the mechanism class.

A mechanism's options are the keyword arguments of its constructor that tune it (not the hooks
``randomness``, ``devices`` and ``decision_override``, nor what defines the data: epsilon, the
window, the domain, the population, a local stream's oracle). Each class declares its own in its
body, ``OPTIONS``: a mapping of names to :class:`Option`, the kind of value with its range, what it
means and an example value. A class inherits the declarations of its bases, and may declare one
again in its own words. The default is the constructor's own, read from its signature; an option
whose default is None says in ``derived`` what that stands for.

:func:`options_of` collects them. Everything that lists options is made from that: the stream
configuration's schema and the Helm chart's values schema, the flags of ``wevent simulate``, and
README's table of options, which ``python -m wevent.core.options --markdown`` prints.

>>> from wevent.core.central import DSAT
>>> cutoff = options_of(DSAT)["cutoff"]
>>> cutoff.kind, cutoff.range, cutoff.default, cutoff.default_text
('integer', '>= 1 and <= 1048576', None, 'ceil(0.15 w)')
>>> list(options_of(DSAT))[:4]
['clamp_round', 'noise', 'budget_shift', 'force_first_publish']
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["Option", "options_of", "range_text", "markdown"]

KINDS = ("boolean", "integer", "number", "choice")


def range_text(low, high, open_low: bool = False, open_high: bool = False) -> str:
    """``> 0 and <= 100``: bounds in the words a config's author reads at once ("" without any)."""
    bounds = [f"{'>' if open_low else '>='} {_number(low)}"] if low is not None else []
    if high is not None:
        bounds.append(f"{'<' if open_high else '<='} {_number(high)}")
    return " and ".join(bounds)


def _number(value) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


@dataclass(frozen=True)
class Option:
    """One option of a mechanism: its kind of value and range, what it means, and an example.

    Made with :meth:`boolean`, :meth:`integer`, :meth:`number` or :meth:`choice`. ``nonprivate``
    marks an option that breaks the mechanism's guarantee (kept to reproduce published results:
    never in a stream). ``name`` and ``default`` are filled in by :func:`options_of`.
    """

    kind: str
    doc: str
    example: Any
    minimum: float | None = None
    maximum: float | None = None
    open_low: bool = False
    open_high: bool = False
    choices: tuple[str, ...] = ()
    derived: str | None = None
    nonprivate: bool = False
    name: str = ""
    default: Any = None

    @classmethod
    def boolean(cls, doc: str, *, example: bool = True, nonprivate: bool = False) -> Option:
        return cls("boolean", doc, example, nonprivate=nonprivate)

    @classmethod
    def integer(cls, doc: str, minimum: int, maximum: int, *, example: int, derived: str | None = None) -> Option:
        return cls("integer", doc, example, minimum, maximum, derived=derived)

    @classmethod
    def number(cls, doc: str, minimum: float | None = None, maximum: float | None = None, *, example: float,
               open_low: bool = False, open_high: bool = False, derived: str | None = None) -> Option:
        """A finite real number in its range (bounds inclusive unless ``open_low``/``open_high``)."""
        return cls("number", doc, example, minimum, maximum, open_low, open_high, derived=derived)

    @classmethod
    def choice(cls, doc: str, choices: tuple[str, ...], *, example: str) -> Option:
        return cls("choice", doc, example, choices=tuple(choices))

    @property
    def range(self) -> str:
        """The values it takes, in words."""
        if self.kind == "boolean":
            return "true or false"
        if self.kind == "choice":
            return f"one of {', '.join(self.choices)}"
        bounds = range_text(self.minimum, self.maximum, self.open_low, self.open_high)
        return bounds or "any finite number"

    @property
    def default_text(self) -> str:
        """The default in words: the constructor's value, or what a default of None stands for."""
        if self.default is None:
            return self.derived or "none"
        if isinstance(self.default, bool):
            return str(self.default).lower()
        return _number(self.default) if isinstance(self.default, (int, float)) else str(self.default)


def options_of(cls: type) -> dict[str, Option]:
    """Every option ``cls`` takes, its bases' first (a redeclaration replaces the base's in place),
    each with its name and the default of ``cls``'s constructor.

    Raises TypeError for a declaration the constructor has no keyword argument with a default for:
    a programming error, found when the class is registered.
    """
    declared: dict[str, Option] = {}
    for klass in reversed(cls.__mro__):
        declared.update(vars(klass).get("OPTIONS", {}))
    parameters = inspect.signature(cls).parameters
    collected = {}
    for name, option in declared.items():
        parameter = parameters.get(name)
        if parameter is None or parameter.kind is not parameter.KEYWORD_ONLY or parameter.default is parameter.empty:
            raise TypeError(f"{cls.__qualname__} declares option {name!r}, which its constructor does not take as a "
                            "keyword argument with a default")
        if option.kind not in KINDS:
            raise TypeError(f"{cls.__qualname__}.OPTIONS[{name!r}] is of kind {option.kind!r}, not one of {KINDS}")
        collected[name] = replace(option, name=name, default=parameter.default)
    return collected


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown() -> str:
    """README's table of every registered mechanism's options: one row per option and meaning,
    with the mechanisms that take it, by model."""
    from .registry import MODELS, mechanisms  # noqa: PLC0415 - the mechanisms import their options from here

    rows: dict[tuple, list[str]] = {}
    for name, cls in sorted(mechanisms().items()):
        for option in options_of(cls).values():
            key = (MODELS.index(cls.model), option.name, option.doc, option.range, option.default_text,
                   option.nonprivate)
            rows.setdefault(key, []).append(name)
    lines = ["| model | option | mechanisms | values | default | meaning |", "|---|---|---|---|---|---|"]
    for (model, name, doc, values, default, nonprivate), names in sorted(rows.items(), key=lambda row: row[0][:2]):
        meaning = f"NOT PRIVATE (never in a stream): {doc}" if nonprivate else doc
        lines.append(f"| {MODELS[model]} | `{name}` | {', '.join(names)} | {_cell(values)} | {_cell(default)} | "
                     f"{_cell(meaning)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] != ["--markdown"]:
        sys.exit("usage: python -m wevent.core.options --markdown")
    from . import options as declared  # the module the mechanisms declare with, not this __main__ copy

    sys.stdout.write(declared.markdown())
