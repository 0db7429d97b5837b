"""`wevent run` has no public default key.

Without a key in the environment and without a seed, every run draws its own random keys, so two
runs release different noise; a seed (experiments only) makes runs reproducible and says so on
stderr. The worker holds only the server's key and the devices only theirs, in their environment.
"""

from __future__ import annotations

import signal

import pytest

from wevent.core.randomness import SecretKey
from wevent.stream.wire.seals import report_seal, request_seal
from tests.integration.run_helpers import (children, command_of, environment, first_release, kill_leftovers,
                                           listening_addresses, non_loopback_address, process_environment, refuses,
                                           releases, start_run, started_ports, wevent_run)

pytestmark = pytest.mark.slow

SLOTS = 3
SEED_LINE = "reproducible noise for experiments only"


def _releases_of_two_runs(tmp_path, *arguments: str):
    runs = []
    for n in range(2):
        log = tmp_path / f"releases{n}.jsonl"
        run = wevent_run(["--slots", str(SLOTS), "--quiet", "--release-log", str(log), *arguments],
                         environment(tmp_path / "tmp"), tmp_path)
        assert run.returncode == 0, run.stderr[-3000:]
        runs.append((releases(log), run.stderr))
    return runs


def test_two_runs_without_a_seed_release_different_noise(tmp_path):
    (first, first_err), (second, second_err) = _releases_of_two_runs(tmp_path)
    assert sorted(first) == sorted(second) == list(range(1, SLOTS + 1))
    # Slot 1's private dissimilarity is the true one plus Laplace noise of the run's key: equal
    # values in two runs would mean a shared (public) key.
    assert first[1]["dissimilarity"] != second[1]["dissimilarity"]
    assert SEED_LINE not in first_err + second_err


def test_a_seed_makes_runs_reproducible_and_says_so_in_one_line(tmp_path):
    (first, first_err), (second, second_err) = _releases_of_two_runs(tmp_path, "--seed", "11")
    assert first == second and sorted(first) == list(range(1, SLOTS + 1))
    for stderr in (first_err, second_err):
        lines = [line for line in stderr.splitlines() if SEED_LINE in line]
        assert lines == [lines[0]] and lines[0].startswith("wevent run: seed 11: "), stderr


def test_each_child_holds_only_its_own_key_and_serves_on_loopback_only(tmp_path):
    tmpdir = tmp_path / "tmp"
    run = start_run(["-m", "lpa", "--speed", "60"], environment(tmpdir), tmp_path)
    err = tmp_path / "stderr"
    started = {}
    try:
        assert first_release(tmp_path), err.read_text()
        started = children(run.pid)
        keys = {command_of(argv): {k: v for k, v in process_environment(pid).items()
                                   if k.startswith("WEVENT_") and k.endswith("_KEY")}
                for pid, argv in started.items()}
        assert keys["broker"] == {}
        # Each holds its own secret and the other side's public key, which checks the other's signatures.
        assert set(keys["worker"]) == {"WEVENT_NOISE_KEY", "WEVENT_DEVICE_PUBLIC_KEY"}
        assert set(keys["devices"]) == {"WEVENT_DEVICE_KEY", "WEVENT_REQUEST_PUBLIC_KEY"}
        secrets = [keys["worker"]["WEVENT_NOISE_KEY"], keys["devices"]["WEVENT_DEVICE_KEY"]]
        assert keys["worker"]["WEVENT_DEVICE_PUBLIC_KEY"] == report_seal(SecretKey.from_hex(secrets[1])).public_hex
        assert keys["devices"]["WEVENT_REQUEST_PUBLIC_KEY"] == request_seal(SecretKey.from_hex(secrets[0])).public_hex
        assert all(len(bytes.fromhex(key)) == 32 for key in secrets) and secrets[0] != secrets[1]
        assert not any(key in " ".join(argv) for key in secrets for argv in started.values())
        files = [path.read_bytes() for path in tmpdir.rglob("*") if path.is_file()]
        assert files and not any(key.encode() in data or bytes.fromhex(key) in data
                                 for key in secrets for data in files)

        web_port, truth_port = started_ports(err.read_text())
        assert listening_addresses(web_port) == {"127.0.0.1"} and listening_addresses(truth_port) == {"127.0.0.1"}
        address = non_loopback_address()
        if address:
            assert refuses(address, web_port) and refuses(address, truth_port)
        run.send_signal(signal.SIGTERM)
        assert run.wait(30) == 128 + signal.SIGTERM
    finally:
        kill_leftovers(run, started)
