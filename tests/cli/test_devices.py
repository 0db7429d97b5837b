"""`wevent devices` as an operator starts it: a dump that does not fit the stream is one line, exit 2.

No Kafka is configured: a fleet that passes its checks stops when it looks for one. The refusals
that come first run in this process."""

import json

import numpy as np
import pytest

from wevent.core.data import UserValues
from wevent.stream.config import dump_config, parse_config
from tests.helpers import run_main, wevent

USERS, DOMAIN, START = 40, 5, 1_201_910_400.0


@pytest.fixture
def config_path(tmp_path):
    config = parse_config({"seed": 1, "streams": [{
        "name": "l", "model": "local", "mechanism": "lpa", "epsilon": 1.0, "window": 4, "domain": DOMAIN,
        "users": USERS, "slot_seconds": 60, "start": START}]})
    path = tmp_path / "streams.json"
    path.write_text(json.dumps(dump_config(config)))
    return path


def dump(tmp_path, users=USERS, domain=DOMAIN, slot_seconds=60.0, start=START):
    values = np.random.default_rng(0).integers(0, domain, (6, users))
    path = tmp_path / "values.npz"
    UserValues(values, domain, slot_seconds=slot_seconds, start=start).save(path)
    return path


@pytest.mark.parametrize("mismatch, named", [
    ({"users": USERS + 1}, [f"{USERS + 1} users", f"{USERS} users"]),
    ({"domain": DOMAIN + 2}, [f"d = {DOMAIN + 2}", f"d = {DOMAIN}"]),
    ({"slot_seconds": 30.0}, ["30 s", "60 s"]),
    ({"start": START + 90}, [f"from {START + 90:g}", f"from {START:g}"]),
])
def test_a_dump_that_does_not_fit_the_stream_is_refused_before_anything_starts(tmp_path, capsys, config_path, mismatch,
                                                                                 named):
    values = dump(tmp_path, **mismatch)
    status, out, err = run_main(capsys, "devices", "--config", config_path, "--values", values, "--ledger-dir",
                                tmp_path / "ledger")
    assert status == 2 and out == ""
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert all(text in err for text in named), err


@pytest.mark.parametrize("domain", [DOMAIN, DOMAIN - 1])  # a dump of fewer values than the stream fits too
def test_a_dump_that_fits_passes_the_checks(tmp_path, config_path, domain):
    values = dump(tmp_path, users=USERS - 3, domain=domain, start=START + 120)
    proc = wevent("devices", "--config", config_path, "--values", values, "--ledger-dir", tmp_path / "ledger",
                  "--new-ledger", check=False)
    assert proc.returncode == 2 and "no Kafka to connect to" in proc.stderr, proc.stderr


def test_a_damaged_ledger_stops_the_fleet_with_one_line(tmp_path, capsys, config_path):
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    (ledger / "l-0of1.ledger").write_bytes(b"WEVS1 not a ledger at all, and far too short to be one")
    status, _, err = run_main(capsys, "devices", "--config", config_path, "--values", dump(tmp_path), "--ledger-dir",
                              ledger)
    assert status == 2 and len(err.splitlines()) == 1, err
    assert "l-0of1.ledger is unusable" in err and "not reset" in err
    assert (ledger / "l-0of1.ledger").read_bytes().startswith(b"WEVS1 not a ledger")  # left as it was


def test_the_ledger_directory_defaults_to_the_working_directory(tmp_path, config_path):
    wevent("devices", "--config", config_path, "--values", dump(tmp_path), "--new-ledger", cwd=tmp_path, check=False)
    assert (tmp_path / "wevent-devices-ledger" / "l-0of1.ledger").is_file()


@pytest.mark.parametrize("lost", ["deleted", "another working directory"])
def test_a_fleet_without_its_ledger_does_not_start_unless_told_it_is_the_first_start(tmp_path, config_path, lost):
    """Without its ledger a fleet would answer again, at no cost, requests its users already paid
    for: it stops in one line naming where it looked, before anything connects."""
    values = str(dump(tmp_path))
    first = tmp_path / "first"
    first.mkdir()
    wevent("devices", "--config", config_path, "--values", values, "--new-ledger", cwd=first, check=False)
    assert (first / "wevent-devices-ledger" / "l-0of1.ledger").is_file()
    if lost == "deleted":
        (first / "wevent-devices-ledger" / "l-0of1.ledger").unlink()
        where = first
    else:
        where = tmp_path / "elsewhere"
        where.mkdir()
    ledger = where / "wevent-devices-ledger"
    proc = wevent("devices", "--config", config_path, "--values", values, cwd=where, check=False)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr
    assert f"no device ledger l-0of1.ledger in {ledger.resolve()}" in proc.stderr and "--new-ledger" in proc.stderr


def test_a_restart_reads_the_ledger_its_first_start_wrote(tmp_path, config_path):
    values, ledger = str(dump(tmp_path)), str(tmp_path / "ledger")
    for flags in (["--new-ledger"], []):
        proc = wevent("devices", "--config", config_path, "--values", values, "--ledger-dir", ledger, *flags, check=False)
        assert proc.returncode == 2 and "no Kafka to connect to" in proc.stderr, proc.stderr
