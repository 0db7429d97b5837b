"""Every mechanism by name: importing the model packages registers their classes.

>>> sorted(n for n in mechanisms() if n in ("ba", "bd", "sample", "uniform"))
['ba', 'bd', 'sample', 'uniform']
"""

from __future__ import annotations

import importlib

from .base import REGISTRY, Mechanism

MODEL_PACKAGES = ("central", "local", "personalized")


def mechanisms() -> dict[str, type[Mechanism]]:
    for package in MODEL_PACKAGES:
        importlib.import_module(f"{__package__}.{package}")
    return REGISTRY
