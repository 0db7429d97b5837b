"""The audit compares exact rational sums, audits the whole ledger (or the range named), and refuses
two records of one slot that disagree."""

import json
import math
import subprocess
import sys

import pytest

from tests.stream.test_audit import central, record
from wevent.stream.audit import verify


def ledger(charges, epsilon, window=3, **fields):
    """A central stream's audit records: slot i charges charges[i - 1] (as eps2)."""
    return [{**central(slot, 0.0, eps2, epsilon=epsilon, **fields), "window": window}
            for slot, eps2 in enumerate(charges, start=1)]


@pytest.mark.parametrize("epsilon, charges", [
    (1e-10, [1e-10, 1e-10]),  # twice epsilon, which a tolerance of 1e-9 hid
    (1.0, [0.5, 0.5 + 1e-9]),  # over by exactly 1e-9
    (1.0, [0.5, math.nextafter(0.5, 1)]),  # over by one ulp
    (1.0, [0.1] * 10),  # 0.1 is above a tenth: ten of them exceed 1, though their float sum is below it
])
def test_an_overspend_of_any_size_fails(epsilon, charges):
    finding = verify(ledger(charges, epsilon, window=len(charges)))[0]
    assert not finding.ok and f"slots 1..{len(charges)} spend" in finding.message, finding.message


def test_a_window_at_exactly_its_budget_passes_and_one_ulp_over_names_the_spend():
    assert verify(ledger([0.25, 0.25, 0.5], 1.0))[0].ok
    assert verify(ledger([0.5, 0.25], 1.0, reserved=0.25))[0].ok  # the reserved share adds exactly
    finding = verify(ledger([0.5, math.nextafter(0.25, 1)], 1.0, reserved=0.25))[0]
    assert not finding.ok and "spend 1.0000000000000002 > epsilon 1" in finding.message, finding.message


def test_a_ledger_must_start_at_the_streams_first_slot_unless_a_range_is_named():
    records = ledger([0.5] * 8, 1.0, window=2)[4:]  # slots 5..8: the first four are gone
    finding = verify(records)[0]
    assert not finding.ok and "the records start at slot 5, not at slot 1" in finding.message
    finding = verify(records, first=5)[0]
    assert finding.ok and "(slots 5.. as asked)" in finding.message, finding.message
    assert "windows reaching before slot 5 are checked on their slots from 5 on" in finding.message


def test_a_named_range_must_be_complete_and_only_it_is_audited():
    records = ledger([0.5, 0.5, 0.9, 0.5, 0.5, 0.5], 1.0, window=2)
    assert not verify(records)[0].ok  # slots 2..3 spend 1.4
    assert verify(records, first=4, last=6)[0].ok and "(slots 4..6 as asked)" in verify(records, first=4, last=6)[0].message
    gap = [r for r in records if r["slot"] != 5]
    assert "slot 5 is missing" in verify(gap, first=4)[0].message
    assert "the records end before slot 9" in verify(records, first=4, last=9)[0].message
    assert "no records in slots 7..9" in verify(records, first=7, last=9)[0].message


def release_of(audit_record, **changes):
    """The release record a worker writes beside an audit record (fields of the release topic)."""
    release = {"stream": audit_record["stream"], "slot": audit_record["slot"], "release": [1.0, 2.0],
               "strategy": "publish", "mechanism": audit_record["mechanism"], "epsilon": audit_record["epsilon"],
               "window": audit_record["window"], "eps1": audit_record["eps1"], "eps2": audit_record["eps2"],
               "window_spend": 0.5}
    return {**release, **changes}


