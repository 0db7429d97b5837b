"""A budget below the smallest one (whose noise scale overflows) is one line and exit 2 on every
command that takes an epsilon, naming the option and the smallest accepted value."""

import warnings

import pytest

from tests.helpers import run_main

SMALLEST = "1e-290"


@pytest.fixture
def simulate(capsys):
    """`wevent simulate` of 5 slots and 200 users with ``args``, in this process: status, stdout, stderr."""
    return lambda *args: run_main(capsys, "simulate", "--slots", "5", "--users", "200", *args)


@pytest.mark.parametrize("args, option", [
    (["-m", "ba", "-e", "1e-320"], "--epsilon"),
    (["-m", "uniform", "-e", "1e-320"], "--epsilon"),
    (["-m", "all", "-e", "1e-320"], "--epsilon"),
    (["-m", "lbu", "-e", "1e-320"], "--epsilon"),
    (["-m", "lpa", "-e", "1e-320"], "--epsilon"),
    (["-m", "pbd", "--strict-epsilon", "1e-320"], "--strict-epsilon"),
    (["-m", "plbu", "--strict-epsilon", "1e-320"], "--strict-epsilon"),
])
def test_simulate_refuses_a_denormal_budget_in_every_model(simulate, args, option):
    status, out, err = simulate(*args)
    assert status == 2 and out == "" and err.count("\n") == 1, err
    assert f"{option} must be a finite number >= {SMALLEST} and <= 1,000,000, got 1e-320" in err


def test_simulate_refuses_a_denormal_requirement_in_a_csv(tmp_path, simulate):
    path = tmp_path / "requirements.csv"
    path.write_text("user,w,epsilon\n" + "".join(f"{u},4,{1e-320 if u == 7 else 0.5}\n" for u in range(200)))
    status, _, err = simulate("-m", "pbd", "--requirements", path)
    assert status == 2 and err.count("\n") == 1, err
    assert f"line 9: epsilon of user '7' must be a finite number >= {SMALLEST}, got 1e-320" in err


def test_the_smallest_budget_itself_runs(simulate):
    """Its noise is near the largest float: the squared error overflows to inf, said without a
    numpy warning on the user's terminal."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        status, out, err = simulate("-m", "ba", "-e", SMALLEST)
    assert status == 0, err
    [row] = [line for line in out.splitlines() if line.startswith("ba ")]
    assert row.split()[3] == "inf" and len(row) < 100, row  # MSE; every column in its width


@pytest.mark.parametrize("mechanism", ["lbu", "lsp", "lbd", "lba", "lpu", "lpd", "lpa", "lb-dsat", "lp-dsat",
                                       "lb-rescuedp", "lp-rescuedp"])
def test_local_methods_refuse_a_budget_no_device_report_can_carry(simulate, mechanism):
    """The central floor is far below what a local report can carry: a device's odds resolve e^eps only
    to about 2^-44, so every local method refuses its stream before any slot, in one line."""
    status, _, err = simulate("-m", mechanism, "-e", SMALLEST)
    assert status == 2 and err.count("\n") == 1, err
    assert "is below the smallest a device can draw (2^-40" in err
