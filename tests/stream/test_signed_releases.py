"""Releases and audit records anyone can verify: the server signs them (Ed25519, a key derived from
its secret), and readers keep only those that verify under the release public key.

Anyone who can write to the broker can write to ``releases``. A subscriber keeps the first copy of
each slot, so a forged release written before the real one used to be shown and the real one hidden.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from wevent.cli import main
from wevent.core.randomness import SecretKey
from wevent.core.synthetic import synthetic
from wevent.stream.agents.failures import Throttle
from wevent.stream.agents.publish import release_parameters
from wevent.stream.config import ConfigError, parse_config
from wevent.stream.runtime.local_run import MadeWith
from wevent.stream.runtime.subscription import ReleaseReader
from wevent.stream.settings import Settings
from wevent.stream.wire import schemas
from wevent.stream.wire.messages import decode_message
from wevent.stream.wire.records import PublishedRecords, ReleaseRecord
from wevent.stream.wire.seals import release_seal, seal, signing_input, unseal
from tests.stream.harness import InProcessPipeline
from tests.stream.test_processors import START, config_for, feed

ROOT = Path(__file__).resolve().parents[2]
SLOTS = 8
STRANGER = SecretKey.from_seed(999, "someone else")  # a key that is not the server's


@pytest.fixture(scope="module")
def central():
    """A BA stream's genuine messages on ``releases`` and ``audit``, and the release public key."""
    values = synthetic("sin", 600, SLOTS, seed=4).values()
    pipeline = InProcessPipeline(config_for(("s", "ba"), users=600))
    feed(pipeline, "s", values, SLOTS)
    return pipeline, release_seal(Settings().noise_key(pipeline.config)).public()


def without_signature(raw: bytes) -> bytes:
    return raw[:raw.rindex(b',"signature":"')] + b"}"


def one_byte_changed(raw: bytes, field: bytes = b'"release":[') -> bytes:
    """The record with the first digit after ``field`` changed, its signature kept."""
    at = raw.index(field) + len(field)
    digit = next(i for i in range(at, len(raw)) if raw[i:i + 1].isdigit())
    return raw[:digit] + (b"1" if raw[digit:digit + 1] != b"1" else b"2") + raw[digit + 1:]


def forgeries(genuine: list[bytes]) -> dict[int, bytes]:
    """One forgery per kind, each for a slot whose genuine release comes after it: a release
    anyone could write (unsigned, its values a thousand times the real ones), a genuine one with
    one byte changed, one without its signature, and one validly signed under another key."""
    record = json.loads(without_signature(genuine[1]))
    record["release"] = [v * 1000 for v in record["release"]]
    made_up = json.dumps(record, separators=(",", ":"), sort_keys=True).encode()
    other_key = seal("releases", "s", without_signature(genuine[4]), release_seal(STRANGER))
    return {2: made_up, 3: one_byte_changed(genuine[2]), 4: without_signature(genuine[3]), 5: other_key}


def test_a_forgery_before_the_genuine_release_is_dropped_and_counted_and_the_genuine_one_shown(central):
    pipeline, public = central
    genuine = pipeline.log["releases"]
    forged = forgeries(genuine)
    arrivals = [message for slot, raw in enumerate(genuine, start=1) for message in (forged.get(slot), raw) if message]
    reader = ReleaseReader(["s"], key=public)
    shown = [record for record in map(reader.take, arrivals) if record is not None]
    assert [r.to_json() for r in shown] == [r.to_json() for r in pipeline.releases("s")]
    assert reader.published.dropped == {"unsigned": 2, "with an invalid signature": 2}
    assert reader.published.summary() == "4 dropped (2 unsigned, 2 with an invalid signature)"
    # Without a key (`--no-verify`) the reader keeps the first copy of a slot: the two forgeries whose
    # values differ hide the genuine releases of their slots.
    unverified = ReleaseReader(["s"])
    kept = {r.slot: r for r in map(unverified.take, arrivals) if r is not None}
    assert kept[2].release == [v * 1000 for v in shown[1].release] and not unverified.published.dropped
    assert sorted(unverified.conflicts) == [("s", 2), ("s", 3)]


def test_a_release_made_with_other_parameters_is_dropped_by_a_reader_that_expects_its_own(central):
    pipeline, public = central
    reader = ReleaseReader(["s"], key=public, parameters={**pipeline.releases("s")[0].parameters, "domain": 3})
    assert not [r for r in map(reader.take, pipeline.log["releases"]) if r is not None]
    assert reader.published.dropped == {"made with other parameters": SLOTS}


def test_every_change_to_a_signed_record_breaks_its_signature(central):
    """The signature covers every byte the server wrote and binds the topic and the stream."""
    pipeline, public = central
    raw = pipeline.log["audit"][0]
    body, tag = unseal(raw)
    assert public.valid("audit", "s", body, tag)
    assert not public.valid("releases", "s", body, tag) and not public.valid("audit", "t", body, tag)
    for at in range(0, len(body), 7):  # a byte flipped anywhere in the record
        assert not public.valid("audit", "s", body[:at] + bytes([body[at] ^ 1]) + body[at + 1:], tag)


