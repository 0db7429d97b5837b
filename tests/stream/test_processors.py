"""The processors in-process: parity with `simulate`, bad input, and replays after a crash."""

import json

import numpy as np
import pytest

from wevent.core.central import BudgetAbsorption, BudgetDistribution, Sample, Uniform
from wevent.core.randomness import DerivedRandomness, SecretKey
from wevent.core.synthetic import synthetic
from wevent.stream.wire.records import ReleaseRecord
from wevent.stream.wire.reports import ReportBatch, Watermark
from wevent.stream.config import parse_config
from tests.helpers import dead_letters
from tests.stream.harness import InProcessPipeline

START = 1_200_000_000.0
MECHANISMS = {"bd": BudgetDistribution, "ba": BudgetAbsorption, "uniform": Uniform, "sample": Sample}
# The benchmark's mechanisms (tests/stream/test_central_mechanisms.py), the grouped ones with a group per bin.
BENCHMARK = ["fast-w", "rescuedp", "dsat", "pegasus", "adapub", "bd-grouped", "ba-grouped"]
OPTIONS = {"bd-grouped": {"groups": 2, "period": 3}, "ba-grouped": {"groups": 2, "period": 3}}


def config_for(*streams, partitions=3, users=1500, domain=2, window=10, epsilon=1.0):
    return parse_config({
        "seed": 11, "report_partitions": partitions, "stream_partitions": 2,
        "streams": [{"name": name, "model": "central", "mechanism": mech, "epsilon": epsilon, "window": window,
                     "domain": domain, "users": users, "slot_seconds": 60, "start": START,
                     "options": OPTIONS.get(mech, {})} for name, mech in streams],
    })


def feed(pipeline, stream, values, slots):
    config = pipeline.config.stream(stream)
    for slot in range(1, slots + 1):
        pipeline.send_slot(stream, config.slot_start(slot), config.slot_end(slot), np.arange(values.shape[1]), values[slot - 1])
    pipeline.run()


def simulated(mechanism, counts, stream, seed=11, window=10, epsilon=1.0):
    m = MECHANISMS[mechanism](epsilon, window, counts.shape[1], randomness=DerivedRandomness(SecretKey.from_seed(seed), stream))
    return m.run(counts)


@pytest.mark.parametrize("mechanism", ["bd", "ba", "uniform", "sample"])
def test_releases_equal_simulate(mechanism):
    data = synthetic("sin", 1500, 40, seed=2)
    pipeline = InProcessPipeline(config_for(("s", mechanism)))
    feed(pipeline, "s", data.values(), 40)
    got = pipeline.releases("s")
    expected = simulated(mechanism, data.counts.astype(float), "s")
    assert [r.slot for r in got] == list(range(1, 41))
    for record, result in zip(got, expected):
        assert record.release == result.release.tolist()
        assert record.strategy == result.strategy.value and record.eps2 == result.eps2


def test_bad_input_is_counted_dead_lettered_and_changes_nothing():
    data = synthetic("log", 1500, 12, seed=3)
    values = data.values()
    clean = InProcessPipeline(config_for(("s", "ba")))
    feed(clean, "s", values, 12)

    dirty = InProcessPipeline(config_for(("s", "ba")))
    stream = dirty.config.stream("s")
    for slot in range(1, 13):
        t0 = round(stream.slot_start(slot) * 1000)
        dirty.produce("reports", b"\x00garbage", partition=0)
        dirty.produce("reports", ReportBatch("nope", np.array([1]), np.array([0]), np.array([t0])).encode(), partition=1)
        dirty.produce("reports", ReportBatch("s", np.array([3]), np.array([7]), np.array([t0])).encode(), partition=0)  # d = 2
        dirty.produce("reports", ReportBatch("s", np.array([99999]), np.array([0]), np.array([t0])).encode(), partition=0)
        dirty.send_slot("s", stream.slot_start(slot), stream.slot_end(slot), np.arange(1500), values[slot - 1])
        # the same user again in the closed... no: in the same slot, after its first report
        dirty.produce("reports", ReportBatch("s", np.array([5]), np.array([1]), np.array([t0])).encode(), partition=2)
        dirty.produce("reports", json.dumps({"stream": "s", "user": 6, "time": stream.slot_start(slot) / 1.0, "value": 1}).encode(),
                      partition=0)
        dirty.produce("reports", b'{"stream": "s", "user": "x"}', partition=1)
    dirty.run()
    assert [r.to_json() for r in dirty.releases("s")] == [r.to_json() for r in clean.releases("s")]
    reasons = {}
    for letter in dead_letters(dirty):
        reasons[letter.reason] = reasons.get(letter.reason, 0) + 1
    # per slot: garbage + bad JSON (malformed), unknown stream, out of domain, unknown user,
    # and two late reports (after the slot's watermark: the duplicate user 5 and the JSON report)
    assert reasons == {"malformed": 24, "unknown_stream": 12, "out_of_domain": 12, "unknown_user": 12, "late": 24}


