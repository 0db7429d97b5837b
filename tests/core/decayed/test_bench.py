"""`wevent bench decayed` runs end to end on a small stream (speed is printed, never asserted)."""

from wevent.cli import main


def test_bench_decayed_smoke(capsys):
    assert main(["bench", "decayed", "--window", "64", "--slots", "200", "--queries", "50", "--naive-queries", "20"]) == 0
    out = capsys.readouterr().out
    assert "mode A agrees with it: True" in out
    assert "RTP_DMM (cai Λ)" in out and "naive Python loop" in out
