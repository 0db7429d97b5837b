"""The published JSON Schemas against what the pipeline writes; versions and tolerant readers."""

import json
import struct

import numpy as np
import pytest
from jsonschema import Draft202012Validator

from wevent.core.synthetic import synthetic
from wevent.stream.wire import schemas
from wevent.stream.wire.records import AuditRecord, DeadLetter, ReleaseRecord
from wevent.stream.wire.format import DecodeError
from wevent.stream.wire.messages import TickMessage, pack_message
from wevent.stream.wire.reports import Watermark, decode_report_message, json_report
from wevent.stream.wire.seals import request_seal, seal, unseal
from wevent.stream.config import parse_config
from wevent.producers.device_fleet import SignedRequests
from wevent.stream.settings import Settings
from tests.stream import test_local_pipeline as local
from tests.stream.harness import InProcessPipeline
from tests.stream.test_processors import START, config_for, feed


def validator(topic: str) -> Draft202012Validator:
    schema = schemas.load(schemas.TOPIC_SCHEMAS[topic])
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def envelope_header(message: bytes) -> dict:
    """The JSON header of a sealed binary envelope, read as the schemas' descriptions lay it out
    (written apart from the codec, as a client in another language would)."""
    magic, trailer = message[:5], message[-4:]
    assert magic == b"WEVS1" and trailer == b"WSL1"
    signature_length = struct.unpack_from("<H", message, len(message) - 6)[0]
    assert signature_length == 64  # Ed25519
    header_length, buffers = struct.unpack_from("<II", message, 5)
    sizes = struct.unpack_from(f"<{buffers}Q", message, 13 + header_length)
    body_end = 13 + header_length + 8 * buffers + sum(sizes)
    assert body_end + signature_length + 6 == len(message)
    return json.loads(message[13:13 + header_length])


def assert_valid(topic: str, records: list) -> None:
    check = validator(topic)
    assert records, f"nothing written to {topic}"
    for record in records:
        errors = [e.message for e in check.iter_errors(record)]
        assert not errors, f"{topic}: {errors[:3]} in {str(record)[:300]}"


@pytest.fixture(scope="module")
def central_and_personalized():
    central = InProcessPipeline(config_for(("s", "ba"), ("u", "sample")))
    values = synthetic("sin", 1500, 12, seed=2).values()
    feed(central, "s", values, 12)
    feed(central, "u", values, 12)
    central.inject("reports", b"not a report")  # dead letters of both kinds: undecodable and of a stream
    central.inject("reports", json_report("s", 2**31, START + 1, 1))
    central.run()
    personalized = InProcessPipeline(parse_config({"seed": 11, "report_partitions": 2, "stream_partitions": 1,
                                                   "streams": [{
        "name": "p", "model": "personalized", "mechanism": "pba", "domain": 2, "users": 1200, "slot_seconds": 60,
        "start": START, "options": {"requirements": {"mix": "groups", "epsilon": 0.6, "window": 12, "seed": 3}}}]}))
    feed(personalized, "p", synthetic("sin", 1200, 12, seed=6).values(), 12)
    return central, personalized


@pytest.fixture(scope="module", params=["lpa", "lbu"])
def local_run(request):
    values = synthetic("sin", local.USERS, local.SLOTS, seed=3).values().astype(np.int64)
    return local.run_pipeline(local.local_config(request.param), values)[0]


def test_every_schema_is_valid_draft_2020_12():
    for name in schemas.TOPIC_SCHEMAS.values():
        schema = schemas.load(name)
        Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_central_and_personalized_messages_match_their_schemas(central_and_personalized):
    for pipeline in central_and_personalized:
        assert_valid("releases", [json.loads(v) for v in pipeline.log["releases"]])
        assert_valid("audit", [json.loads(v) for v in pipeline.log["audit"]])
    central = central_and_personalized[0]
    assert_valid("deadletter", [json.loads(v) for v in central.log["deadletter"]])
    assert {json.loads(v)["reason"] for v in central.log["deadletter"]} >= {"malformed"}
    # what producers write: the JSON report form and the watermarks
    watermarks = [json.loads(v) for v in central.log["reports"] if v[:1] == b"{"]
    assert_valid("reports", watermarks + [json.loads(json_report("s", 7, START + 1.5, 1))])
    assert all(record.get("version") == 1 for record in watermarks)


