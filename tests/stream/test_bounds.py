"""Bounded state in-process: no input grows a table value past its bound, a backlog costs the same
work per message as no backlog, and a crash between the writes of one input changes nothing."""

from collections import Counter

import numpy as np
import pytest

from wevent.core.synthetic import synthetic
from wevent.stream.agents import base, measure
from wevent.stream.wire.records import DeadLetter
from wevent.stream.wire.messages import PartialMessage, ReportsMessage, TickMessage
from wevent.stream.wire.reports import ReportBatch, Watermark, report_partition
from wevent.stream.wire.seals import report_seal, seal
from wevent.stream.config import ConfigError, parse_config
from wevent.stream.agents.events import Events
from wevent.stream.agents.collect import MAX_EARLY_MESSAGES
from wevent.stream.agents.base import MAX_MESSAGE_BYTES
from wevent.stream.agents.processors import Processors
from wevent.stream.agents.assemble import slots_ahead
from wevent.stream.settings import Settings
from tests.helpers import dead_letters, rejected
from tests.stream.harness import InProcessPipeline, store
from tests.stream.test_local_pipeline import SLOTS as LOCAL_SLOTS
from tests.stream.test_local_pipeline import USERS as LOCAL_USERS
from tests.stream.test_local_pipeline import local_config, run_pipeline
from tests.stream.test_processors import START, config_for, feed, simulated
from wevent.core.registry import mechanisms

PARTITIONS, USERS, SLOTS = 3, 1500, 12


def releases_json(pipeline, stream):
    return [r.to_json() for r in pipeline.releases(stream)]


def largest_value(pipeline) -> int:
    return max(len(v) for table in pipeline.tables.values() for v in table.values())


def two_streams(values):
    pipeline = InProcessPipeline(config_for(("victim", "ba"), ("other", "ba"), partitions=PARTITIONS, users=USERS))
    for stream in ("victim", "other"):
        feed(pipeline, stream, values, SLOTS)
    return pipeline


def test_one_users_9999_future_reports_stay_within_the_horizon_and_change_no_release():
    """The poison batch: one valid user reporting at slots 7..10,005. Only the horizon's slots are
    kept (one key each, of one slot's size); the rest is refused as too_far_ahead; every release of
    either stream equals a clean run's (the forged reports agree with the user's own)."""
    values = synthetic("sin", USERS, SLOTS, seed=2).values()
    clean = two_streams(values)

    poisoned = InProcessPipeline(clean.config)
    user = 7
    slots = np.arange(7, 10_006)
    stream = poisoned.config.stream("victim")
    honest = np.where(slots <= SLOTS, values[np.minimum(slots, SLOTS) - 1, user], 0)
    batch = ReportBatch("victim", np.full(slots.size, user), honest, np.round(stream.start + (slots - 1) * 60.0) * 1000)
    before = rejected("victim", "too_far_ahead")
    poisoned.produce("reports", batch.encode(), partition=int(report_partition(np.array([user]), PARTITIONS)[0]))
    poisoned.run()
    horizon = slots_ahead(stream)
    assert rejected("victim", "too_far_ahead") - before == slots.size - (horizon - 6)
    assembler = poisoned.tables["assembler"]
    assert len(assembler) == 1 + horizon - 6  # the partition's head and one key per kept slot
    assert largest_value(poisoned) < 10_000  # the old single value held all 9,999 slots: 2.95 MB
    for name in ("victim", "other"):
        feed(poisoned, name, values, SLOTS)
    assert releases_json(poisoned, "victim") == releases_json(clean, "victim")
    assert releases_json(poisoned, "other") == releases_json(clean, "other")
    assert largest_value(poisoned) < 10_000


def written_bytes(pipeline, routes) -> list[tuple[str, int]]:
    """Run the pipeline's queue like the harness, returning (topic, bytes written to state) per input."""
    written = []
    while pipeline.queue:
        topic, p, offset, value = pipeline.queue.popleft()
        if topic not in routes:
            continue
        table, processor = routes[topic]
        outputs, updates, _ = processor.process(value, topic, p, offset, pipeline.tables[table].get, 0.0)
        written.append((topic, sum(len(v) for v in updates.values() if v is not None)))
        store(pipeline.tables[table], updates)
        for out in outputs:
            pipeline.produce(out.topic, out.value, out.key)
    return written


