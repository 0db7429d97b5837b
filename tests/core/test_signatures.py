"""Every registered mechanism states its parameters: in its signature and in its docstring."""

import inspect
import re

import pytest

from wevent.core.base import restore
from wevent.core.local import Devices
from wevent.core.packing import from_json, to_json
from wevent.core.randomness import DerivedRandomness, SecretKey
from wevent.core.registry import mechanisms
from wevent.core.validation import ParameterError

MECHANISMS = sorted(mechanisms().items())
SECTIONS = ("Parameters\n    ----------", "Spend\n    -----", "Examples\n    --------", "References\n    ----------")


def documented(cls) -> set[str]:
    """The names the Parameters section lists (``a, b, c : type`` lines document three)."""
    section = cls.__doc__.split("Parameters\n    ----------", 1)[1].split("\n\n", 1)[0]
    names = re.findall(r"^    (\w[\w, ]*) :", section, flags=re.MULTILINE)
    return {name.strip() for line in names for name in line.split(",")}


@pytest.mark.parametrize("name, cls", MECHANISMS)
def test_the_signature_lists_every_parameter_and_the_docstring_documents_it(name, cls):
    parameters = inspect.signature(cls).parameters
    assert not [p for p in parameters.values() if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL)], name
    assert "__doc__" in cls.__dict__ and all(section in cls.__doc__ for section in SECTIONS), name
    assert documented(cls) == set(parameters), name


@pytest.mark.parametrize("name, cls", MECHANISMS)
def test_a_misspelled_option_is_refused_by_the_constructor_called(name, cls):
    # The constructor whose signature the class shows refuses it, not one further down a chain.
    qualname = re.escape(cls.__init__.__qualname__)
    with pytest.raises(TypeError, match=rf"^{qualname}\(\) got an unexpected keyword argument 'bta'"):
        cls(*([1.0] * 4), bta=0.3)


def test_a_state_with_an_unknown_parameter_is_one_clear_error():
    m = mechanisms()["lpa"](1.0, 3, 2, 60, devices=Devices.from_seed(0))
    state = from_json(m.to_json())
    state["params"]["bta"] = 0.3
    with pytest.raises(ParameterError, match="state of lpa has unknown parameter"):
        restore(to_json(state), DerivedRandomness(SecretKey.from_seed(0)))
