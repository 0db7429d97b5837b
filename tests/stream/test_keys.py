"""Table and state keys as types: every key reads back as itself, and nothing else reads as a key."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from wevent.core.synthetic import synthetic
from wevent.stream.wire.records import DeadLetter
from wevent.stream.wire.format import DecodeError
from wevent.stream.wire.messages import MeasuredMessage, pack_message
from wevent.stream.wire.seals import internal_seal, report_seal, seal
from wevent.stream.wire.keys import (AssemblerKey, EarlyReportsKey, MalformedKey, MechanismPartKey, OffsetMark,
                                     OpenSlotKey, PartialKey, QueryEntryKey, QueryHeadKey, ReleaseKey, RoundKey,
                                     StepKey, StepOutputKey, stream_of)
from wevent.stream.settings import Settings
from tests.stream.test_forgeries import SLOTS as FORGERY_SLOTS
from tests.stream.test_forgeries import central_run
from tests.stream.test_local_pipeline import SLOTS, USERS, local_config, run_pipeline

names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True)
numbers = st.integers(0, 2**63)
rounds = st.builds(RoundKey, numbers, numbers)
steps = st.builds(StepKey, numbers, st.sampled_from(["ready", "dissimilarity", "support"]), numbers)
keys = st.one_of(
    rounds, steps, st.builds(OffsetMark, st.sampled_from(["reports", "ldp.reports", "slots"]), numbers),
    st.builds(AssemblerKey, names, numbers), st.builds(OpenSlotKey, names, numbers, numbers),
    st.builds(PartialKey, names, numbers, numbers), st.builds(ReleaseKey, names, numbers),
    st.builds(StepOutputKey, names, steps),
    st.builds(MechanismPartKey, names, st.from_regex(r"[0-9a-f]{32}", fullmatch=True)),
    st.builds(EarlyReportsKey, names, rounds, numbers), st.builds(QueryEntryKey, names, numbers),
    st.builds(QueryHeadKey, names),
)
KINDS = [RoundKey, StepKey, OffsetMark, AssemblerKey, OpenSlotKey, PartialKey, ReleaseKey, StepOutputKey,
         MechanismPartKey, EarlyReportsKey, QueryEntryKey, QueryHeadKey]


@given(keys)
def test_every_key_reads_back_as_itself(key):
    assert type(key).decode(key.encode()) == key
    if not isinstance(key, (RoundKey, StepKey, OffsetMark)):  # table keys: the stream comes first
        assert stream_of(key.encode()) == key.stream


def test_keys_keep_the_stored_format():
    """Workers restarted on this version read the keys older ones wrote."""
    assert [k.encode() for k in (AssemblerKey("taxi", 1), OpenSlotKey("taxi", 1, 30), PartialKey("taxi", 30, 1),
                                 ReleaseKey("taxi", 30), StepOutputKey("taxi", StepKey(30, "support", 2)),
                                 MechanismPartKey("taxi", "ab12"), EarlyReportsKey("taxi", RoundKey(30, 1), 99),
                                 QueryEntryKey("taxi", 30), QueryHeadKey("taxi"), OffsetMark("ldp.reports", 0))] == [
        "taxi/1", "taxi/1/30", "taxi/30/1", "taxi/release/30", "taxi/step/30:support:2", "taxi/part/ab12",
        "taxi/early/30:1/99", "taxi/30", "taxi/head", "ldp.reports:0"]


def test_numpy_integers_make_the_same_key_as_ints():
    assert OpenSlotKey("taxi", np.int64(1), np.int64(30)) == OpenSlotKey("taxi", 1, 30)
    assert type(OpenSlotKey("taxi", np.int64(1), np.int64(30)).slot) is int


@pytest.mark.parametrize("kind, text", [
    (RoundKey, ""), (RoundKey, "3"), (RoundKey, "3:1:2"), (RoundKey, "-3:1"), (RoundKey, "03:1"), (RoundKey, "3:x"),
    (RoundKey, "3: 1"), (RoundKey, "3:1.0"), (RoundKey, "٣:1"), (StepKey, "3::1"), (StepKey, "3:ready"),
    (OffsetMark, "reports"), (OffsetMark, ":1"),
    (AssemblerKey, "taxi"), (AssemblerKey, "/1"), (AssemblerKey, "taxi/1/2"),
    (OpenSlotKey, "taxi/1/+2"), (PartialKey, "taxi/1"), (ReleaseKey, "taxi/30"), (ReleaseKey, "taxi/step/30"),
    (ReleaseKey, "taxi/release"), (StepOutputKey, "taxi/step/30"), (StepOutputKey, "taxi/release/30:ready:0"),
    (MechanismPartKey, "taxi/part/"), (EarlyReportsKey, "taxi/early/30/99"), (EarlyReportsKey, "taxi/early/30:1"),
    (QueryEntryKey, "taxi/head"), (QueryHeadKey, "taxi/slot"), (QueryHeadKey, "taxi"),
])
def test_malformed_keys_are_refused_as_bad_input(kind, text):
    with pytest.raises(MalformedKey) as refused:
        kind.decode(text)
    assert isinstance(refused.value, DecodeError) and isinstance(refused.value, ValueError)


@settings(max_examples=300)
@given(st.sampled_from(KINDS), st.one_of(st.text(max_size=40), st.from_regex(r"[a-z0-9:/]{0,30}", fullmatch=True),
                                         st.integers(), st.none()))
def test_decoding_anything_gives_a_key_or_refuses_it(kind, text):
    try:
        key = kind.decode(text)
    except MalformedKey:
        return
    assert key.encode() == text


@pytest.mark.parametrize("kind, fields", [
    (RoundKey, (-1, 1)), (RoundKey, ("3", 1)), (RoundKey, (3.0, 1)), (RoundKey, (True, 1)), (RoundKey, (None, 1)),
    (StepKey, (3, "a:b", 1)), (StepKey, (3, "", 1)), (AssemblerKey, ("a/b", 0)), (EarlyReportsKey, ("s", "3:1", 4)),
])
def test_keys_refuse_fields_they_could_not_be_read_back_from(kind, fields):
    with pytest.raises(MalformedKey):
        kind(*fields)


def test_reports_for_a_round_no_key_can_name_are_dead_lettered_as_malformed():
    """A device's signed reports whose slot or phase is no round (text, negative, fractional) are
    refused at once as ``malformed``, never a worker error, and change no release."""
    values = synthetic("sin", USERS, SLOTS, seed=5).values().astype(np.int64)
    clean, _ = run_pipeline(local_config("lpa"), values)
    device = report_seal(Settings().device_key(local_config("lpa")))
    bad_rounds = [("1", 1), (-1, 1), (1.5, 1), (1, None)]

    def inject(pipeline, slot):
        for round_slot, phase in bad_rounds:
            body = pack_message("reports", {"stream": "l", "slot": round_slot, "phase": phase, "users": np.array([3]),
                                            "reports": np.array([1])})
            pipeline.produce("ldp.reports", seal("ldp.reports", "l", body, device), key="l")

    dirty, _ = run_pipeline(local_config("lpa"), values, extra=inject)
    assert [r.to_json() for r in dirty.releases("l")] == [r.to_json() for r in clean.releases("l")]
    reasons = [DeadLetter.from_json(value).reason for value in dirty.log["deadletter"]]
    assert reasons == ["malformed"] * (len(bad_rounds) * SLOTS)


def test_authentic_looking_inputs_of_impossible_slots_are_refused_by_the_publisher():
    """M2's keys cannot name a slot below 1: such an input (under the right MAC: a bug, a leaked
    key) is refused as ``out_of_range`` and changes nothing, rather than failing the worker."""
    values = synthetic("sin", 900, FORGERY_SLOTS, seed=8).values()
    clean = central_run(values)

    def inject(pipeline, slot):
        if slot == 3:
            mac = internal_seal(Settings().noise_key(pipeline.config))
            for impossible in (0, -5):
                measured = MeasuredMessage("s", impossible, 0.0, np.zeros((1, 2), dtype=np.int64)).encode()
                pipeline.inject("dissimilarity", seal("dissimilarity", "s", measured, mac), key="s")

    dirty = central_run(values, inject)
    assert [r.to_json() for r in dirty.releases("s")] == [r.to_json() for r in clean.releases("s")]
    assert [DeadLetter.from_json(v).reason for v in dirty.log["deadletter"]] == ["out_of_range"] * 2
