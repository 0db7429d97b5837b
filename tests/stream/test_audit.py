"""The audit's verdicts on hand-made ledgers, against a brute-force per-user count, and its CLI."""

import json
import math
from fractions import Fraction
import socket
import subprocess
import sys
import threading

import numpy as np
import pytest

from wevent.stream.audit import MalformedRecord, verify
from wevent.stream.runtime.broker import free_port


def record(slot, phases=None, epsilon=1.0, window=2, **fields):
    base = {"record": "audit", "stream": "s", "slot": slot, "mechanism": "lpa", "epsilon": epsilon,
            "window": window, "eps1": 0.0, "eps2": 0.0}
    if phases is not None:
        base["phases"] = [{"phase": i + 1, "epsilon": e, "users": u} for i, (e, u) in enumerate(phases)]
    return {**base, **fields}


def central(slot, eps1, eps2, **fields):
    return {**record(slot, mechanism="ba", window=3), "eps1": eps1, "eps2": eps2, **fields}


def test_a_listed_charge_adds_to_everyone_phases_of_later_slots():
    # user 3 is listed at 0.6 in slot 1, everyone pays 0.5 in slot 2: the window 1..2 spends 1.1
    finding = verify([record(1, [(0.6, [3])]), record(2, [(0.5, None)])])[0]
    assert not finding.ok
    assert "user 3 spends 1.1 > epsilon 1 in slots 1..2" in finding.message
    # ... and in the other order: everyone first, the listed charge at the window's last slot
    assert "user 3" in verify([record(1, [(0.5, None)]), record(2, [(0.6, [3])])])[0].message
    assert verify([record(1, [(0.5, [3])]), record(2, [(0.5, None)])])[0].ok


def test_everyone_phases_alone_are_checked_per_window():
    finding = verify([record(s, [(0.25, None), (0.5 if s == 3 else 0.25, None)]) for s in range(1, 6)])[0]
    assert not finding.ok and "every user spends 1.25 > epsilon 1 in slots 2..3" in finding.message


def brute_force(records, users):
    """Every user's exact spend (fractions) over every window, from the dense (slot x user) charges."""
    w = records[0]["window"]
    charged = [[Fraction(0)] * users for _ in records]
    for row, r in enumerate(records):
        for phase in r["phases"]:
            for user in range(users) if phase["users"] is None else phase["users"]:  # listed twice: pays twice
                charged[row][user] += Fraction(phase["epsilon"])
    return [[sum((charged[i][u] for i in range(max(0, j - w + 1), j + 1)), Fraction(0)) for u in range(users)]
            for j in range(len(records))]


def smallest_float_at_least(value: Fraction) -> float:
    nearest = float(value)
    return math.nextafter(nearest, math.inf) if Fraction(nearest) < value else nearest


@pytest.mark.parametrize("seed", range(40))
def test_the_worst_user_window_matches_a_brute_force_count(seed):
    rng = np.random.default_rng(seed)
    users, slots, w = int(rng.integers(1, 9)), int(rng.integers(1, 30)), int(rng.integers(1, 7))
    dyadic = seed % 2 == 0  # multiples of 1/8 add exactly in floats; other charges do not
    records = []
    for slot in range(1, slots + 1):
        phases = []
        for _ in range(rng.integers(0, 4)):
            e = rng.integers(0, 5) / 8 if dyadic else float(rng.uniform(0, 0.6))
            listed = None if rng.random() < 0.3 else rng.integers(0, users, rng.integers(0, users + 2)).tolist()
            phases.append((e, listed))
        records.append(record(slot, phases, window=w))
    spend = brute_force(records, users)
    top = max(max(row) for row in spend)
    if top == 0:
        return  # nothing charged: no budget to sit exactly at
    at_most = smallest_float_at_least(top)  # the smallest epsilon that covers the worst window
    for r in records:
        r["epsilon"] = at_most
    assert verify(records)[0].ok, verify(records)[0].message
    for r in records:
        r["epsilon"] = math.nextafter(at_most, 0)  # one ulp less: below the worst window's exact spend
    finding = verify(records)[0]
    assert not finding.ok, finding.message
    # the window named is one where the named user (or everyone) reaches the maximum
    last = int(finding.message.rsplit("..", 1)[1])
    who = finding.message.split(": ", 1)[1]
    worst = spend[last - 1] if who.startswith("every user") else [spend[last - 1][int(who.split()[1])]]
    assert max(worst) == top


