"""Every command explains itself; options that would be ignored are refused; release lines explain
themselves. All in this process, through the CLI's main function."""

import argparse
import json

import pytest

from wevent.cli import COMMANDS, build_parser, main
from wevent.cli._help import EXAMPLES_HEADING
from wevent.stream.runtime.subscription import RELEASE_LEGEND, ReleaseDisplay
from wevent.stream.settings import Settings
from wevent.stream.wire.records import ReleaseRecord


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every (path, parser) under ``parser``: commands and their sub-commands."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield (*path, name), child
                yield from _commands(child, (*path, name))


def test_every_command_has_a_description_and_examples():
    found = dict(_commands(build_parser(Settings())))
    assert set(COMMANDS) <= {path[0] for path in found}
    assert ("bench", "central") in found and ("replay", "tdrive") in found
    for path, parser in found.items():
        text = parser.format_help()
        assert parser.description and parser.description.strip(), path
        examples = text.partition(EXAMPLES_HEADING)[2]
        assert " ".join(["wevent", *path]) in examples, path  # an example of this very command


def test_top_level_help_lists_every_command_without_importing_them(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in COMMANDS) and EXAMPLES_HEADING in out


def _refused(capsys, argv: list[str], message: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err, err


@pytest.mark.parametrize("argv, message", [
    (["simulate", "-m", "ba", "--oracle", "grr"], "--oracle is a setting of the local model's mechanisms, not of ba"),
    (["simulate", "-m", "ba", "--oracle", "ada"], "--oracle is a setting of the local model"),  # even at its default
    (["simulate", "-m", "all", "--cutoff", "3"], "--cutoff applies to dsat"),
    (["simulate", "-m", "lpd", "--strict-window", "40"], "--strict-window is a setting of the personalized model"),
    (["simulate", "-m", "pba", "-w", "30"], "--window is the one budget of the other models"),
    (["simulate", "-m", "pbd", "-e", "0.5"], "--epsilon is the one budget of the other models"),
    (["simulate", "--input", "counts.csv", "--users", "5"], "--users sizes the synthetic stream"),
    (["simulate", "--input", "counts.csv", "--slots", "5"], "--slots sizes the synthetic stream"),
    (["run", "-c", "wevent.json", "-m", "ba"], "--mechanism sets the default stream's mechanism"),
    (["run", "-c", "wevent.json", "-w", "10"], "--window sets the default stream's window"),
    (["run", "--quiet", "--round"], "--round post-processes the release lines shown: it does not go with --quiet"),
    (["subscribe", "--no-verify", "--json", "--clip-negative"], "it does not go with --json"),
    (["subscribe", "--no-verify", "--json", "-c", "wevent.json"], "--config names the bins"),
])
def test_options_that_do_not_apply_are_refused(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "counts.csv").write_text("1,2\n3,4\n")
    (tmp_path / "wevent.json").write_text(json.dumps({"streams": [{
        "name": "s", "model": "central", "mechanism": "ba", "epsilon": 1, "window": 5, "domain": 2, "users": 10,
        "slot_seconds": 60, "start": 0}]}))
    _refused(capsys, argv, message)


def test_run_refuses_too_few_users_for_population_division_before_starting(capsys):
    # The bundled sample has 248 users: population division needs N >= 2w. Nothing starts: the broker
    # line that follows a start is never printed.
    _refused(capsys, ["run", "-m", "lpd", "-w", "200"], "population division needs N >= 2w users")


@pytest.mark.parametrize("content, message", [
    (b"user,w,epsilon\nnot,a,number\n", "w of user 'not' must be an integer"),
    (b"\x00\xff\xfe", "is not a CSV of user,w,epsilon lines"),  # was an internal error, in the worker
])
def test_run_refuses_a_bad_requirements_file_before_starting(capsys, tmp_path, content, message):
    from wevent.cli.run import demo_feed

    requirements = tmp_path / "req.csv"
    requirements.write_bytes(content)
    config = tmp_path / "wevent.json"
    config.write_text(json.dumps({"streams": [{
        "name": "p", "model": "personalized", "mechanism": "pba", "domain": 16, "users": 248, "slot_seconds": 300,
        "start": demo_feed().start, "options": {"requirements": str(requirements)}}]}))
    _refused(capsys, ["run", "-c", str(config)], message)


def _record(**fields) -> ReleaseRecord:
    base = dict(stream="taxi", slot=1, release=[0.0, 0.0, 0.0], strategy="approximate", mechanism="ba",
                epsilon=1.0, window=20, eps1=0.025, eps2=0.0, window_spend=0.025)
    return ReleaseRecord(**{**base, **fields})


def test_the_legend_says_what_strategies_mean_and_why_first_slots_are_zero():
    for words in ("publish", "approximate", "nullified", "all-zero release", "window spend", "at most epsilon"):
        assert words in RELEASE_LEGEND
    assert "\n" not in RELEASE_LEGEND


def test_bins_are_shown_by_name_and_unnamed_by_index():
    record = _record(release=[3.0, 9.0, 5.0], strategy="publish")
    named = ReleaseDisplay({"taxi": ["r0c0", "r0c1", "r1c0"]}).line(record)
    assert "r0c1 9.0  r1c0 5.0  r0c0 3.0" in named
    assert "[1] 9.0  [2] 5.0  [0] 3.0" in ReleaseDisplay().line(record)


def test_post_processing_clips_and_rounds_what_is_shown_only():
    record = _record(release=[-2.6, 7.449, 0.2], strategy="publish")
    shown = ReleaseDisplay(clip_negative=True, digits=1).values(record)
    assert shown.tolist() == [0.0, 7.4, 0.2]
    assert record.release == [-2.6, 7.449, 0.2]  # the record stays as published
    assert ReleaseDisplay(digits=0).values(record).tolist() == [-3.0, 7.0, 0.0]


def test_spend_line_is_the_slot_charge_and_the_window_against_epsilon():
    line = ReleaseDisplay().line(_record(eps1=0.025, eps2=0.2, window_spend=0.45))
    assert "slot spend 0.2250" in line and "window spend 0.4500 of epsilon 1" in line


def test_a_local_line_does_not_add_the_phases_budgets_into_a_spend():
    # Population division: M1 and M2 each ask their own users at the whole epsilon; the window's
    # per-user spend is 1. The old line printed "eps 2.0000" (eps1 + eps2) under epsilon 1.
    record = _record(mechanism="lpd", eps1=1.0, eps2=1.0, window_spend=1.0, extras={"n1": 40, "n2": 60})
    line = ReleaseDisplay().line(record)
    assert "2.0000" not in line
    assert "reports 40 at eps 1 + 60 at eps 1" in line and "window spend 1.0000 of epsilon 1" in line


def test_a_personalized_line_shows_the_spend_against_each_users_own_epsilon():
    record = _record(mechanism="pba", window_spend=0.9, epsilon=0.6, extras={"window_spend_ratio": 0.75})
    line = ReleaseDisplay().line(record)
    assert "window spend 0.7500 of each user's own epsilon" in line and "of epsilon 0.6" not in line


def test_a_personalized_slot_spend_is_what_one_type_paid():
    """The largest phase budgets may belong to different types: no user paid their sum."""
    record = _record(mechanism="pba", eps1=0.1, eps2=0.3, window_spend=0.9, epsilon=0.6,
                     extras={"window_spend_ratio": 0.75, "type_eps1": [0.1, 0.05], "type_eps2": [0.0, 0.3]})
    line = ReleaseDisplay().line(record)
    assert "slot spend 0.3500 (the most any type paid)" in line and "0.4000" not in line
