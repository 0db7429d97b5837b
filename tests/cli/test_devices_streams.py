"""`wevent devices` serving several streams of one config: each stream's dump is checked before
anything connects, and a misuse of --stream and --values is one line, exit 2."""

import json

from wevent.stream.config import dump_config, parse_config
from tests.cli.test_devices import DOMAIN, START, USERS, dump
from tests.helpers import wevent


def two_streams(tmp_path):
    config = parse_config({"seed": 1, "streams": [{
        "name": name, "model": "local", "mechanism": name, "epsilon": 1.0, "window": 4, "domain": DOMAIN,
        "users": USERS, "slot_seconds": 60, "start": START} for name in ("lpa", "lbu")]})
    path = tmp_path / "streams.json"
    path.write_text(json.dumps(dump_config(config)))
    return path


def devices(tmp_path, *arguments):
    return wevent("devices", "--config", str(two_streams(tmp_path)), "--ledger-dir", str(tmp_path / "ledger"),
                  "--new-ledger", *arguments, check=False)


def test_one_dump_for_two_streams_passes_the_checks_of_both(tmp_path):
    proc = devices(tmp_path, "--stream", "lpa", "--stream", "lbu", "--values", str(dump(tmp_path)))
    assert proc.returncode == 2 and "no Kafka to connect to" in proc.stderr, proc.stderr
    # a first start: each stream's empty ledger is written before anything connects
    assert sorted(p.name for p in (tmp_path / "ledger").iterdir()) == ["lbu-0of1.ledger", "lpa-0of1.ledger"]


def test_the_second_streams_dump_is_checked_too(tmp_path):
    fits = dump(tmp_path)
    (tmp_path / "big").mkdir()
    too_many_users = dump(tmp_path / "big", users=USERS + 1)
    proc = devices(tmp_path, "--stream", "lpa", "--values", str(fits), "--stream", "lbu", "--values",
                   str(too_many_users))
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "'lbu'" in proc.stderr and f"{USERS + 1} users" in proc.stderr


def test_a_stream_given_twice_is_refused(tmp_path):
    proc = devices(tmp_path, "--stream", "lpa", "--stream", "lpa", "--values", str(dump(tmp_path)))
    assert proc.returncode == 2 and proc.stderr.strip().endswith("error: a --stream is given twice"), proc.stderr


def test_values_must_be_one_for_all_or_one_per_stream(tmp_path):
    values = str(dump(tmp_path))
    proc = devices(tmp_path, "--stream", "lpa", "--stream", "lbu", "--values", values, "--values", values,
                   "--values", values)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "one --values for all streams or one per --stream: 3 for 2 streams" in proc.stderr
