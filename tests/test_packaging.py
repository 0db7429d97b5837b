"""The distribution installs one import name, ``wevent``, with its data and its type marker."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from tests.packages import SETUPTOOLS, build_wheel, package_folders


def test_pyproject_lists_every_package_of_the_three_folders():
    assert sorted(SETUPTOOLS["packages"]) == sorted(package_folders())


def test_a_clean_install_gives_import_wevent_and_no_generic_top_level_name(tmp_path):
    wheel = build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = archive.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert {name.split("/")[0] for name in names} == {"wevent", wheel.name.split("-py3")[0] + ".dist-info"}
    assert "wevent = wevent.cli:main" in entry_points
    for data in ("wevent/py.typed", "wevent/stream/wire/schemas/release.schema.json",
                 "wevent/producers/fixtures/tdrive/taxi_log_2008_by_id/4978.txt",
                 "wevent/producers/fixtures/foursquare/dataset_TIST2015_POIs.txt", "wevent/stream/wire/schemas/WRB1.md"):
        assert data in names

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                    "--disable-pip-version-check", str(wheel)], check=True, capture_output=True, timeout=300)
    probe = ("import importlib.util, wevent, wevent.producers.fixtures as f; "
             "print(wevent.__version__, f.TDRIVE.is_dir(), "
             "[n for n in ('pipeline', 'producers', 'topologies') if importlib.util.find_spec(n)])")
    done = subprocess.run([str(venv / "bin" / "python"), "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.split() == [__import__("wevent").__version__, "True", "[]"], done.stderr
