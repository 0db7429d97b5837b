"""Every mechanism declares its options once, on its class, and the declarations say what the class does.

The stream's schema, the Helm chart's schema, the flags of `wevent simulate` and README's table are
made from these declarations (tests/stream/test_config.py, tests/cli/test_simulate_options.py), so
here they are checked against the classes themselves: the constructor takes every declared option
with the declared default, every tuning keyword is declared, the example is a value in the declared
range that the constructor accepts, and the class docstring documents each with its meaning.
"""

import inspect
import math
import re
from pathlib import Path

import pytest

from wevent.core.local import Devices
from wevent.core.options import Option, markdown, options_of
from wevent.core.registry import mechanisms

MECHANISMS = sorted(mechanisms().items())
# Keywords that are not options: hooks, and what a stream defines outside its options (a local
# stream's oracle is a field of its own).
# Keywords that are not tuning options: the stream layer and simulation set them (`absent`: every asked
# user of a stream answers, presence through the oracle), never a user.
NOT_OPTIONS = {"randomness", "devices", "decision_override", "oracle", "absent"}


def documented(cls) -> dict[str, str]:
    """The Parameters section of the class docstring: name -> its text, normalised (no markup, one line)."""
    section = cls.__doc__.split("Parameters\n    ----------", 1)[1].split("\n\n", 1)[0]
    entries = {}
    for entry in re.split(r"\n(?=    \w[\w, ]* :)", section):
        head, _, body = entry.strip().partition("\n")
        for name in head.partition(" :")[0].split(","):
            entries[name.strip()] = normal(body)
    return entries


def normal(text: str) -> str:
    return " ".join(text.replace("``", "").split()).lower()


def in_range(option: Option, value) -> bool:
    if option.kind == "boolean":
        return isinstance(value, bool)
    if option.kind == "choice":
        return value in option.choices
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return False
    if option.kind == "integer" and not isinstance(value, int):
        return False
    low, high = option.minimum, option.maximum
    return ((low is None or value > low or (value == low and not option.open_low))
            and (high is None or value < high or (value == high and not option.open_high)))


def build(name, cls, **options):
    if cls.model == "local":
        oracle = {"oracle": "hm"} if "bound" in options else {}
        return cls(1.0, 10, 1 if oracle else 4, 400, devices=Devices.from_seed(0), **oracle, **options)
    if cls.model == "personalized":
        return cls([10, 20], [1.0, 0.5], [30, 40], 4, **options)
    return cls(1.0, 10, 4, **options)


@pytest.mark.parametrize("name, cls", MECHANISMS)
def test_every_tuning_keyword_is_declared_with_the_constructors_default(name, cls):
    declared = options_of(cls)
    parameters = inspect.signature(cls).parameters
    keywords = {k for k, p in parameters.items() if p.kind is p.KEYWORD_ONLY}
    assert keywords - NOT_OPTIONS == set(declared), name
    assert all(option.default == parameters[option.name].default for option in declared.values()), name
    # a default of None stands for something the declaration says
    assert all(option.derived for option in declared.values() if option.default is None), name


@pytest.mark.parametrize("name, cls", MECHANISMS)
def test_the_docstring_documents_every_option_with_its_meaning(name, cls):
    entries = documented(cls)
    for option in options_of(cls).values():
        assert normal(option.doc) in entries.get(option.name, ""), (name, option.name, entries.get(option.name))


@pytest.mark.parametrize("name, cls", MECHANISMS)
def test_every_example_is_in_range_differs_from_the_default_and_is_accepted(name, cls):
    for option in options_of(cls).values():
        assert in_range(option, option.example) and option.example != option.default, (name, option.name)
        if option.default is not None and option.kind != "choice":
            assert in_range(option, option.default), (name, option.name)  # the default is one of its values
        mechanism = build(name, cls, **{option.name: option.example})
        assert mechanism.params().get(option.name, option.example) == option.example, (name, option.name)


def test_an_option_is_a_flag_everywhere_or_nowhere():
    """`wevent simulate` has one flag per option name: a boolean option is a boolean for every mechanism."""
    kinds: dict[str, set[bool]] = {}
    for _, cls in MECHANISMS:
        for option in options_of(cls).values():
            kinds.setdefault(option.name, set()).add(option.kind == "boolean")
    assert all(len(k) == 1 for k in kinds.values()), {n: k for n, k in kinds.items() if len(k) > 1}


def test_a_declaration_the_constructor_does_not_take_fails_when_the_class_is_made():
    from wevent.core.central import Uniform

    with pytest.raises(TypeError, match="declares option 'share', which its constructor does not take"):
        type("Broken", (Uniform,), {"OPTIONS": {"share": Option.number("a share", 0, 1, example=0.5)}, "name": "broken"})
    assert "broken" not in mechanisms()


def test_the_markdown_table_has_a_row_per_option_and_meaning():
    table = markdown().splitlines()
    assert table[0] == "| model | option | mechanisms | values | default | meaning |"
    names = {option.name for _, cls in MECHANISMS for option in options_of(cls).values()}
    assert names == {line.split("`")[1] for line in table[2:]}
    assert any("NOT PRIVATE" in line and "`artifact_compat_nonprivate`" in line for line in table)
    assert "| central | `cutoff` | dsat | >= 1 and <= 1048576 | ceil(0.15 w) |" in markdown()



def test_readmes_table_of_options_is_the_declarations():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    table = readme.split("<!-- options table: python -m wevent.core.options --markdown -->\n")[1]
    assert table.split("<!-- end of the options table -->")[0] == markdown(), (
        "README's table of options differs from the mechanisms' declarations: paste the output of "
        "`python -m wevent.core.options --markdown` between its markers")