@pytest.mark.parametrize("backlog", [20, 1000])
def test_a_backlog_of_closed_slots_costs_no_more_work_per_message(backlog):
    """Every slot's reports and watermarks reach the assembler before M1 measures the first slot
    (a producer far ahead). M1 then holds the whole backlog of partials, and still writes no more
    per message than without a backlog; the releases equal the simulation's."""
    users = 300
    data = synthetic("sin", users, backlog, seed=9)
    values = data.values()
    pipeline = InProcessPipeline(config_for(("s", "ba"), partitions=2, users=users))
    stream = pipeline.config.stream("s")
    for slot in range(1, backlog + 1):
        pipeline.send_slot("s", stream.slot_start(slot), stream.slot_end(slot), np.arange(users), values[slot - 1])
    p = pipeline.processors
    routes = {"reports": ("assembler", p.assembler), "slots": ("m1", p.dissimilarity),
              "releases": ("m1", p.dissimilarity), "dissimilarity": ("m2", p.publication)}
    written = written_bytes(pipeline, routes)
    expected = simulated("ba", np.stack([np.bincount(v, minlength=2) for v in values]).astype(float), "s")
    assert [r.release for r in pipeline.releases("s")] == [result.release.tolist() for result in expected]
    by_topic = {topic: max(size for t, size in written if t == topic) for topic in routes}
    # The work per message is a constant of the stream (a few values of one slot each), not of the backlog.
    assert by_topic["slots"] < 1_500 and by_topic["releases"] < 1_500 and by_topic["reports"] < 1_500, by_topic
    assert len(pipeline.tables["m1"]) == 1 and len(pipeline.tables["assembler"]) == 2  # nothing left behind


def test_a_partial_beyond_the_pending_bound_is_refused_by_m1():
    pipeline = InProcessPipeline(config_for(("s", "ba"), partitions=2, users=300))
    partial = PartialMessage("s", measure.MAX_SLOTS_PENDING + 2, 0, np.zeros((1, 2), dtype=np.int64), 0.0)
    pipeline.inject("slots", pipeline.processors.dissimilarity.keys.sealed(base.Out("slots", partial.encode(), "s")).value,
                    key="s")
    pipeline.run()
    letters = dead_letters(pipeline)
    assert [d.reason for d in letters] == ["out_of_range"]
    assert list(pipeline.tables["m1"]) == ["s"]  # the head, recording the input as read; no partial kept


def two_slot_batches(pipeline, values, slots):
    """Each batch carries the reports of two slots (devices that send late and early at once), so
    that one input writes several keys."""
    stream = pipeline.config.stream("s")
    users = np.arange(values.shape[1])
    for first in range(1, slots + 1, 2):
        pair = [s for s in (first, first + 1) if s <= slots]
        for p in range(PARTITIONS):
            mine = users[report_partition(users, PARTITIONS) == p]
            times = np.concatenate([np.full(mine.size, round(stream.slot_start(s) * 1000)) for s in pair])
            batch = ReportBatch("s", np.tile(mine, len(pair)), np.concatenate([values[s - 1, mine] for s in pair]), times)
            pipeline.produce("reports", batch.encode(), partition=p)
        for s in pair:
            for p in range(PARTITIONS):
                pipeline.produce("reports", Watermark("s", stream.slot_end(s)).encode(), partition=p)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_crash_between_the_keys_of_one_input_changes_no_release_and_rejects_nothing(seed):
    """A crash stores a prefix of an input's writes (the changelog keeps their order), then the
    input is redelivered: the releases equal a clean run's and no report is taken for a duplicate."""
    slots = 24
    values = synthetic("log", 900, slots, seed=7).values()
    config = config_for(("s", "ba"), partitions=PARTITIONS, users=900)
    clean = InProcessPipeline(config)
    two_slot_batches(clean, values, slots)
    clean.run()

    crashy = InProcessPipeline(config)
    two_slot_batches(crashy, values, slots)
    rng = np.random.default_rng(seed)
    p = crashy.processors
    routes = {"reports": ("assembler", p.assembler), "slots": ("m1", p.dissimilarity),
              "releases": ("m1", p.dissimilarity), "dissimilarity": ("m2", p.publication)}
    crashes = 0
    while crashy.queue:
        topic, partition, offset, value = crashy.queue.popleft()
        if topic not in routes:
            continue
        table, processor = routes[topic]
        outputs, updates, _ = processor.process(value, topic, partition, offset, crashy.tables[table].get, 0.0)
        if len(updates) > 1 and rng.random() < 0.3:  # only some of the writes, in each agent's order
            crashes += 1
            if not processor.persist_before_send:  # M2 sends after its writes; the others before
                for out in outputs:
                    crashy.produce(out.topic, out.value, out.key)
            cut = int(rng.integers(0, len(updates)))
            store(crashy.tables[table], dict(list(updates.items())[:cut]))
            crashy.queue.appendleft((topic, partition, offset, value))
            continue
        store(crashy.tables[table], updates)
        for out in outputs:
            crashy.produce(out.topic, out.value, out.key)
    assert crashes > 10
    assert releases_json(crashy, "s") == releases_json(clean, "s")
    assert not crashy.log["deadletter"]


