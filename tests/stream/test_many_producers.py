"""Many producers per stream, in-process: each partition's clock is the least watermark of its live
producers, in JSON and WRB1; every report is counted, and the releases are `wevent simulate`'s on
the union of what the producers sent, with 1, 2 and 10 producers (one slow, one that dies, one
that restarts) and across crashes."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client import REGISTRY

from wevent.core.central import BudgetAbsorption
from wevent.core.randomness import DerivedRandomness, SecretKey
from wevent.stream.agents.assemble import MAX_PRODUCERS, AssemblerState
from wevent.stream.config import ConfigError
from wevent.stream.wire.keys import AssemblerKey
from wevent.stream.wire.records import DeadLetter
from wevent.stream.wire.reports import Watermark
from tests.stream.harness import InProcessPipeline, store
from tests.stream.producers import WIRES, Producer, Union, partial_counts
from tests.helpers import stream_config

START = 1_200_000_000.0
USERS, SLOTS, DOMAIN, PARTITIONS, SEED = 300, 24, 4, 3, 11


def config(**fields):
    return stream_config(seed=SEED, report_partitions=PARTITIONS, stream_partitions=2, domain=DOMAIN, users=USERS,
                         start=START, **fields)


def feed_values(seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, DOMAIN, (SLOTS, USERS))


def simulated(union: Union) -> list[list[float]]:
    """What `wevent simulate -m ba --seed 11 --stream s` releases on the union of the producers' data."""
    mechanism = BudgetAbsorption(1.0, 10, DOMAIN, randomness=DerivedRandomness(SecretKey.from_seed(SEED), "s"))
    return [result.release.tolist() for result in mechanism.run(union.counts(DOMAIN).astype(float))]


