"""State and messages of the local model at the papers' populations stay bounded, whatever N.

A Taobao-shaped LPA (1,023,154 users, d = 117, OUE, w = 20) runs 2w + 5 slots in-process. After
every protocol call its state is split (:meth:`Mechanism.to_parts`) into a head and parts, which
a key-value store (a table) keeps one per key: no value it writes, and no request M2 sends,
comes near the broker's 1 MiB default, and the bytes new in a slot stay under 256 KiB.
"""

import numpy as np
import pytest

from tests.conftest import derived
from wevent.core import packing as codec
from wevent.core.base import restore
from wevent.core.local import LPA, Devices, Request
from wevent.core.local.population import PopulationLedger
from wevent.core.local.user_sets import UserSetError, count_users, pack_users, unpack_users

TAOBAO_USERS, TAOBAO_DOMAIN, WINDOW = 1_023_154, 117, 20
SET_BOUND = TAOBAO_USERS // 8 + 2  # a bitset of N bits and its kind byte
HEAD_BOUND = 16 * 1024  # the mechanism's state without its population sets
NEW_PER_SLOT_BOUND = 256 * 1024  # what a slot writes: the parts it created, plus every head
REQUEST_BOUND = SET_BOUND + 1024


# --- user sets ---------------------------------------------------------------------------------
@pytest.mark.parametrize("population, count", [(1, 0), (1, 1), (8, 8), (13, 5), (1000, 3), (1000, 130),
                                               (1000, 999), (TAOBAO_USERS, 25_578), (TAOBAO_USERS, 511_577)])
def test_user_sets_round_trip_within_a_bitset(population, count):
    users = np.sort(np.random.default_rng(count).choice(population, count, replace=False))
    blob = pack_users(users, population)
    assert np.array_equal(unpack_users(blob, population), users) and count_users(blob) == count
    assert len(blob) <= -(-population // 8) + 1


def test_user_sets_gaps_of_large_ids():
    users = np.array([0, 1, 2**31, 2**40 - 1])
    assert unpack_users(pack_users(users, 2**40), 2**40).tolist() == users.tolist()


@pytest.mark.parametrize("blob, why", [(b"", "kind"), (b"Z\x01", "kind"), (b"G\x81", "ends inside"),
                                       (b"G\x05\x00", "out of order"), (b"G\x0a", "outside"),
                                       (b"B\xff\xff", "bitset"), (b"B\x01", "bitset")])
def test_user_sets_refuse_bytes_that_are_not_a_set(blob, why):
    with pytest.raises(UserSetError, match=why):
        unpack_users(blob, 10)


# --- split state -------------------------------------------------------------------------------
def test_split_state_needs_every_part():
    state = {"slot": 4, "sets": [b"a" * 5000, b"", b"b" * 4096], "release": np.arange(3.0)}
    head, parts = codec.pack_split(state)
    assert len(parts) == 2 and codec.references(head) == set(parts)
    back = codec.unpack_split(head, parts)
    assert back["sets"] == state["sets"] and back["release"].tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(codec.StateError, match="missing"):
        codec.unpack_split(head, {k: v for k, v in list(parts.items())[:1]})


def test_ledger_state_packs_every_take_once():
    ledger = PopulationLedger(100_000, 4)
    for slot in (1, 2, 3):
        ledger.take(slot, 5_000, np.random.default_rng(slot))
    before = ledger.state()["taken"]
    ledger.take(3, 20_000, np.random.default_rng(4))
    after = ledger.state()["taken"]
    assert [len(p) for p in after] == [0, 1, 1, 2]
    assert all(a is b for a, b in zip(sum(before, []), sum(after, [])))  # the bytes of slots 1-3's first takes


# --- a Taobao-shaped stream --------------------------------------------------------------------
def taobao_lpa(seed=0):
    return LPA(1.0, WINDOW, TAOBAO_DOMAIN, TAOBAO_USERS, oracle="oue", randomness=derived(seed),
               devices=Devices.from_seed(seed, "taobao"))


def protocol_slot(mechanism, values, after_each_call):
    """One slot through the request/response protocol; ``after_each_call(request or None)``."""
    request = mechanism.open_slot()
    after_each_call(request)
    if request is not None:
        mechanism.measure(*mechanism.devices.collect(request, values))
        after_each_call(None)
    outcome = mechanism.decide()
    after_each_call(outcome if isinstance(outcome, Request) else None)
    if isinstance(outcome, Request):
        outcome = mechanism.publish(*mechanism.devices.collect(outcome, values))
        after_each_call(None)
    return outcome


def test_taobao_scale_state_and_requests_stay_bounded_and_restore_identically():
    slots = 2 * WINDOW + 5
    rng = np.random.default_rng(7)
    values = [rng.integers(0, TAOBAO_DOMAIN, TAOBAO_USERS) for _ in range(slots)]
    mechanism = taobao_lpa()
    stored: dict[str, bytes] = {}  # the parts a table holds
    heads, requests, written = [], [], []

    def save(request):
        head, parts = mechanism.to_parts()
        new = {k: v for k, v in parts.items() if k not in stored}
        stored.update(new)
        heads.append(len(head))
        written[-1] += len(head) + sum(map(len, new.values()))
        assert max(map(len, parts.values()), default=0) <= SET_BOUND
        if request is not None:
            requests.append(len(codec.pack({"kind": "request", "stream": "taobao", **request.to_dict()})))

    results, snapshot = [], None
    for t in range(slots):
        written.append(0)
        results.append(protocol_slot(mechanism, values[t], save))
        if t + 1 == WINDOW + 3:  # a restore point after recycling began
            snapshot = mechanism.to_parts()
    assert max(heads) <= HEAD_BOUND and max(written) <= NEW_PER_SLOT_BOUND and max(requests) <= REQUEST_BOUND
    assert sum(r.published for r in results) >= 2 and results[-1].n1 == TAOBAO_USERS // (2 * WINDOW)

    head, parts = snapshot
    clone = restore(head, derived(0), parts=parts)
    clone.devices = Devices.from_seed(0, "taobao")
    resumed = [clone.step(values[t]) for t in range(WINDOW + 3, slots)]
    for a, b in zip(resumed, results[WINDOW + 3:]):
        assert a.release.tolist() == b.release.tolist() and a.strategy == b.strategy
        assert np.array_equal(a.users1, b.users1) and (a.users2 is None) == (b.users2 is None)
    assert clone.to_parts() == mechanism.to_parts()


def test_restores_do_no_work_in_n_until_a_take_or_publication_needs_it():
    """M2 restores its mechanism for every message: LPU's groups and a ledger's available set are
    built only when a slot asks users, not for a restore that only measures or publishes."""
    from wevent.core.local import LPU

    lpu = LPU(1.0, WINDOW, TAOBAO_DOMAIN, TAOBAO_USERS, oracle="oue", randomness=derived(0))
    assert "groups" not in vars(restore(lpu.to_bytes(), derived(0)))
    lpa = taobao_lpa()
    lpa.open_slot()  # M1's sample taken: M2 now waits for the dissimilarity
    clone = restore(lpa.to_bytes(), derived(0))
    assert clone.ledger._mask is None and clone.ledger.available == lpa.ledger.available
    assert clone.to_bytes() == lpa.to_bytes()
