"""The edges of the assembler (and the collector's malformed input) in-process: partition
ownership, dead letters without raw bytes, and watermarks that jump too far."""

import hashlib
import json

import numpy as np
import pytest

from wevent.core.synthetic import synthetic
from wevent.stream.wire.records import DeadLetter
from wevent.stream.wire.messages import PartialMessage, ReportsMessage, pack_message
from wevent.stream.wire.reports import ReportBatch, Watermark, report_partition
from wevent.stream.config import parse_config
from wevent.stream.settings import Settings
from tests.helpers import dead_letters, rejected
from tests.stream.harness import InProcessPipeline
from tests.stream.test_processors import START, config_for, feed

PARTITIONS, USERS, SLOTS = 3, 1500, 20


def releases_json(pipeline, stream="s"):
    return [r.to_json() for r in pipeline.releases(stream)]


def clean_run(values, mechanism="uniform", slots=SLOTS):
    pipeline = InProcessPipeline(config_for(("s", mechanism), partitions=PARTITIONS, users=USERS))
    feed(pipeline, "s", values, slots)
    return pipeline


def test_a_report_on_a_partition_that_does_not_own_its_user_is_refused():
    # Users 1000.. never report in the clean run; user 1001 (owned by partition 2) reports on 0 and 1.
    values = synthetic("sin", USERS, SLOTS, seed=1).values()[:, :1000]
    clean = clean_run(values)
    dirty = InProcessPipeline(config_for(("s", "uniform"), partitions=PARTITIONS, users=USERS))
    stream = dirty.config.stream("s")
    stranger = 1001
    wrong = [p for p in range(PARTITIONS) if p != report_partition(np.array([stranger]), PARTITIONS)[0]]
    before = rejected("s", "wrong_partition")
    for slot in range(1, SLOTS + 1):
        t0 = round(stream.slot_start(slot) * 1000)
        for p in wrong:
            dirty.produce("reports", ReportBatch("s", np.array([stranger]), np.array([1]), np.array([t0])).encode(),
                          partition=p)
        dirty.send_slot("s", stream.slot_start(slot), stream.slot_end(slot), np.arange(1000), values[slot - 1])
    dirty.run()
    assert releases_json(dirty) == releases_json(clean)  # Uniform publishes every slot: any count would show
    letters = dead_letters(dirty)
    assert {d.reason for d in letters} == {"wrong_partition"} and len(letters) == len(wrong) * SLOTS
    assert all(d.payload["users"] == [stranger] for d in letters)  # a central stream keeps a sample
    assert rejected("s", "wrong_partition") - before == len(wrong) * SLOTS


def test_a_user_sent_to_every_partition_is_counted_once():
    """A producer that broadcasts every batch to every partition: each user is still counted once
    per slot, and the releases are the clean run's."""
    values = synthetic("log", USERS, SLOTS, seed=2).values()
    clean = clean_run(values, "ba")
    dirty = InProcessPipeline(config_for(("s", "ba"), partitions=PARTITIONS, users=USERS))
    stream = dirty.config.stream("s")
    for slot in range(1, SLOTS + 1):
        batch = ReportBatch("s", np.arange(USERS), values[slot - 1], np.full(USERS, round(stream.slot_start(slot) * 1000)))
        for p in range(PARTITIONS):
            dirty.produce("reports", batch.encode(), partition=p)
            dirty.produce("reports", Watermark("s", stream.slot_end(slot)).encode(), partition=p)
    dirty.run()
    partials = [PartialMessage.decode(v) for v in dirty.log["slots"]]
    per_slot = {}
    for partial in partials:
        per_slot[partial.slot] = per_slot.get(partial.slot, 0) + int(partial.counts.sum())
    assert per_slot == {slot: USERS for slot in range(1, SLOTS + 1)}
    assert releases_json(dirty) == releases_json(clean)
    wrong = [d.payload["count"] for d in dead_letters(dirty) if d.reason == "wrong_partition"]
    assert sum(wrong) == (PARTITIONS - 1) * USERS * SLOTS


def local_and_central_config():
    common = {"epsilon": 1.0, "window": 5, "domain": 4, "users": 300, "slot_seconds": 60, "start": START}
    return parse_config({"seed": 5, "report_partitions": 2, "stream_partitions": 1, "streams": [
        {"name": "l", "model": "local", "mechanism": "lpa", **common},
        {"name": "c", "model": "central", "mechanism": "ba", **common}]})


def keyed_digest(config, raw: bytes) -> str:
    """The digest a dead letter may keep: BLAKE2b-128 keyed with the server's secret."""
    return hashlib.blake2b(raw, key=bytes(Settings().noise_key(config).derive("deadletter-digest")), digest_size=16, person=b"wevent-dlq-v1").hexdigest()


