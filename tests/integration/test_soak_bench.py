"""`wevent bench soak` at its smallest size: its lines and its checks, on the embedded broker."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration]


def test_the_soak_prints_its_figures_and_delivers_every_report_message(tmp_path):
    """Ten seconds of a small stream: the broker line, throughput and broker memory, then the
    three checks with their figures. Delivery must PASS: a lost or failed report message is wrong
    however loaded the machine. Pace and worker memory are only read, not judged: over a window
    of about three seconds, sampled once a second, the pace swings by more than its 10% bound
    whenever another process on the shared cores starts (a JVM, say), so the 600-second soak of
    the benchmark table is where pace and memory are judged; here their lines must be well formed
    and their figures sound."""
    soak = subprocess.run([sys.executable, "-m", "wevent.cli", "bench", "soak", "--seconds", "10", "--users", "1000"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert soak.returncode == 0, soak.stderr
    lines = soak.stdout.strip().splitlines()
    assert len(lines) == 6, soak.stdout
    assert lines[0].startswith("broker: embedded tansu"), lines[0]
    assert re.fullmatch(r"throughput: [\d,]+ slots released, [\d,]+ reports/s; [\d,]+ reports in [\d,]+ messages",
                        lines[1]), lines[1]
    assert re.fullmatch(r"broker memory: [\d,]+ MiB at the first release, [\d,]+ MiB at the end, -?[\d,]+ MiB per "
                        r"minute, -?[\d,.]+ bytes per report", lines[2]), lines[2]
    released = re.fullmatch(r"throughput: ([\d,]+) slots released, .+", lines[1])
    assert int(released[1].replace(",", "")) > 0, lines[1]
    checks = [re.fullmatch(r"(PASS|FAIL) (release rate|worker memory|delivery): (.+)", line) for line in lines[3:]]
    assert all(checks), lines[3:]
    assert [c[2] for c in checks] == ["release rate", "worker memory", "delivery"], lines[3:]
    assert checks[2][1] == "PASS", lines[3:]
    delivered = re.fullmatch(r"([\d,]+) of ([\d,]+) report messages confirmed, none failed", checks[2][3])
    assert delivered and delivered[1] == delivered[2], checks[2][3]
    pace = re.fullmatch(r"([\d.]+) slots/s over the last (\d+) s, (\d+)% of the first \2 s's ([\d.]+) "
                        r"\(at least 90%\)", checks[0][3])
    assert pace, checks[0][3]
    assert float(pace[1]) >= 0 and float(pace[4]) >= 0, checks[0][3]
    # the printed percentages are rounded: a verdict agrees with its figure up to that rounding
    assert int(pace[3]) >= 90 if checks[0][1] == "PASS" else int(pace[3]) <= 90, checks[0][3]
    memory = re.fullmatch(r"([\d,]+) MiB at (\d+) s, ([\d,]+) MiB at (\d+) s: ([+-][\d.]+)% \(under 5%\)",
                          checks[1][3])
    assert memory, checks[1][3]
    assert int(memory[1].replace(",", "")) > 0 and int(memory[3].replace(",", "")) > 0, checks[1][3]
    assert int(memory[2]) < int(memory[4]), checks[1][3]
    assert float(memory[5]) <= 5 if checks[1][1] == "PASS" else float(memory[5]) >= 5, checks[1][3]
