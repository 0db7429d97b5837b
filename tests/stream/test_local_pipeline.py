"""The local model through the processors in-process: devices, collector, M1, M2."""

import json
from dataclasses import replace

import numpy as np
import pytest

from wevent.core.data import ABSENT, UserValues
from wevent.core.local import MECHANISMS
from wevent.core.local.device_reports import Devices
from wevent.core.randomness import DerivedRandomness, SecretKey
from wevent.core.synthetic import synthetic
from wevent.stream.audit import verify
from wevent.stream.wire.records import DeadLetter
from wevent.stream.wire.messages import ReportsMessage, TickMessage, decode_message
from wevent.stream.wire.seals import report_seal, seal, unseal
from wevent.stream.config import parse_config
from wevent.producers.device_fleet import DeviceFleet
from wevent.stream.settings import Settings
from tests.stream.harness import InProcessPipeline
from tests.stream.test_processors import START

USERS, SLOTS, W, SEED, BLOCK = 1200, 40, 5, 13, 256


def local_config(mechanism, **options):
    return parse_config({"seed": SEED, "report_partitions": 2, "stream_partitions": 1, "streams": [{
        "name": "l", "model": "local", "mechanism": mechanism, "epsilon": 1.0, "window": W, "domain": 2,
        "users": USERS, "slot_seconds": 60, "start": START, "options": {"block_size": BLOCK, **options}}]})


def run_pipeline(config, values, fleets=None, extra=None, reports_first=False):
    stream = config.stream("l")
    fleet = DeviceFleet(stream, UserValues(values, 2, start=START, slot_seconds=60),
                        Devices(DerivedRandomness(Settings().device_key(config), "l"), block_size=BLOCK), new_ledger=True)
    pipeline = InProcessPipeline(config, fleets or {"l": fleet}, reports_first)
    for slot in range(1, SLOTS + 1):  # the wall clock advances 100 s a slot (deadlines are 30 s)
        pipeline.send_slot("l", stream.slot_start(slot), stream.slot_end(slot), None, None)
        if extra:
            extra(pipeline, slot)
        pipeline.run(now=100.0 * slot)
    pipeline.produce("ldp.reports", TickMessage("l").encode(), key="l")
    pipeline.run(now=100.0 * (SLOTS + 1))  # a last tick: every deadline has passed
    return pipeline, fleet


def simulated(mechanism, values):
    """The core's mechanism on simulated devices, answering as a stream's do (with an absent category)."""
    m = MECHANISMS[mechanism](1.0, W, 2, USERS, absent=True,
                              randomness=DerivedRandomness(SecretKey.from_seed(SEED), "l"),
                              devices=Devices.from_seed(SEED, "l", block_size=BLOCK))
    return [m.step(values[t]) for t in range(SLOTS)]


@pytest.mark.parametrize("mechanism", ["lba", "lpa", "lbd", "lpu", "lsp"])
def test_local_releases_equal_the_simulation_and_audit_per_user(mechanism):
    values = synthetic("sin", USERS, SLOTS, seed=3).values().astype(np.int64)
    pipeline, fleet = run_pipeline(local_config(mechanism), values)
    got = pipeline.releases("l")
    expected = simulated(mechanism, values)
    assert [r.slot for r in got] == list(range(1, SLOTS + 1))
    assert [r.release for r in got] == [e.release.tolist() for e in expected]
    assert [r.strategy for r in got] == [e.strategy.value for e in expected]
    assert [r.extras["n1"] + r.extras["n2"] for r in got] == [e.reports for e in expected]
    assert all(r.extras["n1"] == r.extras["asked1"] and r.extras["n2"] == r.extras["asked2"] for r in got)
    assert fleet.refused == 0
    audit = [json.loads(v) for v in pipeline.log["audit"]]
    finding = verify(audit)[0]
    assert finding.ok, finding.message
    assert all(r.window_spend <= 1.0 + 1e-12 for r in got)


@pytest.mark.parametrize("mechanism", ["lbu", "lpa"])
def test_who_answers_never_depends_on_who_has_a_value(mechanism):
    """A fraction of the users have no value in each slot. Every asked user answers all the same (a
    user without a value with the devices' absent category), so the server sees every asked user's
    report and nothing else: the users without a value answered nothing, and were not charged, so
    who answered named them. The releases are the core's, and cover the two values only."""
    values = synthetic("sin", USERS, SLOTS, seed=3).values().astype(np.int64)
    holes = np.random.default_rng(8).random(values.shape) < 0.3
    values[holes] = ABSENT
    pipeline, fleet = run_pipeline(local_config(mechanism), values)
    requests = {}
    for value in pipeline.log["ldp.requests"]:
        message = decode_message(unseal(value)[0])
        users = message.request.users
        requests[message.request.slot, int(message.request.phase)] = np.arange(USERS) if users is None else users
    answered = {}
    for value in pipeline.log["ldp.reports"]:
        message = decode_message(unseal(value)[0])
        if isinstance(message, ReportsMessage):
            answered.setdefault((message.slot, message.phase), []).append(message.users)
    assert requests and answered.keys() == requests.keys()
    assert all(np.array_equal(np.concatenate(answered[key]), asked) for key, asked in requests.items())
    got = pipeline.releases("l")
    assert all(r.extras["n1"] == r.extras["asked1"] and r.extras["n2"] == r.extras["asked2"] for r in got)
    expected = simulated(mechanism, np.where(values == ABSENT, 2, values))  # the absent category: the last of 3
    assert [r.release for r in got] == [e.release.tolist() for e in expected]
    assert all(len(r.release) == 2 for r in got) and fleet.refused == 0


