"""Forged messages on the internal and LDP topics: anyone who can write to the broker tries.

Each forgery is refused, counted (``wevent_forged_messages_total``) and dead-lettered, and the
stream's releases equal a clean run's.
"""

import json
from dataclasses import replace

import numpy as np
import pytest
from prometheus_client import REGISTRY

from wevent.core.randomness import SecretKey
from wevent.core.synthetic import synthetic
from wevent.stream.wire.records import DeadLetter, PublishedRecords, ReleaseRecord
from wevent.stream.wire.messages import MeasuredMessage, PartialMessage, ReportsMessage, pack_message
from wevent.stream.wire.seals import internal_seal, release_seal, report_seal, request_seal, seal
from wevent.stream.settings import Settings
from tests.stream.harness import InProcessPipeline
from tests.stream.test_local_pipeline import SLOTS as LOCAL_SLOTS
from tests.stream.test_local_pipeline import USERS, local_config, run_pipeline
from tests.stream.test_processors import config_for

SLOTS = 12
STRANGER = SecretKey.from_seed(999, "someone else")  # a key that is not the server's nor the devices'


def forged_count(topic: str, reason: str) -> float:
    return REGISTRY.get_sample_value("wevent_forged_messages_total", {"topic": topic, "reason": reason}) or 0.0


def reasons(pipeline) -> dict[str, int]:
    found = {}
    for value in pipeline.log["deadletter"]:
        letter = DeadLetter.from_json(value)
        found[letter.reason] = found.get(letter.reason, 0) + 1
    return found


def central_run(values, inject=None) -> InProcessPipeline:
    """SLOTS slots of a BA stream; ``inject(pipeline, slot)`` runs before each slot's reports."""
    pipeline = InProcessPipeline(config_for(("s", "ba"), users=values.shape[1]))
    stream = pipeline.config.stream("s")
    for slot in range(1, SLOTS + 1):
        if inject:
            inject(pipeline, slot)
        pipeline.send_slot("s", stream.slot_start(slot), stream.slot_end(slot), np.arange(values.shape[1]),
                           values[slot - 1])
        pipeline.run()
    return pipeline


@pytest.fixture(scope="module")
def central():
    values = synthetic("sin", 900, SLOTS, seed=8).values()
    return values, central_run(values)


def release_json(pipeline) -> list[str]:
    return [r.to_json() for r in pipeline.releases("s")]


def a_release(slot: int) -> bytes:
    return ReleaseRecord("s", slot, [0.0, 0.0], "publish", "ba", 1.0, 10, 0.5, 0.5, 1.0).to_bytes()


def test_a_forged_release_far_ahead_neither_stalls_nor_changes_the_stream(central):
    """Without a seal, M1 took slot 1,000,000 as the last release and waited for it for ever. A
    release must carry the server's signature: one signed under another key, and one sealed with
    the workers' own MAC (what releases carried before they were signed), are refused too."""
    values, clean = central
    before = forged_count("releases", "unauthenticated")

    def inject(pipeline, slot):
        if slot == 3:
            server = Settings().noise_key(pipeline.config)
            pipeline.inject("releases", a_release(1_000_000), key="s")
            for wrong in (release_seal(STRANGER), internal_seal(server)):
                pipeline.inject("releases", seal("releases", "s", a_release(1_000_000), wrong), key="s")

    dirty = central_run(values, inject)
    assert release_json(dirty) == release_json(clean)
    assert [r.slot for r in dirty.releases("s")] == list(range(1, SLOTS + 1))
    assert reasons(dirty) == {"unauthenticated": 3}
    assert forged_count("releases", "unauthenticated") - before == 3


def test_authentic_looking_releases_and_partials_of_impossible_slots_are_refused(central):
    """Even under the right seals (a bug, a leaked key), M1 refuses what no worker could have sent:
    a release of a slot not measured yet, a negative slot, a partial from a partition that does
    not exist or of a slot absurdly far ahead."""
    values, clean = central

    def inject(pipeline, slot):
        server = Settings().noise_key(pipeline.config)
        mac, signer = internal_seal(server), release_seal(server)
        if slot == 3:
            for record in (a_release(1_000_000), a_release(3), a_release(-5)):
                pipeline.inject("releases", seal("releases", "s", record, signer), key="s")
            counts = np.zeros((1, 2), dtype=np.int64)
            for far, partition in ((10**9, 0), (3, 99)):
                partial = PartialMessage("s", far, partition, counts, 0.0).encode()
                pipeline.inject("slots", seal("slots", "s", partial, mac), key="s")

    before = forged_count("releases", "out_of_range")
    dirty = central_run(values, inject)
    assert release_json(dirty) == release_json(clean)
    assert reasons(dirty) == {"out_of_range": 5}
    assert forged_count("releases", "out_of_range") - before == 3


