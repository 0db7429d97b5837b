"""M2 under exactly-once: a replayed input re-emits its slot's release only when ``releases`` does
not hold it yet (what committed transactions hold, read newest first), and under at-least-once as
before. The same against Apache Kafka, with workers killed: tests/integration/test_kafka_exactly_once.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from wevent.core.synthetic import synthetic
from wevent.stream.wire.messages import MeasuredMessage, decode_message
from wevent.stream.wire.records import ReleaseRecord
from wevent.stream.wire.seals import unseal
from wevent.stream.wire.topics import AUDIT, MEASUREMENTS, RELEASES
from tests.stream.harness import InProcessPipeline
from tests.stream.test_processors import config_for, feed

SLOTS = 6


@pytest.fixture
def run():
    """Stream ``s`` through 6 slots, and M2's last input (slot 6's measurement) with its offset."""
    pipeline = InProcessPipeline(config_for(("s", "ba"), users=300))
    feed(pipeline, "s", synthetic("sin", 300, SLOTS, seed=3).values(), SLOTS)
    partition = pipeline.partition(MEASUREMENTS, "s")
    inputs = pipeline.log[MEASUREMENTS]
    last = inputs[-1]
    assert decode_message(unseal(last)[0]).slot == SLOTS and isinstance(decode_message(unseal(last)[0]), MeasuredMessage)
    return pipeline, (last, MEASUREMENTS, partition, len(inputs) - 1)


def replay(pipeline, last) -> list:
    """M2 reads its last applied input again, as a worker that took the stream over does."""
    outputs, updates, _ = pipeline.processors.publication.process(*last, pipeline.tables["m2"].get, 0.0)
    pipeline.tables["m2"].update({k: v for k, v in updates.items() if v is not None})
    return outputs


def committed_through(pipeline, slot: int, forged: list[bytes] = ()):
    """A committed log of ``releases`` holding the stream's releases up to ``slot`` (then ``forged``
    records), and the stream names it was asked about."""
    kept = [v for v in pipeline.log[RELEASES] if ReleaseRecord.from_json(unseal(v)[0]).slot <= slot]
    asked = []

    def newest_first(name):
        asked.append(name)
        return reversed([(name.encode(), v) for v in [*kept, *forged]])

    return newest_first, asked


def test_at_least_once_re_emits_the_release_identically(run):
    pipeline, last = run
    outputs = replay(pipeline, last)
    assert sorted(o.topic for o in outputs) == [AUDIT, RELEASES]
    assert next(o.value for o in outputs if o.topic == RELEASES) == pipeline.log[RELEASES][-1]


def test_exactly_once_sends_nothing_the_committed_releases_hold(run):
    pipeline, last = run
    log, asked = committed_through(pipeline, SLOTS)
    pipeline.processors.publication.exactly_once(log)
    assert replay(pipeline, last) == []
    assert replay(pipeline, last) == [] and asked == ["s"]  # read once per takeover


def test_exactly_once_sends_a_release_its_transaction_did_not_commit_once(run):
    pipeline, last = run
    log, asked = committed_through(pipeline, SLOTS - 1)  # the ledger of slot 6 committed, its release did not
    publication = pipeline.processors.publication
    publication.exactly_once(log)
    outputs = replay(pipeline, last)
    assert [o.value for o in outputs if o.topic == RELEASES] == [pipeline.log[RELEASES][-1]]
    assert replay(pipeline, last) == []  # now in this worker's own transaction
    publication.taken_over(["s"])  # another worker owned it meanwhile: ask the log again
    assert [o.topic for o in replay(pipeline, last) if o.topic == RELEASES] == [RELEASES] and asked == ["s", "s"]


def test_a_forged_newer_release_does_not_silence_a_stream(run):
    pipeline, last = run
    genuine = json.loads(unseal(pipeline.log[RELEASES][-1])[0])
    forged = [json.dumps({**genuine, "slot": 99}).encode(),  # no MAC
              json.dumps({**genuine, "slot": 98, "mac": "00" * 32}).encode()]  # a wrong one
    log, _ = committed_through(pipeline, SLOTS - 1, forged)
    pipeline.processors.publication.exactly_once(log)
    assert [o.topic for o in replay(pipeline, last) if o.topic == RELEASES] == [RELEASES]


def test_an_unreadable_log_re_emits_rather_than_loses(run, caplog):
    pipeline, last = run

    def unreachable(name):
        raise TimeoutError("no broker")

    pipeline.processors.publication.exactly_once(unreachable)
    assert [o.topic for o in replay(pipeline, last) if o.topic == RELEASES] == [RELEASES]
    assert "cannot read its committed releases" in caplog.text


def test_new_releases_need_no_look_up(run):
    """Releases sent since the takeover are this worker's own: their replays are not re-emitted,
    and the log is read only for a replay of what a previous owner sent."""
    pipeline, last = run
    log, asked = committed_through(pipeline, 0)
    pipeline.processors.publication.exactly_once(log)
    stream = pipeline.config.stream("s")
    values = synthetic("sin", 300, SLOTS + 2, seed=3).values()
    for slot in (SLOTS + 1, SLOTS + 2):
        pipeline.send_slot("s", stream.slot_start(slot), stream.slot_end(slot), np.arange(300), values[slot - 1])
    pipeline.run()
    assert [ReleaseRecord.from_json(unseal(v)[0]).slot for v in pipeline.log[RELEASES]][-2:] == [7, 8]
    newest = (pipeline.log[MEASUREMENTS][-1], MEASUREMENTS, last[2], len(pipeline.log[MEASUREMENTS]) - 1)
    assert replay(pipeline, newest) == [] and asked == []
