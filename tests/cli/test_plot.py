"""`wevent plot`: a run's picture from its logs, the truth from a dump or a truth log, bad input refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wevent.cli import main
from wevent.core.data import ABSENT, UserValues
from wevent.reproduce.run_picture import read_run
from wevent.reproduce.style import DPI

ROOT = Path(__file__).resolve().parents[2]
SLOTS = 20
START, SLOT_SECONDS = 1_200_000_000.0, 300.0


def picture(path: Path) -> np.ndarray:
    from matplotlib.image import imread

    return imread(path)


def assert_a_picture(path: Path) -> tuple[int, int]:
    """A PNG 10 inches wide, over 5 inches tall (four panels at least), not one flat colour; its size."""
    image = picture(path)
    height, width = image.shape[:2]
    assert width == 10 * DPI and height > 5 * DPI
    assert image[..., :3].std() > 0.05
    return height, width


def refused(argv: list[str], capsys) -> str:
    """``wevent ARGV`` in this process: exit status 2 and one line on stderr, which is returned."""
    status = main(argv)
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "Traceback" not in err, (argv, status, err)
    return err


@pytest.fixture(scope="module")
def dump(tmp_path_factory) -> Path:
    """A feed of 40 users over 4 cells and 30 five-minute slots, with a calendar."""
    path = tmp_path_factory.mktemp("feed") / "feed.npz"
    values = np.random.default_rng(7).integers(-1, 4, size=(30, 40))  # -1: a user without a value that slot
    UserValues(values, 4, labels=["north", "east", "south", "west"], slot_seconds=SLOT_SECONDS, start=START,
               name="feed").save(path)
    return path


@pytest.fixture(scope="module")
def simulated(dump, tmp_path_factory) -> dict[str, Path]:
    """`wevent simulate --releases` over the dump, a central and a local mechanism: real release logs."""
    root = tmp_path_factory.mktemp("simulated")
    logs = {}
    for mechanism in ("ba", "lpa"):
        logs[mechanism] = root / f"{mechanism}.jsonl"
        assert main(["simulate", "--input", str(dump), "-m", mechanism, "--stream", "feed", "--no-progress",
                     "--releases", str(logs[mechanism])]) == 0
    return logs


# --- the truth --------------------------------------------------------------------------------------

def test_a_dumps_truth_is_its_count_per_slot(dump, simulated):
    """Central releases count users: slot t's truth is the dump's histogram of slot t (releases of a
    simulation have no clock, so slot t is the dump's slot t)."""
    run = read_run(str(simulated["ba"]), truth=str(dump))
    counts = UserValues.load(dump).counts()
    assert np.array_equal(run.truth, counts[run.slots - 1])
    assert run.labels == ["north", "east", "south", "west"]


def test_a_local_streams_truth_is_the_share_of_the_users(dump, simulated):
    """Local releases estimate the share of all the users in each bin; the users without a value
    answer in the devices' absent category, which no release holds."""
    run = read_run(str(simulated["lpa"]), truth=str(dump))
    values = UserValues.load(dump)
    assert (values.values == ABSENT).any()
    assert run.shares and np.allclose(run.truth, values.counts()[run.slots - 1] / values.users)
    assert run.labels == ["north", "east", "south", "west"]


def test_a_simulated_run_is_drawn_a_panel_a_bin(simulated, dump, tmp_path, capsys):
    heights = []
    for bins in (["--top", "1"], ["--bin", "0", "--bin", "3"]):
        out = tmp_path / "ba.png"
        assert main(["plot", str(simulated["ba"]), "--truth", str(dump), *bins, "-o", str(out)]) == 0
        assert f"{out}: 30 releases of stream 'feed' (ba)" in capsys.readouterr().err
        heights.append(assert_a_picture(out)[0])
    assert heights[1] > heights[0]


# --- a real run ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def run_logs(dump, tmp_path_factory) -> dict[str, Path]:
    """`wevent run` over the dump: its release, audit and truth logs."""
    root = tmp_path_factory.mktemp("run")
    logs = {name: root / f"{name}.jsonl" for name in ("releases", "audit", "truth")}
    environment = {k: v for k, v in os.environ.items() if not k.startswith("WEVENT_")} | {"TMPDIR": str(root)}
    run = subprocess.run([sys.executable, "-m", "wevent.cli", "run", "--feed", str(dump), "--slots", str(SLOTS),
                          "--seed", "3", "--speed", "0", "--quiet", "--release-log", str(logs["releases"]),
                          "--audit-log", str(logs["audit"]), "--truth-log", str(logs["truth"])],
                         capture_output=True, text=True, timeout=300, cwd=root, env=environment)
    assert run.returncode == 0, run.stderr[-3000:]
    return logs


@pytest.mark.slow
def test_a_run_is_drawn_with_its_audit_and_truth(run_logs, tmp_path, capsys):
    out = tmp_path / "run.png"
    assert main(["plot", str(run_logs["releases"]), "--audit-log", str(run_logs["audit"]), "--truth",
                 str(run_logs["truth"]), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"{SLOTS} releases of stream 'feed' (ba); audit passes: {SLOTS} slots (1..{SLOTS})" in err
    assert_a_picture(out)


@pytest.mark.slow
def test_the_truth_log_and_the_dump_give_the_same_truth(run_logs, dump):
    from_log = read_run(str(run_logs["releases"]), truth=str(run_logs["truth"])).truth
    from_dump = read_run(str(run_logs["releases"]), truth=str(dump)).truth
    assert from_log.shape == (SLOTS, 4) and np.array_equal(from_log, from_dump)


@pytest.mark.slow
def test_the_dumps_slots_follow_the_releases_clock(run_logs, dump, tmp_path):
    """A stream that began 5 slots before the feed numbers the feed's slot t as t + 5: the clock says so."""
    shifted = tmp_path / "shifted.jsonl"
    records = [json.loads(line) for line in run_logs["releases"].read_text().splitlines()]
    shifted.write_text("".join(json.dumps({**r, "slot": r["slot"] + 5}) + "\n" for r in records))
    assert np.array_equal(read_run(str(shifted), truth=str(dump)).truth,
                          read_run(str(run_logs["releases"]), truth=str(dump)).truth)


# --- bad input ---------------------------------------------------------------------------------------

def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write(path: Path, records: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


@pytest.fixture
def bad(simulated, tmp_path) -> dict[str, str]:
    """Release logs, audit logs and truths that are wrong, each in its own way."""
    releases = _lines(simulated["ba"])
    audit = {"record": "audit", "stream": "other", "slot": 1, "mechanism": "ba", "epsilon": 1.0, "window": 20,
             "eps1": 0.025, "eps2": 0.0}
    UserValues(np.zeros((3, 5), dtype=np.int64), 7).save(tmp_path / "other.npz")
    (tmp_path / "binary").write_bytes(b"\x00\xff\xfe")
    (tmp_path / "empty").write_text("\n\n")
    (tmp_path / "text").write_text("slot,value\n1,2\n")
    return {
        "empty": str(tmp_path / "empty"),
        "binary": str(tmp_path / "binary"),
        "text": str(tmp_path / "text"),
        "audit-as-releases": _write(tmp_path / "a.jsonl", [audit]),
        "missing-field": _write(tmp_path / "m.jsonl", [{k: v for k, v in releases[0].items() if k != "strategy"}]),
        "bad-strategy": _write(tmp_path / "s.jsonl", [{**releases[0], "strategy": "guess"}]),
        "nan-release": _write(tmp_path / "n.jsonl", [{**releases[0], "release": [float("nan")] * 4}]),
        "two-streams": _write(tmp_path / "two.jsonl", [releases[0], {**releases[1], "stream": "second"}]),
        "conflicting": _write(tmp_path / "c.jsonl", [releases[0], {**releases[0], "release": [1.0, 2.0, 3.0, 4.0]}]),
        "audit-of-another-stream": _write(tmp_path / "other-audit.jsonl", [audit]),
        "truth-of-another-stream": _write(tmp_path / "t.jsonl", [{"record": "truth", "stream": "other", "slot": 1,
                                                                 "truth": [1, 2, 3, 4]}]),
        "dump-of-other-bins": str(tmp_path / "other.npz"),
    }


BAD = [
    (["{empty}"], "holds no releases"),
    (["{binary}"], "is not a text file of JSON lines"),
    (["{text}"], "line 1: not JSON"),
    (["{audit-as-releases}"], "line 1: a line of the audit log, not a release"),
    (["{missing-field}"], "line 1: not a release record"),
    (["{bad-strategy}"], "its strategy 'guess' is unknown"),
    (["{nan-release}"], "its release is not a list of numbers"),
    (["{two-streams}"], "releases of 2 streams (feed, second): choose one with --stream"),
    (["{two-streams}", "--stream", "third"], "holds no releases of stream 'third'"),
    (["{conflicting}"], "two different releases of stream 'feed' for slot 1"),
    (["{ba}", "--audit-log", "{ba}"], "line 1: not an audit record"),
    (["{ba}", "--audit-log", "{empty}"], "holds no audit records"),
    (["{ba}", "--audit-log", "{audit-of-another-stream}"], "is the audit of stream 'other', not of 'feed'"),
    (["{ba}", "--truth", "{truth-of-another-stream}"], "the truth of stream 'other', not of 'feed'"),
    (["{ba}", "--truth", "{ba}"], "neither a dump nor a truth log"),
    (["{ba}", "--truth", "{empty}"], "holds the truth of none of the released slots"),
    (["{ba}", "--truth", "{dump-of-other-bins}"], "holds values in 7 bins, the releases have 4"),
    (["{ba}", "--bin", "4"], "--bin 4: the releases have bins 0..3"),
    (["{ba}", "--top", "13"], "--top must be an integer >= 1 and <= 12"),
    (["{ba}", "-o", "{ba}"], "would overwrite the input"),
]


@pytest.mark.parametrize("argv, message", BAD, ids=[" ".join(a) + f" ({m})" for a, m in BAD])
def test_bad_input_is_one_line_and_status_2(bad, simulated, argv, message, capsys):
    files = {**bad, "ba": str(simulated["ba"])}
    err = refused(["plot", *(a.format(**files) if a.startswith("{") else a for a in argv)], capsys)
    assert err.startswith("wevent plot: error: ") and message in err, err


JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                    max_leaves=8)


@pytest.mark.timeout(300)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_release_with_any_field_changed_is_drawn_or_refused_in_one_line(simulated, tmp_path, data):
    """Whatever one field of one release holds, the picture is drawn or the log refused in one line."""
    import contextlib
    import io

    records = _lines(simulated["ba"])[:6]
    row = data.draw(st.integers(0, len(records) - 1), label="release")
    field = data.draw(st.sampled_from(sorted(records[row])), label="field")
    records[row] = {**records[row], field: data.draw(JSON, label="value")}
    log = _write(tmp_path / "changed.jsonl", records)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = main(["plot", log, "-o", str(tmp_path / "changed.png")])
    assert status in (0, 2) and err.getvalue().count("\n") == 1 and "Traceback" not in err.getvalue(), err.getvalue()


def test_without_matplotlib_one_line_naming_the_extra(simulated, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    err = refused(["plot", str(simulated["ba"])], capsys)
    assert "in the wevent checkout, pip install -e '.[reproduce]'" in err


def test_the_help_says_what_it_draws_with_examples():
    proc = subprocess.run([sys.executable, "-m", "wevent.cli", "plot", "--help"], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert proc.returncode == 0
    assert "the --top largest by their mean truth" in " ".join(proc.stdout.split())
    examples = proc.stdout.split("Examples:")[1].splitlines()
    assert sum("wevent plot " in line and not line.lstrip().startswith("#") for line in examples) == 3
