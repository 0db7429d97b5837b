"""``wevent simulate`` with the local-model family and ``wevent bench local``."""

import json

import numpy as np
import pytest

from wevent.cli import main
from wevent.core.data import ABSENT, UserValues
from wevent.core.local import MECHANISMS

SMALL = ["--users", "2000", "--slots", "40", "--window", "5"]


def simulate(capsys, *args):
    code = main(["simulate", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_summary_has_local_measures(capsys):
    code, out, _ = simulate(capsys, "-m", "lpa", *SMALL, "--json", "--roc", "--dataset", "sin")
    assert code == 0
    summary = json.loads(out)
    for key in ("cfpu", "bits_per_user_per_slot", "max_reports_per_user_in_window", "roc_auc", "mre", "max_window_epsilon"):
        assert key in summary
    assert summary["max_reports_per_user_in_window"] == 1 and summary["max_window_epsilon"] <= 1.0
    assert 0 < summary["cfpu"] < 1 / 5 and summary["options"]["oracle"] == "ada"


def test_all_local_table_and_releases(capsys, tmp_path):
    releases = tmp_path / "releases.jsonl"
    code, out, _ = simulate(capsys, "-m", "all-local", *SMALL, "--mode", "sufficient", "--releases", str(releases))
    assert code == 0
    for name in MECHANISMS:
        assert f"\n{name} " in out
    assert "CFPU" in out and "bits/user/slot" in out
    lines = releases.read_text().splitlines()
    assert len(lines) == len(MECHANISMS) * 40
    record = json.loads(lines[-1])
    assert record["mechanism"] == list(MECHANISMS)[-1] and set(record["extras"]) >= {"n1", "n2", "reports", "bits"}


def test_mean_task_runs_and_averages_runs(capsys):
    code, out, _ = simulate(capsys, "-m", "lpd", *SMALL, "--task", "mean", "--runs", "2", "--json")
    summary = json.loads(out)
    assert code == 0 and summary["runs"] == 2 and summary["domain_size"] == 1 and summary["options"]["oracle"] == "hm"


def test_npz_input_with_absent_users(capsys, tmp_path):
    rng = np.random.default_rng(0)
    values = rng.integers(0, 3, (30, 400))
    values[rng.random(values.shape) < 0.2] = ABSENT
    path = tmp_path / "dump.npz"
    UserValues(values, domain_size=3).save(path)
    code, out, _ = simulate(capsys, "-m", "lpu", "--input", str(path), "--window", "5", "--json")
    summary = json.loads(out)
    assert code == 0 and summary["domain_size"] == 3 and summary["users"] == 400


@pytest.mark.parametrize("args, message", [
    (["-m", "lpd", "--users", "30", "--window", "20"], "N >= 2w"),
    (["-m", "lbu", "--epsilon", "0"], "epsilon"),
    (["-m", "lbu", "--epsilon", "-1"], "epsilon"),
    (["-m", "lbu", "--runs", "0"], "--runs"),
    (["-m", "lpa", "--beta", "1.5"], "beta"),
])
def test_errors_are_one_line(capsys, args, message):
    code, out, err = simulate(capsys, *args, "--slots", "5")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err


def test_csv_input_is_rejected_clearly(capsys, tmp_path):
    path = tmp_path / "counts.csv"
    path.write_text("1,2\n3,4\n")
    code, _, err = simulate(capsys, "-m", "lpa", "--input", str(path))
    assert code == 2 and "give a dump" in err and err.count("\n") == 1


def test_bench_local_small(capsys):
    code = main(["bench", "local", "--users", "20000", "--domain", "20", "--slots", "12", "--naive-slots", "2"])
    out = capsys.readouterr().out
    assert code == 0 and "speed-up" in out and "peak memory" in out


def test_a_dump_whose_domain_fills_its_value_type_gets_its_absent_category_unwrapped(tmp_path):
    """The absent category is d: 128 does not fit the int8 of a dump of 128 values (0..127), where
    it wrapped to -128."""
    from wevent.cli.simulate_local import _dump_data

    values = np.array([[127, ABSENT, 0]], dtype=np.int8)
    data = _dump_data(UserValues(values, domain_size=128))
    assert data.values_at(1).tolist() == [127, 128, 0] and data.absent
