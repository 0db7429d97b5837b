"""`wevent bench soak` at its smallest size: its lines and its checks, on the embedded broker."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration]


def test_the_soak_prints_its_figures_and_passes_its_checks(tmp_path):
    """Ten seconds of a small stream: the broker line, throughput and broker memory, then the
    three checks with their figures. A worker that fell behind, grew or lost a delivery in ten
    seconds would FAIL; times are not asserted (the machine may be loaded)."""
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
    checks = [re.fullmatch(r"(PASS|FAIL) (release rate|worker memory|delivery): (.+)", line) for line in lines[3:]]
    assert all(checks), lines[3:]
    assert [(c[1], c[2]) for c in checks] == [("PASS", "release rate"), ("PASS", "worker memory"),
                                              ("PASS", "delivery")], lines[3:]
    delivered = re.fullmatch(r"([\d,]+) of ([\d,]+) report messages confirmed, none failed", checks[2][3])
    assert delivered and delivered[1] == delivered[2], checks[2][3]
    assert "of the first" in checks[0][3] and "MiB at" in checks[1][3]