def test_local_messages_match_their_schemas(local_run):
    assert_valid("releases", [json.loads(v) for v in local_run.log["releases"]])
    assert_valid("audit", [json.loads(v) for v in local_run.log["audit"]])
    requests = [envelope_header(v) for v in local_run.log["ldp.requests"]]
    assert_valid("ldp.requests", requests)
    reports = [envelope_header(v) for v in local_run.log["ldp.reports"] if unseal(v)[1] is not None]
    ticks = [TickMessage.decode(v) for v in local_run.log["ldp.reports"] if unseal(v)[1] is None]
    assert_valid("ldp.reports", reports + [{"kind": t.kind, "version": 1, **t.to_fields()} for t in ticks])
    assert {r["kind"] for r in reports} == {"reports"} and all(r["version"] == 1 for r in requests + reports)


def test_the_schemas_refuse_what_readers_refuse():
    release = json.loads(ReleaseRecord("s", 3, [1.0], "publish", "ba", 1.0, 10, 0.1, 0.1, 0.2).to_json())
    assert validator("releases").is_valid(release)
    for broken in ({k: v for k, v in release.items() if k != "slot"}, {**release, "release": "1,2"},
                   {**release, "version": 0}, {**release, "epsilon": -1}):
        assert not validator("releases").is_valid(broken)
    report = json.loads(json_report("s", 7, 1.0, 1))
    assert not validator("reports").is_valid({**report, "user": -1})
    assert not validator("reports").is_valid({"type": "watermark", "stream": "s"})


RELEASE = ReleaseRecord("s", 3, [1.0, 2.0], "publish", "ba", 1.0, 10, 0.1, 0.1, 0.2, extras={"n1": 4})
AUDIT = AuditRecord("s", 3, "lpa", 1.0, 10, 0.5, 0.0, phases=[{"phase": 1, "epsilon": 0.5, "users": None}])
LETTER = DeadLetter("malformed", "reports", "neither a report batch nor JSON", None, {"bytes": 3})


@pytest.mark.parametrize("record", [RELEASE, AUDIT, LETTER], ids=["release", "audit", "deadletter"])
def test_readers_keep_records_with_unknown_fields_and_without_a_version(record):
    written = json.loads(record.to_bytes())
    assert written["version"] == 1
    newer = json.dumps({**written, "added_later": {"any": [1, 2]}, "zeta": None})
    assert type(record).from_json(newer) == record
    older = json.dumps({k: v for k, v in written.items() if k != "version"})
    assert type(record).from_json(older) == record


@pytest.mark.parametrize("version", [2, 0, "1", True])
def test_readers_refuse_versions_they_do_not_know(version):
    for record in (RELEASE, AUDIT, LETTER):
        with pytest.raises(DecodeError, match="version"):
            type(record).from_json(json.dumps({**json.loads(record.to_bytes()), "version": version}))
    with pytest.raises(DecodeError, match="version"):
        decode_report_message(json.dumps({**json.loads(json_report("s", 1, 1.0, 0)), "version": version}).encode())


def test_report_readers_keep_unknown_fields_and_unversioned_messages():
    report = decode_report_message(json.dumps({"stream": "s", "user": 5, "time": 2.0, "value": 1,
                                               "device": "pixel", "version": 1}).encode())
    assert (report.stream, report.users.tolist(), report.values.tolist(), report.times_ms.tolist()) == (
        "s", [5], [1], [2000])
    mark = decode_report_message(json.dumps({"type": "watermark", "stream": "s", "time": 9.5, "origin": "go"}).encode())
    assert mark == Watermark("s", 9.5)


def test_devices_keep_a_signed_request_with_an_unknown_header_field():
    config = local.local_config("lpa")
    signer = request_seal(Settings().noise_key(config))
    reader = SignedRequests("l", signer.public())
    fields = {"stream": "l", "slot": 4, "phase": 1, "epsilon": 0.5, "oracle": "grr", "domain_size": 2,
              "population": local.USERS, "users": None, "bound": None}
    for extra in ({}, {"priority": "high", "trace": np.arange(3)}):
        body = pack_message("request", {**fields, **extra})
        request = reader.read(seal("ldp.requests", "l", body, signer))
        assert request is not None and (request.slot, request.epsilon, request.users) == (4, 0.5, None)
    newer = pack_message("request", fields).replace(b'"version":1', b'"version":2')
    assert reader.read(seal("ldp.requests", "l", newer, signer)) is None
