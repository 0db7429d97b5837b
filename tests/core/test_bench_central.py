"""`wevent bench central` at a tiny size: the mechanisms' table, then the noise draws' figures
against numpy's Laplace vector draw, each a number and a ratio (speed is printed, never asserted)."""

import re

from wevent.cli import main

NUMBER = r"([\d,]+\.\d)"


def test_bench_central_prints_the_noise_draws_against_numpys_floor(capsys):
    assert main(["bench", "central", "--slots", "60", "--naive-slots", "20", "--domain", "8", "--draw-runs", "1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^bd .* True$", out, re.M) and re.search(r"^ba .* True$", out, re.M)
    assert "noise draws at epsilon = 0.0125, ns per value, medians of 1 interleaved runs" in out
    for d in ("1", "100", "10,000"):
        row = re.search(rf"^ +{d} +{NUMBER} +{NUMBER} +(\d+\.\d\d)x +{NUMBER} +(\d+\.\d\d)x$", out, re.M)
        assert row, out
        floor, exact, exact_ratio, floating, floating_ratio = (float(v.replace(",", "")) for v in row.groups())
        assert min(floor, exact, floating) > 0
        assert abs(exact_ratio - exact / floor) <= 0.01 * exact_ratio + 0.005
        assert abs(floating_ratio - floating / floor) <= 0.01 * floating_ratio + 0.005
    assert re.search(r"^scalar draw \(M1\): discrete [\d,]+ ns, laplace-fp-unsafe [\d,]+ ns, numpy laplace [\d,]+ ns$",
                     out, re.M)
