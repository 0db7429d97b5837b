"""``wevent simulate --lns-std/--sin-b``: the synthetic streams' fluctuation (LDP-IDS Fig. 6(c)(d))."""

import json
import math

import numpy as np
import pytest

from wevent.cli import main
from wevent.core.local import GRR
from wevent.core.synthetic import synthetic

SE = 4
USERS, SLOTS = 20_000, 100


@pytest.mark.parametrize(("dataset", "flag", "option", "value"),
                         [("sin", "--sin-b", "frequency", 0.3), ("lns", "--lns-std", "step_std", 0.01)])
def test_lbu_releases_estimate_the_stream_the_option_sets(capsys, tmp_path, dataset, flag, option, value):
    """LBU at w = 1 estimates every slot with variance V(eps, N): its residuals against the stream
    generated with the option have mean square V (within SE standard errors of 2V^2/T), and against
    the default stream they do not."""
    releases = tmp_path / "releases.jsonl"
    code = main(["simulate", "-m", "lbu", "--dataset", dataset, "--users", str(USERS), "--slots", str(SLOTS),
                 "-w", "1", "--mode", "sufficient", flag, str(value), "--releases", str(releases), "--json"])
    capsys.readouterr()
    assert code == 0
    ones = np.array([json.loads(line)["release"][1] for line in releases.read_text().splitlines()])
    v = GRR(1.0, 2).variance(USERS)
    for stream, expected in ((synthetic(dataset, USERS, SLOTS, **{option: value}), True),
                             (synthetic(dataset, USERS, SLOTS), False)):
        ratio = float(np.mean((ones - stream.ones / USERS) ** 2)) / v
        assert (abs(ratio - 1) < SE * math.sqrt(2 / SLOTS)) is expected, (stream.model, ratio)


@pytest.mark.parametrize("args", [["--dataset", "sin", "--lns-std", "0.01"], ["--dataset", "lns", "--sin-b", "0.1"],
                                  ["--lns-std", "0"], ["--sin-b", "nan"]])
def test_a_fluctuation_option_for_another_stream_or_out_of_range_is_one_line(capsys, args):
    try:  # argparse exits on a malformed value; the command returns 2 on a misplaced one
        code = main(["simulate", "-m", "lbu", "--users", "100", "--slots", "5", *args])
    except SystemExit as exit_info:
        code = exit_info.code
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
