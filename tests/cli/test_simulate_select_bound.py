"""``wevent simulate --task mean --select-bound``: HM clips at the threshold a calibration picks."""

import json

from wevent.cli import main

ARGS = ["-m", "lpu", "--task", "mean", "--users", "20000", "--slots", "40", "-w", "5", "--json"]


def summary(capsys, *extra):
    code = main(["simulate", *ARGS, *extra])
    out = capsys.readouterr().out
    assert code == 0
    return json.loads(out)


def test_a_selected_bound_cuts_the_noise_of_a_loose_one(capsys):
    """The -Con values (sigma 0.1) lie below 5, the first of 10 buckets of [0, 50]: the calibration
    picks 5, and HM's variance, (B/2)^2 Var*/n, falls by (50/5)^2 = 100 while clipping at 5 adds
    no bias; so the error must fall by well over a factor 10."""
    loose = summary(capsys, "--bound", "50")
    selected = summary(capsys, "--bound", "50", "--select-bound", "--bound-buckets", "10")
    assert loose["options"]["bound"] == 50.0 and selected["options"]["bound"] == 5.0
    assert selected["mse"] < loose["mse"] / 10


def test_select_bound_belongs_to_the_mean_task(capsys):
    code = main(["simulate", "-m", "lpu", "--users", "100", "--slots", "5", "--select-bound"])
    err = capsys.readouterr().err
    assert code == 2 and "--select-bound" in err and len(err.strip().splitlines()) == 1