def test_a_window_at_exactly_epsilon_passes_after_millions_of_earlier_charges():
    # 20,000 users each asked at 0.3 once every w = 10 slots over 1,000 slots: 2 million charges,
    # and every window spends 0.3 + 10 everyone phases of 0.07: epsilon = 1 up to rounding
    users, slots, w = 20_000, 1_000, 10
    groups = np.arange(users) % w
    records = [record(t, [(0.3, np.flatnonzero(groups == (t - 1) % w).tolist()), (0.7 / w, None)], window=w)
               for t in range(1, slots + 1)]
    finding = verify(records)[0]
    assert finding.ok, finding.message
    records[500]["phases"][0]["users"].append(int(np.flatnonzero(groups == 0)[7]))  # asked again 1 slot later
    finding = verify(records)[0]
    assert not finding.ok and f"user {np.flatnonzero(groups == 0)[7]} spends 1.3" in finding.message


def test_huge_user_indices_are_checked_without_a_vector_that_large():
    big = 2**62
    finding = verify([record(1, [(0.6, [big, 5])]), record(2, [(0.5, [big])])])[0]
    assert not finding.ok and f"user {big} spends 1.1" in finding.message
    assert verify([record(1, [(0.6, [big, 5])]), record(2, [(0.4, [big])])])[0].ok


@pytest.mark.parametrize("ledger, reason", [
    ([central(1, math.nan, 0.0), central(2, 20.0, 0.0)], "slot 1: eps1 is nan"),
    ([central(1, 0.5, 0.0), central(2, 0.0, -0.4), central(3, 0.5, 0.5)], "slot 2: eps2 is -0.4"),
    ([central(1, 0.5, math.inf)], "slot 1: eps2 is inf"),
    ([central(1, 0.5, 0.0, epsilon=math.nan), central(2, 0.5, 0.0, epsilon=math.nan)], "slot 1: epsilon is nan"),
    ([central(1, 0.5, 0.0, epsilon=-1.0)], "slot 1: epsilon is -1"),
    ([central(1, 0.5, 0.0), central(2, 0.5, 0.0, epsilon=20.0)], "slot 2 declares epsilon 20, slot 1 1"),
    ([central(1, 0.1, 0.0, reserved=math.nan)], "slot 1: reserved is nan"),
    ([record(1, [(0.5, None)]), record(2, [(math.nan, [0, 1])]), record(3, [(5.0, [0])])],
     "slot 2: a phase's epsilon is nan"),
    ([record(1, [(-0.5, [2]), (1.0, [2])])], "slot 1: a phase's epsilon is -0.5"),
    ([record(1, [(0.5, None)]), record(2, [(0.5, [1])], eps1=math.nan)], "slot 2: eps1 is nan"),
    ([record(1, [(0.5, None)]), central(2, 0.1, 0.1, mechanism="lpa", window=2)], "slot 2's record does not say"),
])
def test_broken_ledgers_fail_naming_the_slot(ledger, reason):
    finding = verify(ledger)[0]
    assert not finding.ok and reason in finding.message, finding.message


def test_personalized_charges_must_be_finite_and_non_negative():
    types = [[2, 1.0, 10], [4, 0.5, 5]]
    good = [{**central(s, 0.1, 0.1), "mechanism": "pba", "types": types, "charges": [0.5, 0.1]} for s in (1, 2, 3)]
    assert verify(good)[0].ok
    nan = [dict(r, charges=[0.5, math.nan]) if r["slot"] == 2 else r for r in good]
    assert "slot 2: a charge is nan" in verify(nan)[0].message
    negative_budget = [dict(r, types=[[2, 1.0, 10], [4, -0.5, 5]]) for r in good]
    assert "a type's epsilon is -0.5" in verify(negative_budget)[0].message


