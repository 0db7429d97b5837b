"""Every example in the package's docstrings runs as a test, imported under the installed name
``wevent`` (not by file path, which would load a second copy of each module)."""

from __future__ import annotations

import doctest
import importlib

import pytest

from tests.packages import module_name, source_files

# __main__ modules run commands when imported; the Faust app is exercised by the worker tests.
SKIPPED = ("__main__", "wevent.topologies")


def examples() -> list:
    found = []
    for path in source_files():
        name = module_name(path)
        if any(name.endswith(part) or name.startswith(part) for part in SKIPPED):
            continue
        module = importlib.import_module(name)
        found += [pytest.param(test, id=test.name) for test in doctest.DocTestFinder().find(module, name)
                  if test.examples]
    return found


@pytest.mark.parametrize("example", examples())
def test_docstring_example(example: doctest.DocTest) -> None:
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    result = runner.run(example, out=report.append)
    assert result.failed == 0, "".join(report)


def test_the_examples_are_found() -> None:
    """The collector sees the examples of the library and of the folders mapped into it."""
    names = {param.id for param in examples()}
    assert len(names) > 100 and "wevent.core.noise" in names
    assert any(name.startswith("wevent.producers.") for name in names)