def test_a_stream_whose_messages_could_exceed_the_bound_is_refused_at_start():
    def config(domain=10, users=100, partitions=1, window=5):
        return parse_config({"seed": 1, "report_partitions": partitions, "streams": [
            {"name": "big", "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": window, "domain": domain,
             "users": users, "slot_seconds": 60, "start": START}]})

    with pytest.raises(ConfigError, match=r"stream 'big': its release can reach \d+ bytes, above the 900000 bytes"):
        Processors.build(config(domain=40_000), Settings())  # 40,000 numbers of up to 24 characters
    with pytest.raises(ConfigError, match="one slot's state .* use a smaller domain, window or population, or more "
                                          "report_partitions"):
        Processors.build(config(users=8_000_000), Settings())  # a bit per user: 1 MB
    with pytest.raises(ConfigError, match="its mechanism's state and window of charges"):
        Processors.build(config(window=200_000), Settings())  # a charge per slot of the window
    Processors.build(config(users=8_000_000, partitions=2), Settings())  # half the users on each partition
    Processors.build(config(domain=30_000, window=50_000), Settings())


@pytest.mark.parametrize("mechanism", sorted(n for n, cls in mechanisms().items() if cls.model == "central"))
def test_every_central_mechanisms_state_stays_within_the_bound_checked_at_start(mechanism):
    """M1's and M2's heads, slot after slot, are never larger than what the start-time check sized."""
    values = synthetic("log", 600, 30, seed=3).values()
    pipeline = InProcessPipeline(config_for(("s", mechanism), partitions=2, users=600))
    stream = pipeline.config.stream("s")
    bounds = {"m1": pipeline.processors.dissimilarity.max_state_bytes(stream),
              "m2": pipeline.processors.publication.max_head_bytes(stream)}
    largest = dict.fromkeys(bounds, 0)
    for slot in range(1, 31):
        pipeline.send_slot("s", stream.slot_start(slot), stream.slot_end(slot), np.arange(600), values[slot - 1])
        pipeline.run()
        for table in bounds:
            largest[table] = max(largest[table], len(pipeline.tables[table]["s"]))
    assert len(pipeline.releases("s")) == 30
    assert all(largest[table] <= bounds[table] for table in bounds), (largest, bounds)


def test_a_mechanism_whose_state_could_exceed_the_bound_is_refused_at_start():
    """PeGaSus keeps every bin's open group (raw and noisy counts): 2 x 8 bytes x max_group per bin."""
    def config(**options):
        return parse_config({"seed": 1, "streams": [
            {"name": "big", "model": "central", "mechanism": "pegasus", "epsilon": 1.0, "window": 5, "domain": 2000,
             "users": 100, "slot_seconds": 60, "start": START, "options": options}]})

    with pytest.raises(ConfigError, match="stream 'big': its mechanism's state and window of charges can reach"):
        Processors.build(config(max_group=64), Settings())  # 2 MB
    Processors.build(config(max_group=16), Settings())  # 0.5 MB


def test_an_input_refused_as_too_large_counts_its_refusal_and_nothing_it_would_have_caused(monkeypatch):
    """Its reports were never stored: counting them as accepted (or its dead letters as sent) would
    show operators reports that no slot holds."""
    pipeline = InProcessPipeline(config_for(("s", "ba"), partitions=1, users=300))
    monkeypatch.setattr(base, "MAX_MESSAGE_BYTES", 200)  # below any slot's state
    batch = ReportBatch("s", np.arange(4), np.array([0, 1, 1, 5]), np.full(4, round(START * 1000)))
    outputs, updates, events = pipeline.processors.assembler.process(batch.encode(), "reports", 0, 0, {}.get, 0.0)
    assert [DeadLetter.from_json(out.value).reason for out in outputs] == ["too_large"] and updates == {}
    assert events == Events(dead_letters=Counter({"too_large": 1}))


