"""The internal and LDP messages as types: the bytes every kind had as a dict, and what a reader refuses."""

import numpy as np
import pytest

from wevent.core import packing
from wevent.core.central.dissimilarity import Dissimilarity
from wevent.core.local import Request
from wevent.core.local.protocol import LocalDissimilarity
from wevent.core.randomness import Phase
from wevent.stream.wire.records import DeadLetter
from wevent.stream.wire.format import DecodeError
from wevent.stream.wire.messages import (DissimilarityMessage, MeasuredMessage, PartialMessage, ReadyMessage,
                                         ReportsMessage, RequestMessage, SupportMessage, TickMessage, decode_message,
                                         pack_message)
from wevent.stream.agents.base import Out
from wevent.stream.agents.processors import Processors
from wevent.stream.settings import Settings
from tests.stream.test_local_pipeline import local_config
from tests.stream.test_processors import config_for

REQUEST = Request(7, Phase.DISSIMILARITY, 0.5, "grr", 3, 40, np.array([2, 9, 30]))
COUNTS = np.array([[4, 0, 1]])


def written_before(kind: str, fields: dict) -> bytes:
    """A message as the writers packed it when it was a dict: kind, version, then its fields."""
    return packing.pack({"kind": kind, "version": 1, **fields})


MESSAGES = [
    (PartialMessage("s", 3, 1, COUNTS, 60.5),
     written_before("partial", {"stream": "s", "slot": 3, "partition": 1, "counts": COUNTS, "closed_at": 60.5})),
    (MeasuredMessage("s", 3, 61.0, COUNTS, Dissimilarity(3, 0.75, 0.05, 20.0)),
     written_before("measured", {"stream": "s", "slot": 3, "closed_at": 61.0, "counts": COUNTS, "dis_value": 0.75,
                                 "dis_epsilon": 0.05, "dis_scale": 20.0})),
    (MeasuredMessage("s", 3, 61.0, COUNTS),  # Uniform and Sample have no M1
     written_before("measured", {"stream": "s", "slot": 3, "closed_at": 61.0, "counts": COUNTS})),
    (ReadyMessage("l", 7, 420.0), written_before("ready", {"stream": "l", "slot": 7, "closed_at": 420.0})),
    (SupportMessage("l", 7, 1, np.array([1.0, 2.0, 0.0]), 3, 0, REQUEST),
     written_before("support", {"stream": "l", "slot": 7, "phase": 1, "support": np.array([1.0, 2.0, 0.0]), "n": 3,
                                "missing": 0, "request": REQUEST.to_dict()})),
    (RequestMessage("l", REQUEST), written_before("request", {"stream": "l", **REQUEST.to_dict()})),
    (ReportsMessage("l", 7, 1, np.array([2, 9]), np.array([0, 2])),
     written_before("reports", {"stream": "l", "slot": 7, "phase": 1, "users": np.array([2, 9]),
                                "reports": np.array([0, 2])})),
    (TickMessage("l"), written_before("tick", {"stream": "l"})),
]


def same(a, b) -> bool:
    """Equal fields, arrays and requests compared by value."""
    if isinstance(a, Request):
        return same(a.to_dict(), b.to_dict())
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return a == b


@pytest.mark.parametrize("message, before", MESSAGES, ids=[m.kind for m, _ in MESSAGES])
def test_every_kind_writes_the_bytes_of_its_dict_and_reads_them_back(message, before):
    assert message.encode() == before
    back = decode_message(before)
    assert type(back) is type(message) and same(back.to_fields(), message.to_fields())
    assert same(type(message).decode(before).to_fields(), message.to_fields())


def test_a_local_dissimilarity_travels_by_name_and_a_list_is_refused():
    dis = LocalDissimilarity(7, 0.125, 0.5, 30, 0.01)
    message = DissimilarityMessage("l", 7, dis)
    assert packing.unpack(message.encode())["dis"] == {"slot": 7, "value": 0.125, "epsilon": 0.5, "reporters": 30,
                                                       "variance": 0.01}
    assert decode_message(message.encode()).dissimilarity == dis
    positional = written_before("dissimilarity", {"stream": "l", "slot": 7, "dis": [7, 0.125, 0.5, 30, 0.01]})
    with pytest.raises(DecodeError, match="^malformed dissimilarity message: a dissimilarity of an older layout "):
        decode_message(positional)


def test_a_message_of_an_older_layout_is_dead_lettered_in_one_line_and_changes_nothing():
    """M2 refuses a local-model dissimilarity whose fields travel as a list, the layout before they
    were named, with one line naming the layout and the upgrade path."""
    m2 = Processors.build(local_config("lpa"), Settings()).publication
    positional = written_before("dissimilarity", {"stream": "l", "slot": 1, "dis": [1, 0.125, 0.5, 30, 0.01]})
    sealed = m2.keys.sealed(Out("dissimilarity", positional, "l")).value
    outputs, updates, events = m2.process(sealed, "dissimilarity", 0, 0, {}.get, 0.0)
    [letter] = [DeadLetter.from_json(out.value) for out in outputs]
    assert (letter.reason, updates, events.dead_letters) == ("malformed", {}, {"malformed": 1})
    assert letter.detail == ("malformed dissimilarity message: a dissimilarity of an older layout (without its "
                             "fields' names): this version reads only its own; drain the stream and start a new one")


@pytest.mark.parametrize("data, match", [
    (pack_message("note", {"stream": "s"}), "malformed internal message"),  # a kind no writer sends
    (pack_message("partial", {"stream": "s", "slot": 3, "partition": 0, "closed_at": 1.0}), "no field 'counts'"),
    (pack_message("reports", {"stream": "l", "slot": "3", "phase": 1, "users": [], "reports": []}),
     "slot must be an integer"),
    (pack_message("ready", {"stream": 5, "slot": 3, "closed_at": 1.0}), "stream must be text"),
    (pack_message("dissimilarity", {"stream": "l", "slot": 3, "dis": [3, 0.1]}), "of an older layout"),
    (b"WEVS1 but not really", "malformed internal message"),
])
def test_a_message_no_writer_sends_is_a_decode_error(data, match):
    with pytest.raises(DecodeError, match=match):
        decode_message(data)


def test_a_kind_read_where_another_is_expected_is_a_decode_error():
    with pytest.raises(DecodeError, match="a tick message, not a reports message"):
        ReportsMessage.decode(TickMessage("l").encode())


def test_an_authentic_message_of_a_kind_a_processor_does_not_read_is_dead_lettered():
    """M1 took any message on ``slots`` other than a support for a partial, and failed on a field
    a partial has."""
    m1 = Processors.build(config_for(("s", "ba")), Settings()).dissimilarity
    sealed = m1.keys.sealed(Out("slots", ReadyMessage("s", 1, 0.0).encode(), "s")).value
    outputs, updates, events = m1.process(sealed, "slots", 0, 0, {}.get, 0.0)
    assert [DeadLetter.from_json(out.value).reason for out in outputs] == ["malformed"] and updates == {}
    assert events.dead_letters == {"malformed": 1}