def sample(name: str, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def reasons(pipeline) -> dict[str, int]:
    """Rejected reports (or watermarks) by reason, from the dead letters."""
    out: dict[str, int] = {}
    for value in pipeline.log["deadletter"]:
        letter = DeadLetter.from_json(value)
        out[letter.reason] = out.get(letter.reason, 0) + (letter.payload or {}).get("count", 1)
    return out


def assert_every_report_counted(pipeline, union: Union, accepted_before: float) -> None:
    """The assemblers' partials are the union's histograms, every slot released as simulate does."""
    assert np.array_equal(partial_counts(pipeline, "s", SLOTS, DOMAIN), union.counts(DOMAIN))
    assert sample("wevent_reports_accepted_total", stream="s") - accepted_before == union.reports
    released = pipeline.releases("s")
    assert [r.slot for r in released] == list(range(1, SLOTS + 1))
    assert [r.release for r in released] == simulated(union)


# --- one producer ----------------------------------------------------------------------------------

@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("name", [None, "solo"])
def test_one_producer_named_or_not_releases_what_it_always_did(wire, name):
    """A single producer, anonymous or named, in either form: the releases of a feed written the
    way the harness always wrote it (JSON watermarks without a producer)."""
    values = feed_values()
    before = InProcessPipeline(config())
    for slot in range(1, SLOTS + 1):
        stream = before.config.stream("s")
        before.send_slot("s", stream.slot_start(slot), stream.slot_end(slot), np.arange(USERS), values[slot - 1])
    before.run()

    pipeline, union = InProcessPipeline(config()), Union(SLOTS, USERS)
    producer = Producer(pipeline, "s", np.arange(USERS), name, wire, union)
    accepted = sample("wevent_reports_accepted_total", stream="s")
    for slot in range(1, SLOTS + 1):
        producer.send(slot, values[slot - 1])
    pipeline.run()
    assert_every_report_counted(pipeline, union, accepted)
    assert [r.to_json() for r in pipeline.releases("s")] == [r.to_json() for r in before.releases("s")]
    assert not pipeline.log["deadletter"]


# --- two producers ---------------------------------------------------------------------------------

@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("lag", [0, 9], ids=["interleaved", "nine-behind"])
def test_two_producers_lose_no_report(wire, lag):
    """Users 0-149 and 150-299, each producer as README says. Interleaved slot by slot, the first
    producer's watermark of a slot used to close it before the second producer's reports came
    (every one of them late); the same with the second nine slots behind (within the idleness of ten)."""
    values = feed_values()
    pipeline, union = InProcessPipeline(config()), Union(SLOTS, USERS)
    first, second = (Producer(pipeline, "s", users, name, wire, union)
                     for users, name in ((np.arange(150), "app-1"), (np.arange(150, 300), "app-2")))
    for producer in (first, second):  # both start: their first watermarks reach every partition
        producer.watermark(START)
    accepted = sample("wevent_reports_accepted_total", stream="s")
    for tick in range(1, SLOTS + lag + 1):
        if tick <= SLOTS:
            first.send(tick, values[tick - 1])
        if tick - lag >= 1:
            second.send(tick - lag, values[tick - lag - 1])
    pipeline.run()
    assert union.reports == SLOTS * USERS
    assert reasons(pipeline) == {}  # nothing late
    assert_every_report_counted(pipeline, union, accepted)


# --- ten producers ---------------------------------------------------------------------------------

LAG, DIES, RESTART, DOWN = 4, 9, 12, 4


def ten_producers(pipeline, wire: str) -> tuple[Union, int]:
    """Ten producers of users u mod 10 == k, sending slot by slot in turn: seven in step, one four
    slots behind, one that dies after slot 9 (having sent slot 10's reports to partition 0 only),
    and one that crashes after slot 12's reports (no watermark) and comes back four slots later
    under its id, sending slot 13 again. The union and the reports sent twice."""
    values = feed_values()
    union = Union(SLOTS, USERS)
    users = [np.arange(k, USERS, 10) for k in range(10)]
    names = [f"gw-{k}" for k in range(10)]
    producers = [Producer(pipeline, "s", users[k], names[k], wire, union) for k in range(10)]
    for producer in producers:
        producer.watermark(START)
    again = 0
    for tick in range(1, SLOTS + LAG + 1):
        for k, producer in enumerate(producers):
            if k < 7 and tick <= SLOTS:
                producer.send(tick, values[tick - 1])
            elif k == 7 and 1 <= tick - LAG <= SLOTS:  # slow
                producer.send(tick - LAG, values[tick - LAG - 1])
            elif k == 8 and tick <= DIES:
                producer.send(tick, values[tick - 1])
            elif k == 8 and tick == DIES + 1:  # dies mid-slot
                producer.reports(tick, values[tick - 1], partitions=[0])
            elif k == 9 and tick <= RESTART:
                producer.send(tick, values[tick - 1])
            elif k == 9 and tick == RESTART + 1:  # crashes mid-slot: reports out, no watermark
                producer.reports(tick, values[tick - 1])
            elif k == 9 and tick == RESTART + 1 + DOWN:  # back under its id, from slot 13 again
                producers[9] = restarted = Producer(pipeline, "s", users[9], names[9], wire, union)
                again = users[9].size
                for slot in range(RESTART + 1, tick + 1):
                    restarted.send(slot, values[slot - 1])
            elif k == 9 and RESTART + 1 + DOWN < tick <= SLOTS:
                producer.send(tick, values[tick - 1])
    return union, again


@pytest.mark.parametrize("wire", WIRES)
def test_ten_producers_one_slow_one_dead_one_restarted_lose_no_report(wire):
    pipeline = InProcessPipeline(config())
    accepted = sample("wevent_reports_accepted_total", stream="s")
    union, again = ten_producers(pipeline, wire)
    pipeline.run()
    dead = np.arange(8, USERS, 10)
    assert (union.values[DIES:, dead] != -1).sum() == (dead % PARTITIONS == 0).sum()  # slot 10, partition 0 only
    assert reasons(pipeline) == {"duplicate": again}  # slot 13 of the restarted producer, sent twice
    assert_every_report_counted(pipeline, union, accepted)
    # the dead producer was dropped once the others were ten slots past it; the rest are live
    for p in range(PARTITIONS):
        head = AssemblerState.unpack(pipeline.tables["assembler"][AssemblerKey("s", p).encode()])
        assert sorted(head.producers) == [f"gw-{k}" for k in range(10) if k != 8]
        assert head.watermark == head.producers["gw-7"] == START + SLOTS * 60


@pytest.mark.parametrize("seed", [0, 1])
def test_ten_producers_through_crashes_release_the_same(seed):
    """The ten producers' messages with crashes in the worker: at random inputs the assembler's
    outputs leave but its state is lost (the input comes again), and twice its table goes back to
    an earlier copy whose inputs are all read again (a worker restored from a changelog). Every
    partial, release and the final table are a clean run's."""
    clean = InProcessPipeline(config())
    union, _ = ten_producers(clean, "wrb1")
    clean.run()

    crashy = InProcessPipeline(config())
    ten_producers(crashy, "wrb1")
    rng = np.random.default_rng(seed)
    routes = crashy.routes
    reports = list(crashy.queue)
    restore_at = set(rng.choice(len(reports), 2, replace=False).tolist())
    snapshot, since, read = dict(crashy.tables["assembler"]), 0, 0
    crashes = 0
    while crashy.queue:
        topic, p, offset, value = crashy.queue.popleft()
        if topic not in routes:
            continue
        table_name, processor = routes[topic]
        table = crashy.tables[table_name]
        outputs, updates, _ = processor.process(value, topic, p, offset, table.get, 0.0)
        if topic == "reports" and rng.random() < 0.1:
            crashes += 1
            for out in outputs:  # delivered before the state, which is lost
                crashy.produce(out.topic, out.value, out.key)
            crashy.queue.appendleft((topic, p, offset, value))
            continue
        store(table, updates)
        for out in outputs:
            crashy.produce(out.topic, out.value, out.key)
        if topic == "reports":
            read += 1
            if read % 200 == 0:
                snapshot, since = dict(table), read
            if read in restore_at:  # back to the copy, and everything since read again
                crashy.tables["assembler"] = table = dict(snapshot)
                crashy.queue.extendleft(reversed(reports[since:read]))
                restore_at.discard(read)
                read = since
    assert crashes > 50
    assert np.array_equal(partial_counts(crashy, "s", SLOTS, DOMAIN), union.counts(DOMAIN))
    assert [r.to_json() for r in crashy.releases("s")] == [r.to_json() for r in clean.releases("s")]
    assert crashy.tables["assembler"] == clean.tables["assembler"]


# --- idleness --------------------------------------------------------------------------------------

@pytest.mark.parametrize("wire", WIRES)
def test_a_producer_silent_past_the_idleness_stops_holding_the_clock_and_is_late(wire):
    """Idleness three slots: the second producer goes quiet after slot 4 while the first goes on.
    Once the first is past slot 7 the second no longer holds the clock; when it comes back and sends
    slots 5..12 at once, those reports are late (counted, dead-lettered), and from its next
    watermark within the idleness on it holds the clock again: its slots 13.. count."""
    values = feed_values()
    pipeline, union = InProcessPipeline(config(idle_producer_seconds=180)), Union(SLOTS, USERS)
    first, second = (Producer(pipeline, "s", users, name, wire, union)
                     for users, name in ((np.arange(150), "a"), (np.arange(150, 300), "b")))
    for producer in (first, second):
        producer.watermark(START)
    for slot in range(1, 5):
        first.send(slot, values[slot - 1])
        second.send(slot, values[slot - 1])
    for slot in range(5, 13):
        first.send(slot, values[slot - 1])
    pipeline.run()
    assert len(pipeline.releases("s")) == 12  # not waiting for the quiet one
    for slot in range(5, 13):
        second.send(slot, values[slot - 1])
    for slot in range(13, SLOTS + 1):
        first.send(slot, values[slot - 1])
        second.send(slot, values[slot - 1])
    pipeline.run()
    union.values[4:12, 150:] = -1  # what came after its slots closed is not in any release
    assert reasons(pipeline) == {"late": 150 * 8}
    released = pipeline.releases("s")
    assert [r.release for r in released] == simulated(union)
    assert np.array_equal(partial_counts(pipeline, "s", SLOTS, DOMAIN), union.counts(DOMAIN))


def test_a_producer_unknown_to_a_partition_holds_nothing_back():
    """Without its first watermark, a second producer's first slot is late once the first producer
    closed it: the reason producers announce themselves before their first report."""
    values = feed_values()
    pipeline, union = InProcessPipeline(config()), Union(SLOTS, USERS)
    first, second = (Producer(pipeline, "s", users, name, "wrb1", union)
                     for users, name in ((np.arange(150), "a"), (np.arange(150, 300), "b")))
    first.send(1, values[0])
    second.send(1, values[0])
    first.send(2, values[1])
    second.send(2, values[1])
    pipeline.run()
    assert reasons(pipeline) == {"late": 150}  # slot 1 only: from then on the partition waits for it
    assert [r.slot for r in pipeline.releases("s")] == [1, 2]


# --- bounds ----------------------------------------------------------------------------------------

def test_a_partition_keeps_at_most_max_producers_and_refuses_one_more():
    pipeline = InProcessPipeline(config())
    names = [f"{k:03d}-" + "x" * 60 for k in range(MAX_PRODUCERS + 1)]  # ids of the longest length, 64
    before = sample("wevent_reports_rejected_total", stream="s", reason="too_many_producers")
    for name in names:
        pipeline.produce("reports", Watermark("s", START, name).encode_wrb1(), partition=0)
    pipeline.produce("reports", Watermark("s", START + 60, names[-1]).encode_wrb1(), partition=0)
    pipeline.run()
    head_bytes = pipeline.tables["assembler"][AssemblerKey("s", 0).encode()]
    head = AssemblerState.unpack(head_bytes)
    assert sorted(head.producers) == names[:-1]
    assert len(head_bytes) < 10_000  # the bound MAX_PRODUCERS states
    letters = [DeadLetter.from_json(v) for v in pipeline.log["deadletter"]]
    assert [d.reason for d in letters] == ["too_many_producers"] * 2 and names[-1] in letters[0].detail
    assert sample("wevent_reports_rejected_total", stream="s", reason="too_many_producers") - before == 2
    # once the others are idle (the newcomer ten slots ahead of them all), there is room again
    pipeline.produce("reports", Watermark("s", START + 660, names[0]).encode_wrb1(), partition=0)
    pipeline.produce("reports", Watermark("s", START + 660, names[-1]).encode_wrb1(), partition=0)
    pipeline.run()
    head = AssemblerState.unpack(pipeline.tables["assembler"][AssemblerKey("s", 0).encode()])
    assert sorted(head.producers) == [names[0], names[-1]] and head.watermark == START + 660
    assert len(pipeline.log["slots"]) == 11  # partition 0 closed slots 1..11


@pytest.mark.parametrize("fields, message", [
    ({"idle_producer_seconds": -1}, "idle_producer_seconds"), ({"idle_producer_seconds": "60"}, "idle_producer_seconds"),
    ({"idle_producer_seconds": float("nan")}, "idle_producer_seconds"),
    ({"idle_producer_seconds": 3541}, "more than max_watermark_jump_slots - 1 = 59 slots"),
    ({"idle_producer_seconds": 121, "max_watermark_jump_slots": 3}, "max_watermark_jump_slots - 1 = 2 slots")])
def test_the_idleness_is_checked_by_type_range_and_against_the_watermark_bound(fields, message):
    with pytest.raises(ConfigError, match=message):
        config(**fields)


@pytest.mark.parametrize("fields, idle", [({}, 600.0), ({"idle_producer_seconds": 0}, 0.0),
                                          ({"idle_producer_seconds": 3540}, 3540.0),
                                          ({"max_watermark_jump_slots": 5}, 240.0),
                                          ({"max_watermark_jump_slots": 1}, 0.0)])
def test_the_default_idleness_is_ten_slots_within_the_watermark_bound(fields, idle):
    assert config(**fields).stream("s").idle_seconds == idle
