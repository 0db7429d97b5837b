"""``wevent replay``: dumps that ``wevent simulate`` reads, resuming, the replay loop and its sinks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from wevent.cli import main
from wevent.core.data import ABSENT, UserValues
from wevent.core.synthetic import synthetic
from wevent.producers.fixtures import TDRIVE, TSMC_NYC
from wevent.producers.foursquare import read_foursquare
from wevent.producers.replay import MatrixFeed, default_producer_id, replay
from wevent.producers.synthetic import synthetic_feed
from wevent.stream.wire.reports import check_producer_id


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_tdrive_dump_is_the_preprocessed_matrix_and_simulate_reads_it(tmp_path, capsys, tdrive_data):
    dump = tmp_path / "taxi.npz"
    code, out, _ = _run(capsys, "replay", "tdrive", TDRIVE, "--dump", dump, "--json")
    summary = json.loads(out)
    loaded = UserValues.load(dump)
    expected = tdrive_data.values
    assert code == 0 and np.array_equal(loaded.values, expected.values)
    assert (loaded.user_ids, loaded.labels, loaded.start, loaded.slot_seconds, loaded.domain_size) == \
        (expected.user_ids, expected.labels, expected.start, expected.slot_seconds, expected.domain_size)
    assert summary["users"] == expected.users and summary["slots"] == expected.slots
    assert summary["reports"] == expected.users * expected.slots  # carry-forward: everyone, every slot
    assert summary["skipped_lines"] == tdrive_data.skipped.total
    first_bad_time = tdrive_data.skipped.first["bad time"][0]
    assert summary["skipped"]["bad time"]["first"][0] == f"{first_bad_time[0]}:{first_bad_time[1]}"

    code, out, _ = _run(capsys, "simulate", "--input", dump, "--mechanism", "ba", "--window", "10", "--json")
    result = json.loads(out)
    assert code == 0 and result["slots"] == expected.slots and result["domain_size"] == 100


def test_resume_from_a_slot_dumps_the_tail(tmp_path, capsys, tdrive_data):
    dump = tmp_path / "tail.npz"
    code, out, _ = _run(capsys, "replay", "tdrive", TDRIVE, "--dump", dump, "--from-slot", 1000)
    tail = UserValues.load(dump)
    assert code == 0 and "replayed slots 1,000..1,439" in out and "skipped 147 malformed lines" in out
    assert np.array_equal(tail.values, tdrive_data.values.values[999:])
    assert tail.start == tdrive_data.values.start + 999 * 60


def test_foursquare_overrides_reach_the_reader(tmp_path, capsys):
    dump = tmp_path / "nyc.npz"
    code, out, _ = _run(capsys, "replay", "foursquare", TSMC_NYC, "--profile", "tsmc2014", "--slot-seconds", 3600,
                        "--absent", "none", "--dump", dump, "--json")
    expected = read_foursquare(TSMC_NYC, "tsmc2014", slot_seconds=3600.0, absent="none").values
    summary = json.loads(out)
    assert code == 0 and np.array_equal(UserValues.load(dump).values, expected.values)
    assert summary["reports"] == int((expected.values != ABSENT).sum()) < expected.users * expected.slots
    assert summary["settings"]["slot_seconds"] == 3600.0 and summary["domain_size"] == len(expected.labels)


def test_synthetic_dump_equals_the_core_generator(tmp_path, capsys):
    dump = tmp_path / "sin.npz"
    code, _, _ = _run(capsys, "replay", "synthetic", "--model", "sin", "--users", 300, "--slots", 40, "--seed", 4,
                      "--dump", dump)
    loaded = UserValues.load(dump)
    assert code == 0 and np.array_equal(loaded.values, synthetic("sin", 300, 40, seed=4).values())
    assert loaded.domain_size == 2 and loaded.slot_seconds == 60.0 and loaded.users == 300


@pytest.mark.parametrize("argv, message", [
    (["tdrive", TDRIVE], "give --dump FILE, or --config FILE"),
    (["tdrive", TDRIVE, "--config", "/nonexistent.toml"], "nonexistent.toml' was not found"),
    (["tdrive", TDRIVE, "--dump", "/nonexistent-dir/x.npz"], "no directory"),
    (["tdrive", TDRIVE, "--dump", "x.npz", "--from-slot", "0"], "--from-slot must be an integer >= 1"),
    (["tdrive", TDRIVE, "--grid", "0x3"], "a grid needs at least one row and one column"),
    (["tdrive", TDRIVE, "--box", "1,2,3"], "expected lon_min,lon_max,lat_min,lat_max"),
    (["tdrive", TDRIVE, "--max-slots", "0"], "expected an integer >= 1"),
    (["foursquare", TSMC_NYC, "--sample-rate", "1.5"], "expected a fraction in (0, 1]"),
    (["synthetic", "--model", "walk"], "invalid choice"),
    (["synthetic", "--producer-id", "gw 1"], "a producer id is 1 to 64 letters"),
    (["synthetic", "--producer-id", "x" * 65], "got 'xxx"),
    (["synthetic", "--producer-id", ""], "starting with a letter or digit, got ''"),
    (["synthetic", "--producer-id", "gw-1", "--dump", "x.npz"], "--producer-id names the producer"),
])
def test_bad_options_are_one_line_errors(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    try:
        code = main(["replay", *map(str, argv)])
    except SystemExit as exc:  # argparse refuses the value before the command runs
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1


def test_the_default_producer_id_is_the_feeds_whatever_the_slots_and_another_feeds_differs():
    feed = synthetic_feed("personalized", users=10, slots=5)
    same = default_producer_id(feed)
    assert same == default_producer_id(synthetic_feed("personalized", users=10, slots=3, start=600.0))
    assert same != default_producer_id(synthetic_feed("personalized", users=11, slots=5))
    assert same != default_producer_id(synthetic_feed("personalized", users=10, slots=5, model="sin"))
    assert check_producer_id(same) == same and same.startswith("replay-")


def test_replay_paces_slots_at_a_multiple_of_real_time():
    feed = synthetic_feed("personalized", users=10, slots=5, slot_seconds=60.0)
    now, sleeps, sent = [0.0], [], []

    def sleep(seconds):
        sleeps.append(seconds)
        now[0] += seconds

    class Recorder:
        def send_slot(self, slot, start, end, users, values):
            sent.append((slot, now[0], start, end, users.dtype, users.size))

        def close(self):
            sent.append("closed")

    stats = replay(feed, Recorder(), from_slot=2, speed=30.0, clock=lambda: now[0], sleep=sleep)
    # slot k closes (end - start of slot 2) / 30 seconds after the start: 2 s per 60 s slot
    assert [s[1] for s in sent[:-1]] == [2.0, 4.0, 6.0, 8.0] and sent[-1] == "closed"
    assert [s[2:4] for s in sent[:-1]] == [(60.0, 120.0), (120.0, 180.0), (180.0, 240.0), (240.0, 300.0)]
    assert all(s[4] == np.int64 and s[5] == 10 for s in sent[:-1])
    assert (stats.first_slot, stats.last_slot, stats.reports, stats.slots) == (2, 5, 40, 4)


def test_a_failing_sink_is_not_closed():
    data = UserValues(np.zeros((3, 2), dtype=np.int8), domain_size=1, slot_seconds=1.0)
    events = []

    class Failing:
        def send_slot(self, slot, *rest):
            events.append(slot)
            if slot == 2:
                raise RuntimeError("broker down")

        def close(self):
            events.append("closed")

    with pytest.raises(RuntimeError):
        replay(MatrixFeed(data), Failing())
    assert events == [1, 2]