def test_duplicates_within_an_open_slot_are_rejected():
    pipeline = InProcessPipeline(config_for(("s", "uniform"), partitions=1, users=10))
    stream = pipeline.config.stream("s")
    t0 = round(stream.slot_start(1) * 1000)
    pipeline.produce("reports", ReportBatch("s", np.array([1, 1, 2]), np.array([0, 1, 1]), np.full(3, t0)).encode(), partition=0)
    pipeline.produce("reports", ReportBatch("s", np.array([2]), np.array([0]), np.array([t0])).encode(), partition=0)
    pipeline.produce("reports", Watermark("s", stream.slot_end(1)).encode(), partition=0)
    pipeline.run()
    letters = dead_letters(pipeline)
    assert [(d.reason, d.payload["count"]) for d in letters] == [("duplicate", 1), ("duplicate", 1)]
    partial = [v for v in pipeline.log["slots"]]
    from wevent.stream.wire.messages import PartialMessage
    counts = PartialMessage.decode(partial[0]).counts
    assert counts.tolist() == [[1, 1]]  # user 1 -> value 0 (first report), user 2 -> value 1


@pytest.mark.parametrize("mechanism", ["bd", *BENCHMARK])
def test_replayed_inputs_after_a_crash_change_nothing(mechanism):
    """Deliver every message twice (the at-least-once worst case): releases are unchanged and the
    processors' state skips what it already applied."""
    data = synthetic("sin", 800, 15, seed=4)
    clean = InProcessPipeline(config_for(("s", mechanism), users=800))
    feed(clean, "s", data.values(), 15)

    doubled = InProcessPipeline(config_for(("s", mechanism), users=800))
    original_produce = doubled.produce

    def produce_twice(topic, value, key=None, partition=None):
        p = doubled.partition(topic, key) if partition is None else partition
        offset = doubled.offsets[(topic, p)]
        original_produce(topic, value, key, partition)
        doubled.queue.append((topic, p, offset, value))  # redelivery of the same offset

    doubled.produce = produce_twice
    feed(doubled, "s", data.values(), 15)
    assert [r.to_json() for r in doubled.releases("s")] == [r.to_json() for r in clean.releases("s")]
    assert not doubled.log["deadletter"]


@pytest.mark.parametrize("mechanism", ["ba", *BENCHMARK])
def test_lost_state_reprocessing_reemits_identical_releases(mechanism):
    """A worker that lost M2's state since slot t (e.g. before its changelog write) recomputes the
    same releases: the noise is derived, not drawn."""
    data = synthetic("sin", 600, 10, seed=5)
    pipeline = InProcessPipeline(config_for(("s", mechanism), users=600))
    feed(pipeline, "s", data.values()[:6], 6)
    snapshot = dict(pipeline.tables["m2"])
    stream = pipeline.config.stream("s")
    for slot in range(7, 11):
        pipeline.send_slot("s", stream.slot_start(slot), stream.slot_end(slot), np.arange(600), data.values()[slot - 1])
    pipeline.run()
    first = [r.to_json() for r in pipeline.releases("s")]
    # roll M2 back to slot 6 and redeliver M1's messages for slots 7..10
    pipeline.tables["m2"] = snapshot
    from wevent.stream.wire.messages import MeasuredMessage
    measured = [v for v in pipeline.log["dissimilarity"] if MeasuredMessage.decode(v).slot > 6]
    before = len(pipeline.log["releases"])
    for value in measured:
        pipeline.queue.append(("dissimilarity", pipeline.partition("dissimilarity", "s"), 10_000 + len(pipeline.queue), value))
    pipeline.run()
    again = [ReleaseRecord.from_json(v).to_json() for v in pipeline.log["releases"][before:]]
    assert again and set(again) <= set(first)


