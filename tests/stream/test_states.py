"""The processors' table values as types: each packs to the very dict the processors store, and
reads it back; a value of an older layout is refused."""

import numpy as np
import pytest

from wevent.core import packing
from wevent.core.local import Request
from wevent.core.randomness import Phase
from wevent.stream.wire.messages import ReportsMessage
from wevent.stream.agents.assemble import AssemblerState, OpenSlot
from wevent.stream.agents.collect import CollectorState, Round, RoundRequest
from wevent.stream.agents.measure import DissimilarityState, PendingPartial
from wevent.stream.agents.publish import KeptOutputs, MechanismPart, PublicationState
from wevent.stream.agents.base import SideKeys

REQUEST = Request(4, Phase.PUBLICATION, 0.5, "grr", 2, 3000, np.arange(0, 3000, 3))
ROUND = {"asked": 1000, "answered_at": np.array([0, 5, 9]), "support": np.array([2.0, 1.0]), "n": 3,
         "deadline": 130.5}

STORED = [  # (type, the dict the processors stored)
    (AssemblerState, {"offsets": {"reports:0": 41}, "watermark": 420.0, "closed": 7, "open": [8, 9],
                      "producers": {"": 420.0, "gw-1": 480.0}}),
    (OpenSlot, {"counts": np.array([[3, 1]]), "seen": np.array([2, 7, 11]), "applied": 41}),
    (DissimilarityState, {"offsets": {"slots:1": 9, "releases:1": 4}, "next": 6, "last_slot": 5,
                          "last_release": np.array([1.5, -0.25]),
                          "measure": {"group_of": np.array([0, 1]), "squares": np.array([2.25, 0.0625])}}),
    (PendingPartial, {"counts": np.array([[3, 1]]), "closed_at": 360.5}),
    (PublicationState, {"offsets": {"dissimilarity:0": 12}, "mechanism": b"WEVS1 head", "recent": [5, 6],
                        "steps": ["6:ready:0", "6:support:1"], "spend": np.zeros((3, 2)), "closed_at": 360.5}),
    (MechanismPart, {"bytes": b"\x00\x01 a large set"}),
    (KeptOutputs, {"releases": b'{"slot":6}', "audit": b'{"slot":6}'}),
    (CollectorState, {"offsets": {"ldp.reports:0": 3}, "rounds": {"4:2": ROUND}, "closed": ["4:1"],
                      "early": {"5:1": [[120.0, "l/early/5:1/17"]]}}),
    (RoundRequest, REQUEST.to_dict()),
    (ReportsMessage, {"stream": "l", "slot": 5, "phase": 1, "users": np.array([3, 4]), "reports": np.array([0, 1])}),
]


@pytest.mark.parametrize("kind, stored", STORED, ids=[kind.__name__ for kind, _ in STORED])
def test_a_value_packs_to_the_dict_it_was_stored_as(kind, stored):
    value = kind.from_fields(packing.unpack(packing.pack(stored)))
    assert packing.pack(value.to_fields()) == packing.pack(stored)
    if hasattr(kind, "unpack"):
        assert kind.unpack(value.pack()).pack() == value.pack() == packing.pack(stored)


def test_fresh_heads_start_with_their_offsets():
    assert list(AssemblerState(float("-inf"), 0, [], {}).to_fields()) == ["offsets", "watermark", "closed", "open",
                                                                          "producers"]
    assert list(CollectorState({}, [], {}).to_fields()) == ["offsets", "rounds", "closed", "early"]


FIELDS = [(kind, stored) for kind, stored in STORED if kind not in (MechanismPart, KeptOutputs, RoundRequest,
                                                                      ReportsMessage)]  # their fields are their keys


@pytest.mark.parametrize("kind, stored", FIELDS, ids=[kind.__name__ for kind, _ in FIELDS])
def test_a_value_of_an_older_layout_is_refused_in_one_line(kind, stored):
    """A value without one of the fields this version writes is of an older layout: refused, not
    read with a default in its place."""
    older = packing.unpack(packing.pack(stored))
    del older[next(iter(older))]
    with pytest.raises(packing.LayoutError, match="of an older layout .* drain the stream and start a new one") \
            as refused:
        kind.from_fields(older)
    assert "\n" not in str(refused.value)


def test_a_round_of_the_first_layout_is_refused():
    """The first layout held the request inline and the answered users by id."""
    first = {"asked": 1000, "support": None, "n": 2, "deadline": 130.5, "answered": np.array([0, 27]),
             "request": REQUEST.to_dict()}
    with pytest.raises(packing.LayoutError, match="a Round of an older layout \\(without answered_at\\)"):
        Round.from_fields(packing.unpack(packing.pack(first)))


def test_side_keys_are_read_as_their_type_and_written_before_the_head_and_deletions():
    table = {"s/part/a": MechanismPart(b"old").pack(), "s/part/b": MechanismPart(b"gone").pack()}
    side = SideKeys(table.get, offset=3)
    assert side.get("s/part/a", MechanismPart).data == b"old" and side.get("s/part/c", MechanismPart) is None
    side.delete("s/part/b")
    side.put("s/part/c", MechanismPart(b"new"))
    head = PublicationState(b"head", [], [], np.zeros((0, 1)), 0.0)
    updates = side.updates("s", head)
    assert list(updates) == ["s/part/c", "s", "s/part/b"] and updates["s/part/b"] is None
    assert MechanismPart.unpack(updates["s/part/c"]).data == b"new" and updates["s"] == head.pack()
