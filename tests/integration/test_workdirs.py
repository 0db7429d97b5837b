"""Run directories whose owner is gone are removed; nothing else is, a live run's least of all."""

from __future__ import annotations

import json
import os
import subprocess

from wevent.stream.runtime.workdir import OWNER_FILE, make_workdir, remove_stale_workdirs


def owned_by(path, **owner) -> None:
    path.mkdir()
    (path / "values.npz").write_bytes(b"true values")
    (path / OWNER_FILE).write_text(json.dumps(owner))


def test_only_directories_of_runs_that_are_gone_are_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    live = make_workdir("run")
    mine = json.loads((live / OWNER_FILE).read_text())
    assert mine["pid"] == os.getpid()

    ended = subprocess.Popen(["true"])
    ended.wait()  # reaped: its pid names no process now (or, reused, one that started later)
    owned_by(tmp_path / "wevent-run-ended", **mine | {"pid": ended.pid})
    owned_by(tmp_path / "wevent-run-reused", **mine | {"start": mine["start"] - 1})  # this pid, an earlier process
    owned_by(tmp_path / "wevent-soak-rebooted", **mine | {"boot": "another boot"})
    owned_by(tmp_path / "wevent-run-alive", **mine)
    (tmp_path / "wevent-run-making").mkdir()  # no owner recorded yet
    owned_by(tmp_path / "not-wevent", **mine | {"boot": "another boot"})
    (tmp_path / "wevent-run-link").symlink_to(tmp_path / "not-wevent")

    removed = remove_stale_workdirs()

    assert sorted(p.name for p in removed) == ["wevent-run-ended", "wevent-run-reused", "wevent-soak-rebooted"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [live.name, "wevent-run-alive", "wevent-run-making", "not-wevent", "wevent-run-link"])
    assert (tmp_path / "not-wevent" / "values.npz").exists()