@pytest.mark.parametrize("order", ["release first", "audit first"])
def test_a_release_that_conflicts_with_the_audit_record_of_its_slot_fails(order):
    records = ledger([0.25, 0.25, 0.25], 1.0)
    conflicting = release_of(records[1], eps2=0.125)
    records = [conflicting, *records] if order == "release first" else [*records, conflicting]
    finding = verify(records)[0]
    assert not finding.ok
    assert finding.message == "s: slot 2: the release and the audit record disagree on eps2 (0.125 against 0.25)"
    agreeing = [*ledger([0.25, 0.25, 0.25], 1.0), *(release_of(r) for r in ledger([0.25, 0.25, 0.25], 1.0))]
    assert verify(agreeing)[0].ok


def test_two_copies_of_a_slot_that_disagree_fail_naming_the_slot_and_the_field():
    records = ledger([0.25, 0.25, 0.25], 1.0)
    audit_copy = {**records[2], "eps1": 0.0625}
    finding = verify([*records, audit_copy])[0]
    assert not finding.ok and finding.message == "s: slot 3: two audit records disagree on eps1 (0.0 against 0.0625)"
    releases = [release_of(r) for r in records]
    finding = verify([*releases, {**releases[0], "release": [9.0, 2.0]}])[0]
    assert not finding.ok and finding.message.startswith("s: slot 1: two release records disagree on release")


def test_a_personalized_release_must_carry_the_charges_of_its_audit_record():
    types = [[2, 1.0, 10], [4, 0.5, 5]]
    audit = {**central(1, 0.1, 0.1), "mechanism": "pba", "types": types, "charges": [0.5, 0.1]}
    release = {**release_of(audit), "extras": {"type_eps1": [0.25, 0.0625], "type_eps2": [0.25, 0.0625]}}
    finding = verify([audit, release])[0]
    assert not finding.ok and "slot 1: the release and the audit record disagree on charges" in finding.message
    release["extras"] = {"type_eps1": [0.25, 0.05], "type_eps2": [0.25, 0.05]}
    assert verify([audit, release])[0].ok


def audit_cli(*args):
    """`wevent audit` of hand-made records, which nobody signed."""
    return subprocess.run([sys.executable, "-m", "wevent.cli", "audit", "--no-verify", *args], capture_output=True,
                          text=True, timeout=60)


def test_the_cli_audits_the_range_asked_and_says_so(tmp_path):
    path = tmp_path / "audit.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ledger([0.5] * 8, 1.0, window=2)[4:]))
    whole = audit_cli(str(path))
    assert whole.returncode == 1 and "the records start at slot 5, not at slot 1" in whole.stdout
    part = audit_cli(str(path), "--from-slot", "5", "--to-slot", "8")
    assert part.returncode == 0 and part.stdout.startswith("PASS s: 4 slots (5..8)") and "(slots 5..8 as asked" in part.stdout


@pytest.mark.parametrize("args, reason", [
    (["--from-slot", "0"], "--from-slot must be an integer >= 1, got 0"),
    (["--to-slot", "x"], "--to-slot must be an integer >= 1, got 'x'"),
    (["--from-slot", "5", "--to-slot", "3"], "--to-slot must be >= --from-slot (5), got 3"),
])
def test_the_cli_checks_the_range_in_one_line(tmp_path, args, reason):
    path = tmp_path / "audit.jsonl"
    path.write_text(json.dumps(ledger([0.5], 1.0)[0]) + "\n")
    run = audit_cli(str(path), *args)
    assert run.returncode == 2 and run.stdout == "" and run.stderr.count("\n") == 1, run.stderr
    assert reason in run.stderr, run.stderr


def test_the_help_says_how_the_audit_compares():
    text = " ".join(audit_cli("--help").stdout.split())
    for words in ("exact rational sums", "there is no tolerance", "an overspend of one ulp fails",
                  "A window is the w consecutive slots ending at a slot", "do not start at the stream's first slot",
                  "two records of one slot that disagree", "naming the slot and the field"):
        assert words in text, words


def test_a_local_ledger_missing_its_first_slots_fails_too():
    records = [record(slot, [(0.5, [1])]) for slot in range(1, 7)]
    assert verify(records)[0].ok
    assert "the records start at slot 3, not at slot 1" in verify(records[2:])[0].message