def test_an_input_whose_state_would_exceed_the_bound_is_refused_and_writes_nothing(monkeypatch):
    values = synthetic("sin", 300, 3, seed=1).values()
    pipeline = InProcessPipeline(config_for(("s", "ba"), partitions=2, users=300))
    monkeypatch.setattr(base, "MAX_MESSAGE_BYTES", 200)  # below any slot's state
    feed(pipeline, "s", values, 1)
    letters = dead_letters(pipeline)
    assert letters and {d.reason for d in letters} == {"too_large"}
    assert "above the bound of 200" in letters[0].detail
    assert not pipeline.tables["assembler"] and not pipeline.log["releases"]


@pytest.mark.parametrize("fields, horizon", [
    ({}, 110), ({"lateness_seconds": 601}, 121), ({"max_slots_ahead": 5, "lateness_seconds": 60}, 16),
    ({"idle_producer_seconds": 0}, 100), ({"idle_producer_seconds": 61}, 102), ({"max_watermark_jump_slots": 4}, 103)])
def test_the_horizon_covers_the_lateness_the_idleness_and_is_configurable(fields, horizon):
    """max_slots_ahead, plus the lateness and the producers' idleness (default 10 slots, at most
    max_watermark_jump_slots - 1) in whole slots."""
    config = parse_config({"seed": 1, "streams": [
        {"name": "s", "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 5, "domain": 2,
         "users": 10, "slot_seconds": 60, "start": START, **fields}]})
    assert slots_ahead(config.stream("s")) == horizon
    assert MAX_MESSAGE_BYTES < 2**20


@pytest.mark.parametrize("value", [0, 10_001, 2.5, "7"])
def test_a_horizon_out_of_range_is_refused_at_load(value):
    with pytest.raises(ConfigError, match="max_slots_ahead"):
        parse_config({"seed": 1, "streams": [
            {"name": "s", "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 5, "domain": 2,
             "users": 10, "slot_seconds": 60, "start": START, "max_slots_ahead": value}]})


def test_reports_that_overtake_their_request_wait_in_keys_of_their_own():
    """Every device answer reaches the collector before its request: the releases equal a run
    where the request comes first, and no waiting key is left behind."""
    values = synthetic("sin", LOCAL_USERS, LOCAL_SLOTS, seed=3).values().astype(np.int64)
    clean, _ = run_pipeline(local_config("lpa"), values)
    early, _ = run_pipeline(local_config("lpa"), values, reports_first=True)
    assert [r.to_json() for r in early.releases("l")] == [r.to_json() for r in clean.releases("l")]
    assert not early.log["deadletter"]
    assert list(early.tables["collector"]) == ["l"]


def test_the_collector_holds_a_bounded_number_of_early_reports():
    """Signed answers to rounds never requested: the first MAX_EARLY_MESSAGES wait (one key each)
    and expire as unrequested after the deadline; the rest are refused at once."""
    config = local_config("lpa")
    pipeline = InProcessPipeline(config)
    devices = report_seal(Settings().device_key(config))
    extra = 44
    for n in range(MAX_EARLY_MESSAGES + extra):
        batch = ReportsMessage("l", 1000 + n, 1, np.arange(3), np.ones(3, dtype=np.int64)).encode()
        pipeline.produce("ldp.reports", seal("ldp.reports", "l", batch, devices), key="l")
    before = rejected("l", "unrequested")
    pipeline.run(now=0.0)
    assert rejected("l", "unrequested") - before == 3 * extra
    assert len(pipeline.tables["collector"]) == 1 + MAX_EARLY_MESSAGES
    pipeline.produce("ldp.reports", TickMessage("l").encode(), key="l")
    pipeline.run(now=1e6)  # every deadline passed
    assert rejected("l", "unrequested") - before == 3 * (MAX_EARLY_MESSAGES + extra)
    assert list(pipeline.tables["collector"]) == ["l"]