@pytest.mark.parametrize("records, reason", [
    ([[1, 2]], "record 1 is not a JSON object"),
    ([{"stream": "s"}], "whole slot number"),
    ([record(1, [(0.5, None)], epsilon="1")], "epsilon must be a number"),
    ([dict(record(1), phases=[5])], "phases must be a list of objects"),
    ([record(1, [(0.5, [1, "x"])])], "user indices"),
    ([record(1, [(0.5, [-1])])], "user indices"),
    ([record(1, [(0.5, [2**63])])], "user indices"),
    ([record(1, [(0.5, [True])])], "user indices"),
    ([{k: v for k, v in central(1, 0.1, 0.1).items() if k != "epsilon"}], "no field 'epsilon'"),
])
def test_malformed_records_are_refused(records, reason):
    with pytest.raises(MalformedRecord, match=reason):
        verify(records)


def audit(*args):
    """`wevent audit` of hand-made records, which nobody signed."""
    return subprocess.run([sys.executable, "-m", "wevent.cli", "audit", "--no-verify", *args], capture_output=True,
                          text=True, timeout=60)


def one_line_error(run, reason, status=2):
    assert run.returncode == status and run.stdout == "", (run.stdout, run.stderr)
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr, run.stderr
    assert reason in run.stderr, run.stderr


def write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_cli_fails_a_nan_ledger_and_the_mixed_phase_overspend(tmp_path):
    nan = audit(write(tmp_path / "nan.jsonl", [central(1, math.nan, 0.0), central(2, 20.0, 0.0)]))
    assert nan.returncode == 1 and nan.stdout.startswith("FAIL s: slot 1: eps1 is nan"), nan.stdout + nan.stderr
    mixed = audit(write(tmp_path / "mixed.jsonl", [record(1, [(0.6, [3])]), record(2, [(0.5, None)])]))
    assert mixed.returncode == 1 and "user 3 spends 1.1" in mixed.stdout, mixed.stdout + mixed.stderr


@pytest.mark.parametrize("content, reason", [
    (None, "is not a regular file"),
    ("[1, 2]\n", "no records to audit: 1 dropped (1 not a record) of 1 records"),
    ('{"stream": "s", "slot": 1, "epsilon": 1, "window": 2, "eps1": 0, "eps2": 0, "phases": [5]}\n',
     "phases must be a list"),
    ("{not json\n", "line 1: not JSON"),
    (b"\xff\xfe\n", "not UTF-8"),
])
def test_cli_refuses_unreadable_input_in_one_line(tmp_path, content, reason):
    path = tmp_path / "ledger.jsonl"
    if content is None:
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    one_line_error(audit(str(path), "--stream", "s"), reason)


@pytest.mark.parametrize("bootstrap, reason, status", [
    ("not a::host", "HOST:PORT", 2),
    ("127.0.0.1:99999", "HOST:PORT", 2),
    ("127.0.0.1:{free_port}", "cannot reach Kafka", 75),  # the port is picked when the test runs; Kafka may come up
])
def test_cli_refuses_a_bad_bootstrap_in_one_line(bootstrap, reason, status):
    one_line_error(audit("--bootstrap", bootstrap.format(free_port=free_port())), reason, status)


def test_cli_refuses_a_listener_that_is_not_kafka_in_one_line():
    """Something accepts connections but answers HTTP: one line after the probe's timeout, not a
    flood of client logs and a traceback after the reader's."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        one_line_error(audit("--bootstrap", f"127.0.0.1:{server.getsockname()[1]}"), "no Kafka answered")
    finally:
        stop.set()
        thread.join()
        server.close()