@pytest.mark.parametrize("mechanism, seed", [("ba", 0), ("ba", 1), ("ba", 2), *((m, 0) for m in BENCHMARK)])
def test_a_crash_between_outputs_and_state_never_loses_or_changes_a_release(mechanism, seed):
    """At random inputs, crash inside the window the agents leave open: M2 has stored its ledger
    but its release is lost; the others have delivered their outputs but lost their new state.
    The input is then redelivered (at-least-once). Releases must equal a clean run's."""
    data = synthetic("log", 900, 25, seed=7)
    clean = InProcessPipeline(config_for(("s", mechanism), users=900))
    feed(clean, "s", data.values(), 25)

    crashy = InProcessPipeline(config_for(("s", mechanism), users=900))
    rng = np.random.default_rng(seed)
    routes = {"reports": ("assembler", crashy.processors.assembler), "slots": ("m1", crashy.processors.dissimilarity),
              "releases": ("m1", crashy.processors.dissimilarity), "dissimilarity": ("m2", crashy.processors.publication)}
    stream = crashy.config.stream("s")
    for slot in range(1, 26):
        crashy.send_slot("s", stream.slot_start(slot), stream.slot_end(slot), np.arange(900), data.values()[slot - 1])
    crashes = 0
    while crashy.queue:
        topic, p, offset, value = crashy.queue.popleft()
        if topic not in routes:
            continue
        table_name, processor = routes[topic]
        table = crashy.tables[table_name]
        outputs, updates, _ = processor.process(value, topic, p, offset, table.get, 0.0)
        if rng.random() < 0.2:
            crashes += 1
            if processor.persist_before_send:
                table.update(updates)  # ledger stored, release lost
            else:
                for out in outputs:  # outputs delivered, state lost
                    crashy.produce(out.topic, out.value, out.key)
            crashy.queue.appendleft((topic, p, offset, value))  # redelivered after the restart
            continue
        table.update(updates)
        for out in outputs:
            crashy.produce(out.topic, out.value, out.key)
    assert crashes > 20
    assert [r.to_json() for r in crashy.releases("s")] == [r.to_json() for r in clean.releases("s")]


@pytest.mark.parametrize("mechanism", ["pbd", "pba"])
def test_personalized_stream_equals_simulation_and_audits_per_type(mechanism):
    from wevent.core.personalized import PersonalizedBudgetAbsorption, PersonalizedBudgetDistribution, generate
    from wevent.stream.audit import verify

    users, slots = 1200, 60
    config = parse_config({"seed": 11, "report_partitions": 2, "stream_partitions": 1, "streams": [{
        "name": "p", "model": "personalized", "mechanism": mechanism, "domain": 2, "users": users,
        "slot_seconds": 60, "start": START,
        "options": {"requirements": {"mix": "groups", "epsilon": 0.6, "window": 12, "seed": 3}}}]})
    data = synthetic("sin", users, slots, seed=6)
    pipeline = InProcessPipeline(config)
    feed(pipeline, "p", data.values(), slots)

    requirements = generate("groups", users, 0.6, 12, seed=3)
    cls = {"pbd": PersonalizedBudgetDistribution, "pba": PersonalizedBudgetAbsorption}[mechanism]
    m = cls.for_requirements(requirements, 2, randomness=DerivedRandomness(SecretKey.from_seed(11), "p"))
    expected = [m.step(requirements.type_counts(data.values_at(t), 2)) for t in range(1, slots + 1)]
    got = pipeline.releases("p")
    assert [r.release for r in got] == [e.release.tolist() for e in expected]
    assert [r.extras["type_eps2"] for r in got] == [e.type_eps2.tolist() for e in expected]
    assert all(r.extras["window_spend_ratio"] <= 1 + 1e-12 for r in got)
    audit = [json.loads(v) for v in pipeline.log["audit"]]
    findings = verify(audit)
    assert len(findings) == 1 and findings[0].ok and "requirement types" in findings[0].message
    # the audit really checks each type: inflate one type's charges and it must fail
    tampered = [dict(a, charges=[c * 3 for c in a["charges"]]) for a in audit]
    assert not verify(tampered)[0].ok


