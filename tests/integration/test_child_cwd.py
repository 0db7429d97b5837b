"""A child of `wevent run` (worker, devices) imports nothing from the user's working directory,
as the `wevent` command itself does not: a file there named like a module it imports would run
in that module's place."""

from __future__ import annotations

import pytest

from wevent.stream.runtime.child_processes import ChildProcess

pytestmark = [pytest.mark.integration]


def test_a_module_in_the_working_directory_does_not_shadow_the_childs(tmp_path, monkeypatch):
    shadow = tmp_path / "argparse.py"
    shadow.write_text(f"open({str(tmp_path / 'shadowed')!r}, 'w').close()\nraise SystemExit(3)\n")
    monkeypatch.chdir(tmp_path)
    child = ChildProcess(["--version"], tmp_path / "child.log").start()
    assert child.process is not None and child.process.wait(60) == 0, (tmp_path / "child.log").read_text()
    assert child.name == "--version"
    assert not (tmp_path / "shadowed").exists()
    assert (tmp_path / "child.log").read_text().startswith("wevent ")
