"""The written WRB1 specification's test vectors against the codec, both ways, and the JSON form of
watermarks with producer ids against the report schema."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from jsonschema import Draft202012Validator

from wevent.stream.wire import schemas
from wevent.stream.wire.format import DecodeError
from wevent.stream.wire.reports import ReportBatch, Watermark, decode_report_message

SPEC = Path(schemas.__file__).parent / "WRB1.md"
BLOCK = re.compile(r"```wrb1-vector\n(.*?)```", re.S)


def vectors() -> list[tuple[bytes, object]]:
    """(bytes, what they decode to or "refused") of every vector block of the specification."""
    found = []
    for block in BLOCK.findall(SPEC.read_text(encoding="utf-8")):
        lines = block.strip().splitlines()
        assert lines[-1].startswith("=> "), lines[-1]
        data = bytes.fromhex(" ".join(line.split("#")[0] for line in lines[:-1]))
        result = lines[-1][3:]
        found.append((data, result if result == "refused" else json.loads(result)))
    return found


VECTORS = vectors()


def test_the_specification_has_vectors_of_every_kind():
    kinds = [v if v == "refused" else v["kind"] for _, v in VECTORS]
    assert {kind: kinds.count(kind) for kind in set(kinds)} == {"reports": 2, "watermark": 2, "refused": 4}


def as_json(message) -> dict:
    if isinstance(message, Watermark):
        return {"kind": "watermark", "stream": message.stream, "time_ms": round(message.time * 1000),
                "producer": message.producer}
    return {"kind": "reports", "stream": message.stream, "users": message.users.tolist(),
            "values": message.values.tolist(), "times_ms": message.times_ms.tolist()}


def encoded(expected: dict) -> bytes:
    if expected["kind"] == "watermark":
        return Watermark(expected["stream"], expected["time_ms"] / 1000, expected["producer"]).encode_wrb1()
    return ReportBatch(expected["stream"], np.array(expected["users"]), np.array(expected["values"]),
                       np.array(expected["times_ms"])).encode()


@pytest.mark.parametrize("data, expected", VECTORS, ids=[f"vector{i}" for i in range(len(VECTORS))])
def test_a_vector_decodes_to_what_the_specification_says_and_encodes_back(data, expected):
    if expected == "refused":
        with pytest.raises(DecodeError):
            decode_report_message(data)
        return
    assert as_json(decode_report_message(data)) == expected
    assert encoded(expected) == data


def test_the_specification_gives_the_codec_s_header_length():
    """19 + n bytes before a body, as the layout's offsets say (n = 4 for "taxi")."""
    batch = ReportBatch("taxi", np.array([], dtype=np.int64), np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    assert len(batch.encode()) == 19 + 4
    assert len(Watermark("taxi", 1.0).encode_wrb1()) == 20 + 4
    assert len(Watermark("taxi", 1.0, "x" * 64).encode_wrb1()) == 20 + 4 + 64


@pytest.mark.parametrize("producer", ["", " ", "gw 1", "-lead", "é", "x" * 65, 7, None, ["gw"]])
def test_producer_ids_outside_the_rule_are_refused_in_both_forms(producer):
    fields = {"type": "watermark", "version": 1, "stream": "taxi", "time": 60.0, "producer": producer}
    with pytest.raises(DecodeError, match="producer id"):
        decode_report_message(json.dumps(fields).encode())
    assert not validator().is_valid(fields)
    if isinstance(producer, str) and producer:  # in WRB1, an empty id is the anonymous producer's
        name = producer.encode()
        raw = Watermark("taxi", 60.0).encode_wrb1()[:-1] + bytes([len(name)]) + name
        with pytest.raises(DecodeError, match="producer id"):
            decode_report_message(raw)


def validator() -> Draft202012Validator:
    return Draft202012Validator(schemas.load(schemas.TOPIC_SCHEMAS["reports"]))


def test_watermarks_with_and_without_a_producer_match_the_schema_and_decode_alike():
    for producer in (None, "gw-1", "A" * 64, "eu-west.3_b"):
        mark = Watermark("taxi", 1201968359.0, producer)
        assert validator().is_valid(json.loads(mark.encode()))
        assert decode_report_message(mark.encode()) == decode_report_message(mark.encode_wrb1()) == mark