def test_seen_users_switch_from_ids_to_a_bitset_and_agree():
    from wevent.stream.agents.seen import seen_add, seen_contains

    rng = np.random.default_rng(0)
    population = 10_000
    seen = np.zeros(0, dtype=np.int64)
    reference = np.zeros(population, dtype=bool)
    for _ in range(40):
        batch = np.unique(rng.integers(0, population, 200))
        assert np.array_equal(seen_contains(seen, batch), reference[batch])
        batch = batch[~reference[batch]]
        seen = seen_add(seen, batch, population)
        reference[batch] = True
    assert seen.dtype == np.uint8  # ~5,500 users of 10,000: the bitset is smaller
    probe = np.arange(population)
    assert np.array_equal(seen_contains(seen, probe), reference)


def test_changed_mechanism_parameters_stop_the_stream_instead_of_mixing_mechanisms():
    data = synthetic("sin", 600, 10, seed=5)
    pipeline = InProcessPipeline(config_for(("s", "ba"), users=600))
    feed(pipeline, "s", data.values()[:5], 5)
    released = len(pipeline.releases("s"))
    # the operator edits epsilon; the stream's state (changelog) survives the restart
    changed = InProcessPipeline(config_for(("s", "ba"), users=600, epsilon=0.5))
    changed.tables = pipeline.tables
    stream = changed.config.stream("s")
    changed.offsets = pipeline.offsets
    for slot in range(6, 8):
        changed.send_slot("s", stream.slot_start(slot), stream.slot_end(slot), np.arange(600), data.values()[slot - 1])
    changed.run()
    assert not changed.releases("s") and released == 5
    reasons = {letter.reason for letter in dead_letters(changed)}
    assert reasons == {"config_changed"}


def test_a_mechanism_state_of_an_older_layout_is_dead_lettered_and_nothing_more_is_released():
    """M2's state as a version before noise kinds stored it: refused in one line, never continued
    under today's default noise."""
    from wevent.core import packing
    from wevent.stream.agents.publish import PublicationState

    values = synthetic("sin", 600, 4, seed=5).values()
    pipeline = InProcessPipeline(config_for(("s", "ba"), users=600))
    feed(pipeline, "s", values[:2], 2)
    assert [r.slot for r in pipeline.releases("s")] == [1, 2]
    state = PublicationState.unpack(pipeline.tables["m2"]["s"])
    mechanism = packing.unpack(state.mechanism)  # small enough to have no parts
    del mechanism["params"]["noise"]
    state.mechanism = packing.pack(mechanism)
    pipeline.tables["m2"]["s"] = before = state.pack()
    for slot in (3, 4):
        pipeline.send_slot("s", START + (slot - 1) * 60, START + slot * 60, np.arange(600), values[slot - 1])
    pipeline.run()
    letters = dead_letters(pipeline)
    assert {(d.reason, d.stream) for d in letters} == {("unreadable_state", "s")}
    assert letters[0].detail == ("a ba state of an older layout (without noise): this version reads only its own; "
                                 "drain the stream and start a new one")
    assert [r.slot for r in pipeline.releases("s")] == [1, 2] and pipeline.tables["m2"]["s"] == before
