"""The one registry of mechanisms: every class that names itself is found here by that name.

A subclass of :class:`~wevent.core.base.Mechanism` that sets ``name`` registers itself when its
module is imported; :func:`mechanisms` imports every model package first, so it always answers
with the whole catalogue. Each class says its model (``central``, ``local`` or ``personalized``)
in its ``model`` attribute, so nothing needs to test class hierarchies to find it.

>>> sorted(n for n, cls in mechanisms().items() if cls.model == "central")
['adapub', 'ba', 'ba-grouped', 'bd', 'bd-grouped', 'dsat', 'fast-w', 'pegasus', 'rescuedp', 'sample', 'uniform']
>>> mechanism_class("lpa").model
'local'
>>> mechanism_class("nope")
Traceback (most recent call last):
...
wevent.core.validation.ParameterError: unknown mechanism 'nope'; choose one of adapub, ba, ba-grouped, bd, bd-grouped, dsat, fast-w, lb-dsat, lb-rescuedp, lba, lbd, lbu, lp-dsat, lp-rescuedp, lpa, lpd, lpu, lsp, pba, pbd, pegasus, rescuedp, sample, uniform
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .validation import ParameterError

if TYPE_CHECKING:
    from .base import Mechanism

__all__ = ["MODELS", "REGISTRY", "register", "mechanisms", "mechanism_class"]

# The models a mechanism can belong to, each with its package (the decayed range indexes are
# not stream mechanisms: they index releases and have their own catalogue, decayed.INDEXES).
MODELS = ("central", "local", "personalized")

REGISTRY: dict[str, type[Mechanism]] = {}


def register(cls: type[Mechanism]) -> None:
    """Enter ``cls`` under its ``name``; a second class under the same name is a programming error."""
    if cls.model not in MODELS:
        raise TypeError(f"{cls.__qualname__}.model must be one of {', '.join(MODELS)}, got {cls.model!r}")
    other = REGISTRY.setdefault(cls.name, cls)
    if other is not cls:
        raise TypeError(f"mechanism name {cls.name!r} is taken by {other.__qualname__}")


def mechanisms() -> dict[str, type[Mechanism]]:
    """Every registered mechanism by name (importing the model packages registers them)."""
    for package in MODELS:
        importlib.import_module(f"{__package__}.{package}")
    return REGISTRY


def mechanism_class(name: str) -> type[Mechanism]:
    """The mechanism registered as ``name``, or a :class:`ParameterError` listing the names."""
    catalogue = mechanisms()
    if name not in catalogue:
        raise ParameterError(f"unknown mechanism {name!r}; choose one of {', '.join(sorted(catalogue))}")
    return catalogue[name]