def audit_cli(path, *args):
    return subprocess.run([sys.executable, "-m", "wevent.cli", "audit", str(path), *args], capture_output=True,
                          text=True, timeout=60)


def test_wevent_audit_verifies_the_records_and_drops_forgeries_before_checking_the_budget(central, tmp_path):
    """A forged audit record of slot 3 comes first and spends 50 times epsilon: dropped, counted on
    stderr, and the genuine ledger passes. Unverified, the two copies of slot 3 disagree."""
    pipeline, public = central
    genuine = pipeline.log["audit"]
    record = json.loads(without_signature(genuine[2]))
    forged = json.dumps({**record, "eps2": 50.0}).encode()
    log = tmp_path / "audit.jsonl"
    log.write_bytes(b"\n".join([*genuine[:2], forged, one_byte_changed(genuine[2], b'"eps2":'),
                                *genuine[2:]]) + b"\n")
    verified = audit_cli(log, "--release-key", public.public_hex)
    assert verified.returncode == 0 and verified.stdout.startswith(f"PASS s: {SLOTS} slots"), verified
    assert verified.stderr.splitlines() == [
        f"wevent audit: 2 dropped (1 unsigned, 1 with an invalid signature) of {SLOTS + 2} records "
        f"(checked under release key {public.fingerprint})"]
    unverified = audit_cli(log, "--no-verify")
    assert unverified.returncode == 1 and "slot 3: two audit records disagree on eps2" in unverified.stdout
    under_another_key = audit_cli(log, "--release-key", release_seal(STRANGER).public_hex)
    assert under_another_key.returncode == 2 and under_another_key.stderr.count("\n") == 1
    assert f"no records to audit: {SLOTS + 2} dropped" in under_another_key.stderr


