"""`wevent bench decayed` runs end to end on a small stream (speed is printed, never asserted)."""

import pytest

from wevent.cli import main

SMALL = ["bench", "decayed", "--window", "64", "--slots", "200", "--queries", "50", "--naive-queries", "20"]


@pytest.mark.parametrize("bins, loop", [([], False), (["--bins", "1"], True)], ids=["default d=100", "d=1"])
def test_bench_decayed_smoke(capsys, bins, loop):
    """The default is README's d = 100; at d = 1 a plain Python loop joins the baselines."""
    assert main([*SMALL, *bins]) == 0
    out = capsys.readouterr().out
    assert "mode A agrees with it: True" in out and "RTP_DMM (cai Λ)" in out
    assert ("d = 100," in out) is not loop and ("naive Python loop" in out) is loop