class LosingFleet:
    """A fleet whose first report batch of one slot never arrives (a shard down past the deadline)."""

    def __init__(self, fleet, slot: int) -> None:
        self.fleet, self.slot = fleet, slot

    def answer(self, request):
        batches = self.fleet.answer(request)
        return batches[1:] if request.slot == self.slot else batches


def test_a_release_short_of_device_answers_says_so():
    values = synthetic("sin", USERS, SLOTS, seed=3).values().astype(np.int64)
    config = local_config("lbu")  # every user asked in every slot
    stream = config.stream("l")
    fleet = DeviceFleet(stream, UserValues(values, 2, start=START, slot_seconds=60),
                        Devices(DerivedRandomness(Settings().device_key(config), "l"), block_size=BLOCK), new_ledger=True)
    pipeline, _ = run_pipeline(config, values, fleets={"l": LosingFleet(fleet, slot=7)})
    short = {r.slot: r.extras["asked2"] - r.extras["n2"] for r in pipeline.releases("l")
             if r.extras["n2"] < r.extras["asked2"]}
    assert short == {7: BLOCK}  # the lost batch held one block of users
    assert all(r.extras["asked2"] == USERS for r in pipeline.releases("l"))


def test_no_raw_value_reaches_any_topic():
    values = synthetic("log", USERS, SLOTS, seed=4).values().astype(np.int64)
    pipeline, _ = run_pipeline(local_config("lpa"), values)
    kept = reports = 0
    for topic, messages in pipeline.log.items():
        for value in messages:
            assert not value.startswith(b"WRB1"), f"a raw report batch on {topic}"
            if topic == "ldp.reports" and isinstance(message := decode_message(value), ReportsMessage):
                truth = values[message.slot - 1, message.users]
                kept += int((message.reports == truth).sum())
                reports += truth.size
    # LPA asks with the whole epsilon = 1: a GRR report over 3 categories (the 2 values and the
    # devices' "absent") keeps the true value with p = e/(e+2) = 0.576, not 1. Binomial standard
    # error sqrt(p(1-p)/n); 5 of them.
    p = np.e / (np.e + 2)
    assert reports > 5000 and abs(kept / reports - p) < 5 * np.sqrt(p * (1 - p) / reports)


def test_bad_ldp_input_is_counted_and_changes_nothing():
    values = synthetic("sin", USERS, SLOTS, seed=5).values().astype(np.int64)
    clean, _ = run_pipeline(local_config("lpa"), values)

    device = report_seal(Settings().device_key(local_config("lpa")))  # a faulty device: its reports are signed

    def inject(pipeline, slot):
        key = "l"
        bad = [
            ReportsMessage("l", slot, 1, np.array([USERS - 1]), np.array([7])),  # GRR report outside the domain
            ReportsMessage("l", slot + 500, 2, np.array([3]), np.array([1])),  # a round nobody opened
            ReportsMessage("nope", slot, 1, np.array([3]), np.array([1])),  # unknown stream
        ]
        for message in bad:
            pipeline.produce("ldp.reports", seal("ldp.reports", message.stream, message.encode(), device), key=key)
        pipeline.produce("ldp.reports", b"\x00garbage", key=key)

    dirty, _ = run_pipeline(local_config("lpa"), values, extra=inject)
    assert [r.to_json() for r in dirty.releases("l")] == [r.to_json() for r in clean.releases("l")]
    reasons = {}
    for value in dirty.log["deadletter"]:
        letter = DeadLetter.from_json(value)
        reasons[letter.reason] = reasons.get(letter.reason, 0) + 1
    assert reasons["malformed"] == SLOTS and reasons["unknown_stream"] == SLOTS
    assert reasons["unrequested"] == SLOTS  # no request came for them within the 30 s deadline


def test_duplicates_and_unrequested_users_are_rejected_by_the_collector():
    values = synthetic("sin", USERS, SLOTS, seed=6).values().astype(np.int64)
    config = local_config("lpa")
    stream = config.stream("l")
    fleet = DeviceFleet(stream, UserValues(values, 2, start=START, slot_seconds=60),
                        Devices(DerivedRandomness(Settings().device_key(config), "l"), block_size=BLOCK), new_ledger=True)

    class Misbehaving:  # answers twice, and also for a user who was not asked
        def answer(self, request):
            batches = fleet.answer(request)
            if batches:  # while the round is still open (a closed round's reports are merely late)
                first = batches[0]
                asked = set(int(u) for b in batches for u in b.users)
                stranger = next(u for u in range(USERS) if u not in asked)
                batches = [first, first, replace(first, users=np.array([stranger]), reports=first.reports[:1]),
                           *batches[1:]]
            return batches

    pipeline, _ = run_pipeline(config, values, fleets={"l": Misbehaving()})
    clean, _ = run_pipeline(config, values)
    assert [r.to_json() for r in pipeline.releases("l")] == [r.to_json() for r in clean.releases("l")]
    reasons = {DeadLetter.from_json(v).reason for v in pipeline.log["deadletter"]}
    assert reasons == {"duplicate", "unrequested"}