@pytest.mark.parametrize("command", [["subscribe", "-b", "127.0.0.1:1"], ["audit", "{log}"]])
def test_readers_without_a_key_refuse_to_start_unless_told_not_to_verify(tmp_path, monkeypatch, capsys, command):
    monkeypatch.delenv("WEVENT_RELEASE_PUBLIC_KEY", raising=False)
    log = tmp_path / "r.jsonl"
    log.write_text("{}\n")
    argv = [part.format(log=log) for part in command]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--release-key" in err and "WEVENT_RELEASE_PUBLIC_KEY" in err, err
    assert "--no-verify" in err
    assert main([*argv, "--release-key", "abc"]) == 2
    assert "--release-key: a public key must be 64 hexadecimal characters" in capsys.readouterr().err
    assert main([argv[0], "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--no-verify" in help_text and "gives up knowing who wrote them" in help_text


def test_the_schemas_and_readme_give_a_signing_test_vector_that_verifies():
    """What a consumer in Java or Go checks its implementation against: each schema's vector is
    made by the workers' own signer, its signing input is the documented C || B, and the seals
    module's docstring, which spells out the verification for other languages, repeats the release vector."""
    import wevent.stream.wire.seals as seals_module

    readme = seals_module.__doc__
    for name, topic in (("release", "releases"), ("audit", "audit")):
        vector = schemas.load(name)["x-signature-test-vector"]
        private = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(vector["private_key"]))
        public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        assert public.hex() == vector["public_key"]
        message = vector["message"].encode()
        body, tag = unseal(message)
        assert message == body[:-1] + b',"signature":"' + tag.hex().encode() + b'"}'
        record = json.loads(body)
        context = (len(topic).to_bytes(2, "little") + topic.encode() + len(record["stream"]).to_bytes(2, "little")
                   + record["stream"].encode())
        assert bytes.fromhex(vector["signing_input"]) == context + body == signing_input(topic, record["stream"], body)
        assert tag.hex() == vector["signature"] == json.loads(message)["signature"]
        Ed25519PublicKey.from_public_bytes(public).verify(tag, context + body)  # raises if it does not verify
        signer = release_seal(SecretKey.from_hex(bytes(range(32)).hex()))  # the workers' signer, same server key
        assert seal(topic, record["stream"], body, signer) == message and signer.fingerprint == vector["fingerprint"]
        if name == "release":
            for value in (vector["public_key"], vector["message"], vector["signature"]):
                assert value in readme


def stream_of(**changes):
    spec = {"name": "s", "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 10, "domain": 2,
            "users": 600, "slot_seconds": 60, "start": START, **changes}
    return parse_config({"seed": 11, "streams": [spec]})


def made_with(config) -> MadeWith:
    return MadeWith.of(config, config.streams[0], Settings().noise_key(config).hex())


@pytest.mark.parametrize("changes, named", [
    ({"mechanism": "bd"}, "mechanism ba (this run: bd)"),
    ({"epsilon": 0.5}, "epsilon 1 (this run: 0.5)"),
    ({"window": 20}, "w 10 (this run: 20)"),
    ({"domain": 3}, "domain 2 (this run: 3)"),
    ({"users": 700}, "users 600 (this run: 700)"),
    ({"options": {"noise": "laplace-fp-unsafe"}}, "noise discrete (this run: laplace)"),  # the core's name
    ({"options": {"budget_shift": True}}, "options"),
    ({"slot_seconds": 30}, "slot clock (slot 1 starts at"),
    ({"start": START + 60}, "slot clock (slot 1 starts at"),
])
def test_a_release_names_what_it_was_made_with_and_a_run_names_what_differs(central, changes, named):
    pipeline, _ = central
    first = pipeline.releases("s")[0]
    assert made_with(stream_of()).differences(first) == []
    assert first.parameters == release_parameters(pipeline.config.streams[0],
                                                  pipeline.processors.publication.logics["s"].new_mechanism())
    other = made_with(stream_of(**changes))
    differences = other.differences(first)
    assert len(differences) == 1 and differences[0].startswith(named), differences
    assert other.parameters["fingerprint"] != first.parameters["fingerprint"]


def test_options_equal_to_the_defaults_are_the_same_parameters(central):
    """The fingerprint is of what the mechanism is made with, not of how the config spelled it."""
    pipeline, _ = central
    assert made_with(stream_of(options={"budget_shift": False})).differences(pipeline.releases("s")[0]) == []


def test_changed_parameters_are_logged_once_per_stream_and_minute(caplog):
    """M2 refuses a stream's slot each time it arrives under changed parameters (a dead letter each
    time): one log line per stream per minute, the next one saying how many were held back."""
    data = synthetic("sin", 600, 3, seed=5).values()
    pipeline = InProcessPipeline(config_for(("s", "ba"), ("t", "ba"), users=600))
    feed(pipeline, "s", data[:2], 2)
    feed(pipeline, "t", data[:2], 2)
    changed = InProcessPipeline(config_for(("s", "ba"), ("t", "ba"), users=600, epsilon=0.5))
    changed.tables, changed.offsets = pipeline.tables, pipeline.offsets
    now = [0.0]
    changed.processors.publication.refusals = Throttle(60.0, lambda: now[0])
    with caplog.at_level(logging.ERROR, logger="wevent.stream.agents.publish"):
        for name in ("s", "t"):
            stream = changed.config.stream(name)
            changed.send_slot(name, stream.slot_start(3), stream.slot_end(3), np.arange(600), data[2])
        changed.run()
        measured = list(changed.log["dissimilarity"])  # slot 3 of each stream, refused once so far
        assert [decode_message(unseal(m)[0]).stream for m in measured] == ["s", "t"]
        for at in (1.0, 30.0, 59.0, 61.0):  # redelivered (a restart, a rebalance)
            now[0] = at
            for name, message in zip(("s", "t"), measured):
                changed.inject("dissimilarity", message, key=name)
            changed.run()
    lines = [r.getMessage() for r in caplog.records]
    letters = [json.loads(v)["reason"] for v in changed.log["deadletter"]]
    assert letters == ["config_changed"] * 10 and not changed.releases("s")
    assert [line.split(":")[0] for line in lines] == ["stream s", "stream t", "stream s", "stream t"], lines
    assert all("start a new stream under another name" in line for line in lines)
    assert lines[0].endswith("for new parameters)") and lines[2].endswith("; 3 more refused since the last line")


def test_a_worker_refuses_a_release_public_key_that_is_not_its_own(monkeypatch):
    from wevent.stream.agents.base import ServerKeys

    config = config_for(("s", "ba"))
    own = release_seal(Settings().noise_key(config)).public_hex
    assert ServerKeys.from_settings(config, Settings(release_public_key_hex=own)).releases.public_hex == own
    with pytest.raises(ConfigError, match="WEVENT_RELEASE_PUBLIC_KEY .* is not this server's release public key"):
        ServerKeys.from_settings(config, Settings(release_public_key_hex=release_seal(STRANGER).public_hex))


def test_published_records_summary_counts_what_is_not_a_record():
    reader = PublishedRecords(None)
    assert reader.read(b'{"stream":"s","slot":1,"signature":"00"}') == {"stream": "s", "slot": 1}
    assert reader.read(b"not json") is None and reader.read(b"[1]") is None
    assert reader.summary() == "2 dropped (1 not JSON, 1 not a record)"
    assert ReleaseRecord.from_json(b'{"stream":"s","slot":1,"release":[],"strategy":"publish","mechanism":"ba",'
                                   b'"epsilon":1,"window":2,"eps1":0,"eps2":0,"window_spend":0}').parameters is None
