"""The audit reads the message versions the writers stamp, as every other reader does."""

import json
import subprocess
import sys

import pytest

from wevent.stream.audit import MalformedRecord, verify
from wevent.stream.wire.format import FORMAT_VERSION
from wevent.stream.wire.records import AuditRecord


def written(slot: int, eps2: float = 0.25) -> dict:
    """An audit record as a worker of this version writes it."""
    return json.loads(AuditRecord("s", slot, "ba", 1.0, 2, 0.25, eps2).to_json())


def before_versions(record: dict) -> dict:
    """The same record as a worker wrote it before messages carried a version."""
    return {k: v for k, v in record.items() if k != "version"}


def test_a_slot_re_emitted_across_the_upgrade_is_one_record():
    # a worker restarted on the new version re-emits its last slot: the same record, now versioned
    old = [before_versions(written(slot)) for slot in (1, 2)]
    assert "version" not in old[0] and written(2)["version"] == FORMAT_VERSION
    findings = verify([*old, written(2), written(3)])
    assert [(f.ok, f.message) for f in findings] == [
        (True, "s: 3 slots (1..3), max window spend 1 <= epsilon 1 (w = 2)")]


def test_a_version_change_is_still_a_conflict_when_the_charges_differ():
    findings = verify([before_versions(written(1)), written(1, eps2=0.5)])
    assert [f.message for f in findings] == ["s: slot 1: two audit records disagree on eps2 (0.25 against 0.5)"]


@pytest.mark.parametrize("version", [FORMAT_VERSION + 1, 0, "1", True, None])
def test_a_record_of_a_version_this_audit_does_not_know_is_refused(version):
    # a newer writer may have changed what a charge means: verifying it as today's would
    # pass or fail windows on a reading of its fields it may not have
    records = [written(1), {**written(2), "version": version}]
    with pytest.raises(MalformedRecord, match=f"record 2: message version {version!r};"):
        verify(records)


def test_the_cli_refuses_it_in_one_line(tmp_path):
    log = tmp_path / "audit.jsonl"
    log.write_text("\n".join(json.dumps({**written(s), "version": FORMAT_VERSION + 1}) for s in (1, 2)) + "\n")
    run = subprocess.run([sys.executable, "-m", "wevent.cli", "audit", "--no-verify", str(log)], capture_output=True,
                         text=True)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.strip().splitlines() == [
        f"wevent audit: error: not release or audit records: record 1: message version {FORMAT_VERSION + 1}; "
        f"this reader reads versions 1 to {FORMAT_VERSION}"]