def test_dead_letters_of_unreadable_or_local_input_carry_no_raw_bytes():
    config = local_and_central_config()
    pipeline = InProcessPipeline(config)
    t0 = round(START * 1000)
    users, values = np.arange(0, 300, 2), np.arange(150) % 4  # all on partition 0
    local_batch = ReportBatch("l", users, values, np.full(users.size, t0)).encode()
    truncated = local_batch[:-1]
    local_json = json.dumps({"stream": "l", "user": 17, "value": 3}).encode()  # no time: malformed
    ldp_garbage = pack_message("reports", {"stream": "l", "slot": 1})[:-3]
    pipeline.produce("reports", truncated, partition=0)
    pipeline.produce("reports", local_json, partition=1)
    pipeline.produce("reports", local_batch, partition=0)  # well formed, but raw values for a local stream
    pipeline.produce("ldp.reports", ldp_garbage, key="l")
    pipeline.produce("reports", ReportBatch("c", np.array([2]), np.array([9]), np.array([t0])).encode(), partition=0)
    pipeline.run()
    letters = {(d.reason, d.topic, d.stream): d for d in dead_letters(pipeline)}
    assert set(letters) == {("malformed", "reports", None), ("raw_value_for_local_stream", "reports", "l"),
                            ("malformed", "ldp.reports", None), ("out_of_domain", "reports", "c")}
    malformed = [d for d in dead_letters(pipeline) if d.reason == "malformed"]
    assert [d.payload for d in malformed] == [{"bytes": len(raw), "blake2b_128": keyed_digest(config, raw)}
                                              for raw in (truncated, local_json, ldp_garbage)]
    assert letters[("raw_value_for_local_stream", "reports", "l")].payload is None
    # nothing of the raw bytes, in hex or as text, in any dead letter of an unknown or local stream
    for value in pipeline.log["deadletter"]:
        letter = DeadLetter.from_json(value)
        if letter.stream in (None, "l"):
            assert truncated[-64:].hex() not in value.decode() and b'"value": 3' not in value
            assert not set(letter.payload or {}) - {"bytes", "blake2b_128"}
    # a central stream's server is trusted with raw values: its dead letter keeps the rejected report
    central = letters[("out_of_domain", "reports", "c")].payload
    assert (central["users"], central["values"]) == ([2], [9])


def test_the_detail_of_a_malformed_batch_quotes_none_of_its_bytes():
    pipeline = InProcessPipeline(local_and_central_config())
    raw = bytearray(ReportBatch("l", np.array([4]), np.array([200]), np.array([0])).encode())
    raw[4] = 20  # a corrupt name length: the "name" runs into the raw value 200 (0xc8, not UTF-8)
    pipeline.produce("reports", bytes(raw), partition=0)
    pipeline.run()
    [letter] = dead_letters(pipeline)
    assert letter.reason == "malformed" and "c8" not in letter.detail.lower()


@pytest.mark.parametrize("field, corrupt", [(b'"stream":"l"', b'"stream":"\x82"'),  # not UTF-8
                                            (b'"dtype":"<i8"', b'"dtype":"|O8"')])  # an object array
def test_a_corrupt_ldp_envelope_is_dead_lettered_as_malformed_by_the_collector(field, corrupt):
    config = local_and_central_config()
    pipeline = InProcessPipeline(config)
    envelope = ReportsMessage("l", 1, 1, np.array([1, 2]), np.array([0, 1])).encode()
    raw = envelope.replace(field, corrupt, 1)
    assert len(raw) == len(envelope) and raw != envelope
    before = rejected("", "malformed")
    pipeline.produce("ldp.reports", raw, key="l")
    pipeline.run()
    [letter] = dead_letters(pipeline)
    assert (letter.reason, letter.payload) == ("malformed", {"bytes": len(raw), "blake2b_128": keyed_digest(config, raw)})
    assert rejected("", "malformed") - before == 1


def test_a_watermark_jumping_too_far_is_refused_and_changes_no_release():
    slots, forged_at = 30, 10
    values = synthetic("sin", USERS, slots, seed=3).values()
    clean = clean_run(values, "ba", slots)
    dirty = InProcessPipeline(config_for(("s", "ba"), partitions=PARTITIONS, users=USERS))
    stream = dirty.config.stream("s")
    before = rejected("s", "watermark_too_far_ahead")
    for slot in range(1, slots + 1):
        if slot == forged_at + 1:  # partition 0 has closed slot 10: this one would close 11..71 at once
            far = stream.slot_end(forged_at + stream.max_watermark_jump_slots + 1)
            dirty.produce("reports", Watermark("s", far).encode(), partition=0)
        dirty.send_slot("s", stream.slot_start(slot), stream.slot_end(slot), np.arange(USERS), values[slot - 1])
    dirty.run()
    assert releases_json(dirty) == releases_json(clean)
    letters = dead_letters(dirty)
    assert [d.reason for d in letters] == ["watermark_too_far_ahead"] and letters[0].stream == "s"
    assert rejected("s", "watermark_too_far_ahead") - before == 1


@pytest.mark.parametrize("bound", [None, 5])
def test_a_watermark_may_close_up_to_the_bound_at_once_and_no_more(bound):
    config = config_for(("s", "uniform"), partitions=1, users=10)
    if bound is not None:  # the stream's own `max_watermark_jump_slots` instead of the default 60
        raw = {"seed": 11, "report_partitions": 1, "stream_partitions": 2, "streams": [
            {"name": "s", "model": "central", "mechanism": "uniform", "epsilon": 1.0, "window": 10, "domain": 2,
             "users": 10, "slot_seconds": 60, "start": START, "max_watermark_jump_slots": bound}]}
        config = parse_config(raw)
    pipeline = InProcessPipeline(config)
    stream = pipeline.config.stream("s")
    limit = stream.max_watermark_jump_slots
    assert limit == (bound or 60)

    def closed_after(slot_end_of):
        pipeline.produce("reports", Watermark("s", stream.slot_end(slot_end_of)).encode(), partition=0)
        pipeline.run()
        return max(PartialMessage.decode(v).slot for v in pipeline.log["slots"]) if pipeline.log["slots"] else 0

    assert closed_after(limit) == limit  # from the stream's start: exactly the bound
    assert closed_after(2 * limit + 1) == limit  # one slot more than the bound: refused, clock unmoved
    assert [d.reason for d in dead_letters(pipeline)] == ["watermark_too_far_ahead"]
    assert closed_after(2 * limit) == 2 * limit  # the producer steps: accepted again
    assert len(pipeline.releases("s")) == 2 * limit
