"""``wevent simulate --roc``: the event-monitoring ROC curve beside its area (LDP-IDS Fig. 5)."""

import json

import numpy as np

from wevent.cli import main
from wevent.core.data import UserValues
from wevent.core.synthetic import synthetic


def roc_summary(capsys, *extra):
    code = main(["simulate", "-m", "lpu", "--dataset", "sin", "--users", "5000", "--slots", "200", "-w", "5",
                 "--mode", "sufficient", "--roc", "--json", *extra])
    out = capsys.readouterr().out
    assert code == 0
    return json.loads(out)


def test_the_curve_runs_from_0_to_1_and_encloses_its_area(capsys):
    """True positive rates at 21 false positive rates: non-decreasing, 1 at FPR 1, and the area under
    their trapezoids is the AUC up to the grid's interpolation error, at most half a grid step (0.025)
    for a monotone curve from 0 to 1."""
    summary = roc_summary(capsys)
    fpr, tpr = np.array(summary["roc_fpr"]), np.array(summary["roc_tpr"])
    assert np.allclose(fpr, np.linspace(0, 1, 21)) and tpr[-1] == 1.0 and (np.diff(tpr) >= 0).all()
    area = float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2))
    assert abs(area - summary["roc_auc"]) <= 0.025 + 1e-12


def test_runs_average_the_curves_vertically(capsys, tmp_path):
    """On a dump (fixed data), run r of ``--runs 2`` is ``--seed r``; the curves average point by point."""
    dump = tmp_path / "sin.npz"
    UserValues(synthetic("sin", 5000, 200).values(), domain_size=2).save(dump)

    def summary(*extra):
        code = main(["simulate", "-m", "lpu", "--input", str(dump), "-w", "5", "--mode", "sufficient", "--roc",
                     "--json", *extra])
        out = capsys.readouterr().out
        assert code == 0
        return json.loads(out)

    runs = [summary("--seed", str(seed)) for seed in (0, 1)]
    both = summary("--runs", "2")
    assert not np.allclose(runs[0]["roc_tpr"], runs[1]["roc_tpr"])
    assert np.allclose(both["roc_tpr"], np.mean([r["roc_tpr"] for r in runs], axis=0))
