"""The committed fixture files are exactly what the documented generator writes, and small."""

from __future__ import annotations

import doctest
import importlib

import pytest

from wevent.producers.fixtures import FIXTURES
from wevent.producers.fixtures.generate import main, samples


def test_committed_files_are_the_generators_output(generated):
    on_disk = {p.relative_to(FIXTURES).as_posix() for p in FIXTURES.rglob("*.txt")}
    assert on_disk == set(generated)
    for path, sample in generated.items():
        assert (FIXTURES / path).read_bytes() == sample.content(), path


def test_files_are_small_and_the_script_writes_them(tmp_path, capsys):
    assert max(len(sample.content()) for sample in samples(0)) < 300_000
    assert main(["--out", str(tmp_path), "--seed", "0"]) == 0 and "wrote 253 files" in capsys.readouterr().out
    written = sorted(tmp_path.rglob("*.txt"))
    assert [p.read_bytes() for p in written] == [(FIXTURES / p.relative_to(tmp_path)).read_bytes() for p in written]
    assert samples(1)[0].content() != samples(0)[0].content()


@pytest.mark.parametrize("module", ["textio", "preprocess", "profiles", "tdrive", "foursquare", "synthetic", "replay"])
def test_docstring_examples(module):
    """The producers package is not under pytest's doctest paths; run its examples here."""
    failures, attempted = doctest.testmod(importlib.import_module(f"producers.{module}"))
    assert failures == 0 and attempted > 0
