"""The one registry: every mechanism is found by name and says its model."""

import pytest

from wevent.core.base import Mechanism
from wevent.core.registry import MODELS, REGISTRY, mechanism_class, mechanisms
from wevent.core.validation import ParameterError


def test_every_mechanism_says_its_model_and_lives_in_that_models_package():
    catalogue = mechanisms()
    assert catalogue is REGISTRY and len(catalogue) == 24
    for name, cls in catalogue.items():
        assert issubclass(cls, Mechanism) and cls.name == name
        assert cls.model in MODELS, name
        assert cls.__module__.startswith(f"wevent.core.{cls.model}."), (name, cls.__module__)


def test_an_unknown_name_is_one_clear_error():
    with pytest.raises(ParameterError, match="unknown mechanism 'nope'; choose one of adapub, ba, ba-grouped, bd"):
        mechanism_class("nope")


def test_a_second_class_under_a_taken_name_is_refused():
    central = mechanism_class("ba")
    with pytest.raises(TypeError, match="'ba' is taken"):
        type("Impostor", (central,), {"name": "ba"})
    assert mechanism_class("ba") is central