def test_a_forged_dissimilarity_is_not_published(central):
    """M2 published from whatever reached ``dissimilarity`` first: here, counts a hundred times
    the true ones, unsealed or sealed under another key, each ahead of M1's own message."""
    values, clean = central
    genuine = {MeasuredMessage.decode(v).slot: MeasuredMessage.decode(v) for v in clean.log["dissimilarity"]}

    def inject(pipeline, slot):
        if slot in (4, 7):
            message = genuine[slot]
            forged = replace(message, counts=message.counts * 100).encode()
            pipeline.inject("dissimilarity", forged, key="s")
            pipeline.inject("dissimilarity", seal("dissimilarity", "s", forged, internal_seal(STRANGER)), key="s")

    before = forged_count("dissimilarity", "unauthenticated")
    dirty = central_run(values, inject)
    assert release_json(dirty) == release_json(clean)
    assert reasons(dirty) == {"unauthenticated": 4}
    assert forged_count("dissimilarity", "unauthenticated") - before == 4


def test_a_mac_does_not_carry_over_to_another_topic(central):
    """A genuine sealed partial replayed on ``dissimilarity`` is refused: the MAC binds the topic."""
    values, clean = central
    partials = clean.log["slots"]

    def inject(pipeline, slot):
        if slot == 5:
            pipeline.inject("dissimilarity", partials[0], key="s")

    dirty = central_run(values, inject)
    assert release_json(dirty) == release_json(clean)
    assert reasons(dirty) == {"unauthenticated": 1}


def test_releases_and_audit_records_verify_under_the_release_public_key_alone(central):
    """Anyone reads them, and anyone holding the release public key checks who wrote them."""
    _, clean = central
    public = release_seal(Settings().noise_key(clean.config)).public()
    reader = PublishedRecords(public)
    for topic in ("releases", "audit"):
        for raw in clean.log[topic]:
            assert raw.endswith(b'"}') and b',"signature":"' in raw
            assert reader.read(raw) == json.loads(raw[:raw.rindex(b',"signature":"')] + b"}")
    assert not reader.dropped
    record = ReleaseRecord.from_json(clean.log["releases"][0])  # a reader that ignores the signature still can
    assert record.slot == 1 and record.to_json() == clean.releases("s")[0].to_json()


@pytest.fixture(scope="module")
def local():
    values = synthetic("sin", USERS, LOCAL_SLOTS, seed=9).values().astype(np.int64)
    clean, _ = run_pipeline(local_config("lpa"), values)
    return values, clean


def local_releases(pipeline) -> list[str]:
    return [r.to_json() for r in pipeline.releases("l")]


def a_request(slot: int, phase: int) -> bytes:
    return pack_message("request", {"stream": "l", "slot": slot, "phase": phase, "epsilon": 1.0, "oracle": "grr",
                                    "domain_size": 2, "population": USERS, "users": None, "bound": None})


def test_forged_requests_charge_no_device_and_open_no_round(local):
    """Devices answered any request on ``ldp.requests``: one asking everyone at slot 1000 spent
    every user's budget and moved their ledgers past every real request."""
    values, clean = local

    def inject(pipeline, slot):
        if slot == 2:
            pipeline.inject("ldp.requests", a_request(1000, 1), key="l")
            pipeline.inject("ldp.requests", seal("ldp.requests", "l", a_request(3, 1), request_seal(STRANGER)), key="l")

    before = forged_count("ldp.requests", "unauthenticated")
    dirty, fleet = run_pipeline(local_config("lpa"), values, extra=inject)
    assert local_releases(dirty) == local_releases(clean)
    assert dirty.requests["l"].forged == 2  # the devices refused both
    assert fleet.refused == 0 and fleet.ledger.newest == LOCAL_SLOTS
    assert reasons(dirty) == {"unauthenticated": 2}  # and so did the collector
    assert forged_count("ldp.requests", "unauthenticated") - before == 4


def test_forged_reports_of_asked_users_never_overtake_their_devices(local):
    """A forged answer for every user, sent before each request: the collector took the asked
    users' forged reports first and refused their devices' own as duplicates."""
    values, clean = local

    def inject(pipeline, slot):
        for phase in (1, 2):
            for key in (None, report_seal(STRANGER)):  # unsigned, and signed by other devices
                batch = ReportsMessage("l", slot, phase, np.arange(USERS), np.ones(USERS, dtype=np.int64)).encode()
                pipeline.inject("ldp.reports", batch if key is None else seal("ldp.reports", "l", batch, key), key="l")

    before = forged_count("ldp.reports", "unauthenticated")
    dirty, _ = run_pipeline(local_config("lpa"), values, extra=inject)
    assert local_releases(dirty) == local_releases(clean)
    assert reasons(dirty) == {"unauthenticated": 4 * LOCAL_SLOTS}
    assert forged_count("ldp.reports", "unauthenticated") - before == 4 * LOCAL_SLOTS
