"""`wevent bench central` at a tiny size: every central mechanism's time per slot beside its floors and
their ratios, then the noise draws' figures against numpy's Laplace vector draw, each a number and a
ratio (speed is printed, never asserted)."""

import re

from wevent.bench.central import MINIMAL, central_mechanisms
from wevent.cli import main

NUMBER = r"([\d,]+\.\d)"


def number(text: str) -> float:
    return float(text.replace(",", ""))


def within_rounding(time: float, floor: float, ratio: float) -> bool:
    """The printed ratio is time / floor within their rounding: times to 0.1 (half-width 0.05), the
    ratio to 0.01 (half-width 0.005)."""
    return (time - 0.05) / (floor + 0.05) - 0.005 <= ratio <= (time + 0.05) / (floor - 0.05) + 0.005


def test_bench_central_prints_every_mechanism_beside_its_floors(capsys):
    assert main(["bench", "central", "--domains", "1,8", "--slots", "12", "--runs", "1", "--draw-runs", "1"]) == 0
    out = capsys.readouterr().out
    names = central_mechanisms()
    assert {"uniform", "sample", "bd", "ba", "fast-w", "rescuedp", "dsat", "pegasus", "adapub", "bd-grouped",
            "ba-grouped"} <= set(names)
    for d in ("1", "8"):
        for name in names:
            loop = NUMBER if name in MINIMAL else "(-)"
            row = re.search(rf"^ +{d} {re.escape(name)} +{NUMBER} +{NUMBER} +{NUMBER} +{loop} +(\d+\.\d\d)x +(\d+\.\d\d)x$",
                            out, re.M)
            assert row, (name, d, out)
            exact, floating, draw, loop_time, exact_ratio, floating_ratio = row.groups()
            floor = number(loop_time) if name in MINIMAL else number(draw)
            for time, ratio in ((number(exact), float(exact_ratio)), (number(floating), float(floating_ratio))):
                assert time > 0
                if floor > 0.05:  # printed to 0.1 us: a floor of 0.0 has no ratio to check
                    assert within_rounding(time, floor, ratio)


def test_bench_central_prints_the_noise_draws_against_numpys_floor(capsys):
    assert main(["bench", "central", "--domains", "1", "--slots", "5", "--runs", "1", "--draw-runs", "1"]) == 0
    out = capsys.readouterr().out
    assert "noise draws at epsilon = 0.0125, ns per value, medians of 1 interleaved runs" in out
    for d in ("1", "100", "10,000"):
        row = re.search(rf"^ +{d} +{NUMBER} +{NUMBER} +(\d+\.\d\d)x +{NUMBER} +(\d+\.\d\d)x$", out, re.M)
        assert row, out
        floor, exact, exact_ratio, floating, floating_ratio = (number(v) for v in row.groups())
        assert min(floor, exact, floating) > 0
        assert within_rounding(exact, floor, exact_ratio), row.group(0)
        assert within_rounding(floating, floor, floating_ratio), row.group(0)
    assert re.search(r"^scalar draw \(M1\): discrete [\d,]+ ns, laplace-fp-unsafe [\d,]+ ns, numpy laplace [\d,]+ ns$",
                     out, re.M)
