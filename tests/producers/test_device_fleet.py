"""The device fleet's own ledger: every distinct request charged, malformed ones refused, kept on disk."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from wevent.core.data import ABSENT, UserValues
from wevent.core.exact import round_up
from wevent.core.local import Devices, Request
from wevent.core.randomness import DerivedRandomness, Phase, SecretKey
from wevent.core.packing import StateError, unpack
from wevent.core.validation import ParameterError
from wevent.stream.runtime import prometheus as metrics
from wevent.stream.config import parse_config
from wevent.producers.device_fleet import DeviceFleet, DeviceLedger

USERS, DOMAIN, WINDOW, SLOTS, BLOCK, START = 64, 4, 5, 30, 8, 1_201_910_400.0
CATEGORIES = DOMAIN + 1  # what the devices answer in: the values, and "absent" for a user without one
VALUES = np.random.default_rng(7).integers(0, DOMAIN, (SLOTS, USERS))


def stream(name="s", epsilon=1.0, window=WINDOW):
    return parse_config({"seed": 1, "streams": [{
        "name": name, "model": "local", "mechanism": "lpa", "epsilon": epsilon, "window": window, "domain": DOMAIN,
        "users": USERS, "slot_seconds": 60, "start": START, "options": {"block_size": BLOCK}}]}).streams[0]


def fleet(**options) -> DeviceFleet:
    """A fleet of the test stream, by default on its first start."""
    config = stream()
    devices = Devices(DerivedRandomness(SecretKey.from_seed(3, purpose="devices"), config.name), block_size=BLOCK)
    return DeviceFleet(config, UserValues(VALUES, DOMAIN, slot_seconds=60, start=START), devices,
                       **{"new_ledger": True, **options})


def ask(slot, users, epsilon=1.0, phase=Phase.PUBLICATION, oracle="grr"):
    return Request(slot, phase, epsilon, oracle, CATEGORIES, USERS,
                   None if users is None else np.asarray(users, np.int64))


def spent(ledger: DeviceLedger, users=range(USERS)) -> list[float]:
    """Each user's exact window spend (the values here are floats exactly)."""
    return [float(spend) for spend in ledger.charges.spend(np.asarray(users))]


def answered(batches) -> list[int]:
    return [int(u) for batch in batches for u in batch.users]


def refusals(reason, name="s") -> float:
    return metrics.device_requests_refused.labels(name, reason)._value.get()


def test_a_second_request_at_a_charged_slot_and_phase_is_refused_whatever_its_budget():
    devices = fleet()
    assert answered(devices.answer(ask(1, [3, 9], epsilon=0.001))) == [3, 9]
    # The same users at the same (slot, phase) for epsilon = 50: the old ledger sent an almost
    # noiseless report for the 0.001 already charged.
    before = metrics.device_refusals.labels("s")._value.get()
    assert devices.answer(ask(1, [3, 9], epsilon=50.0)) == []
    assert devices.refused == 2 and metrics.device_refusals.labels("s")._value.get() == before + 2
    assert spent(devices.ledger, [3, 9]) == [0.001, 0.001]
    before = refusals("conflict")
    devices.answer(ask(1, [3, 9], epsilon=0.002))
    assert refusals("conflict") == before + 1


def test_a_fleet_returns_what_it_refused_and_the_metrics_follow_only_when_exported():
    devices = fleet()
    before = refusals("bad_epsilon")
    answer = devices.respond(ask(1, [3, 9], epsilon=50.0))
    assert answer.reports == [] and refusals("bad_epsilon") == before  # nothing exported yet
    assert answer.events.device_requests_refused == {("s", "bad_epsilon"): 1}
    metrics.export(answer.events)
    assert refusals("bad_epsilon") == before + 1


def test_the_device_ledger_names_its_fullest_user_window():
    ledger = DeviceLedger(USERS, WINDOW, 1.0)
    assert ledger.tightest() is None
    ledger.admit(ask(1, [0, 1], epsilon=0.25), np.array([0, 1]))
    ledger.admit(ask(3, [1], epsilon=0.5), np.array([1]))
    fullest = ledger.tightest()
    assert (fullest.user, fullest.spend, fullest.bound, fullest.last) == (1, 0.75, 1.0, 2) and not fullest.exceeds()


def test_a_window_is_charged_exactly_with_no_slack_in_the_servers_favour():
    """The ledger compared float sums with a relative slack of 1e-12: a greedy server could take a
    user's window to 1 + 1e-12, and the fullest window was shown as a float sum, rounded either way."""
    ledger = DeviceLedger(USERS, WINDOW, 1.0)
    assert ledger.admit(ask(1, [0, 1], epsilon=0.5), np.array([0, 1])).tolist() == [True, True]
    assert ledger.admit(ask(2, [0], epsilon=0.5 + 1e-12), np.array([0])).tolist() == [False]
    assert ledger.admit(ask(3, [1], epsilon=np.nextafter(0.5, 1)), np.array([1])).tolist() == [False]
    assert ledger.admit(ask(4, [1], epsilon=0.5), np.array([1])).tolist() == [True]  # exactly 1: within
    assert ledger.tightest().spend == 1.0
    shown = DeviceLedger(USERS, WINDOW, 1.0)
    shown.admit(ask(1, [2], epsilon=0.1), np.array([2]))
    shown.admit(ask(2, [2], epsilon=0.7), np.array([2]))
    exact = Fraction(0.1) + Fraction(0.7)
    assert 0.1 + 0.7 < exact and shown.tightest().spend == round_up(exact)  # rounded up, never down


def test_asking_again_with_other_block_companions_gets_no_fresh_report():
    devices = fleet()
    user = 12  # block 1 (users 8..15)
    companions = [u for u in range(USERS) if u != user][:41]
    reports = [devices.answer(ask(2, sorted([user, other]))) for other in companions]
    # The first request is charged and answered; the 40 others differ from it, so they are refused:
    # the old ledger answered all 41, each a fresh GRR draw of the same true value, for one charge.
    assert [user in answered(r) for r in reports] == [True] + [False] * 40
    assert spent(devices.ledger, [user]) == [1.0]


def test_an_identical_repeat_is_answered_with_identical_bytes_at_no_new_cost():
    devices = fleet()
    request = ask(3, None, epsilon=0.5)
    first = [b.encode() for b in devices.answer(request)]
    spend = spent(devices.ledger)
    again = [b.encode() for b in devices.answer(Request.from_dict(request.to_dict()))]
    assert first and again == first
    assert spent(devices.ledger) == spend and max(spend) == 0.5


@pytest.mark.parametrize("epsilon, reason", [(float("nan"), "malformed"), (float("inf"), "malformed"),
                                             (-1.0, "malformed"), (0.0, "malformed"), (1.5, "bad_epsilon")])
def test_a_budget_outside_zero_to_epsilon_is_refused_and_charges_nothing(epsilon, reason):
    devices = fleet()
    before = refusals(reason)
    assert devices.answer(ask(1, [0, 1], epsilon=epsilon)) == []
    assert refusals(reason) == before + 1 and not any(spent(devices.ledger))
    assert answered(devices.answer(ask(2, [0, 1]))) == [0, 1]  # nothing was taken from the users' budget


def test_a_negative_budget_cannot_refill_a_window():
    ledger = DeviceLedger(USERS, WINDOW, 1.0)
    assert ledger.admit(ask(1, [4]), np.array([4])).tolist() == [True]
    with pytest.raises(Exception, match="epsilon"):
        ledger.admit(ask(2, [4], epsilon=-1.0), np.array([4]))
    assert ledger.admit(ask(3, [4]), np.array([4])).tolist() == [False]


@pytest.mark.parametrize("users", [[5, 5, 5], [9, 2], [-1, 3], [3, USERS], [[1, 2], [3, 4]]])
def test_users_that_are_not_distinct_ascending_ids_are_refused(users):
    devices = fleet()
    assert devices.answer(ask(1, users)) == []
    assert not any(spent(devices.ledger))


@pytest.mark.parametrize("change", [{"population": USERS + 1}, {"domain_size": DOMAIN}, {"domain_size": DOMAIN + 2},
                                    {"oracle": "nope"}])
def test_a_request_for_another_stream_shape_is_refused(change):
    devices = fleet()
    assert devices.answer(Request.from_dict({**ask(1, [0]).to_dict(), **change})) == []


def test_older_slots_and_slots_far_ahead_are_refused():
    devices = fleet(max_ahead=3)
    assert devices.answer(ask(5, [0])) == []  # nothing charged yet: at most 3 past the data's first slot
    assert answered(devices.answer(ask(3, [0]))) == [0]
    assert devices.answer(ask(2, [1])) == []  # older than the newest charged slot
    before = refusals("ahead")
    assert devices.answer(ask(20, [1])) == []  # a forged request far ahead cannot move the window
    assert refusals("ahead") == before + 1 and devices.ledger.newest == 3
    assert answered(devices.answer(ask(6, [1]))) == [1]


def test_a_user_without_a_value_answers_the_absent_category_and_is_charged_like_everyone():
    """Users without a value neither answered nor paid: who answered told the server who had a value."""
    values = VALUES.copy()
    values[0, 2] = ABSENT
    config = stream()
    keys = Devices.from_seed(3, config.name, block_size=BLOCK)
    devices = DeviceFleet(config, UserValues(values, DOMAIN, slot_seconds=60, start=START), keys, new_ledger=True)
    request = ask(1, [1, 2, 3])
    [batch] = devices.answer(request)
    assert batch.users.tolist() == [1, 2, 3] and spent(devices.ledger, [1, 2, 3]) == [1.0, 1.0, 1.0]
    # user 2 answered as a device holding the last category, DOMAIN, does: what the simulation draws
    answers = values[0].astype(np.int64)
    answers[2] = DOMAIN
    assert np.array_equal(batch.reports, keys.reports(request, answers))


def test_users_beyond_the_dump_answer_the_absent_category_too():
    config = stream()
    short = UserValues(VALUES[:, : USERS - 4], DOMAIN, slot_seconds=60, start=START)
    devices = DeviceFleet(config, short, Devices.from_seed(3, config.name, block_size=BLOCK), new_ledger=True)
    assert answered(devices.answer(ask(1, None))) == list(range(USERS))
    assert devices.values_at(1)[USERS - 4:].tolist() == [DOMAIN] * 4


@pytest.mark.parametrize("hole", ["absent", "short"])
def test_a_mean_stream_does_not_start_on_a_dump_without_every_users_value(hole):
    """A mean has no category for a user without a value, so every user must have one."""
    config = parse_config({"seed": 1, "streams": [{
        "name": "m", "model": "local", "mechanism": "lbu", "oracle": "hm", "epsilon": 1.0, "window": WINDOW,
        "domain": 1, "users": USERS, "slot_seconds": 60, "start": START}]}).streams[0]
    values = np.zeros((SLOTS, USERS), dtype=np.int64)
    if hole == "absent":
        values[3, 5] = values[4, 6] = ABSENT
    else:
        values = values[:, :-1]
    with pytest.raises(ParameterError, match=f"stream 'm' estimates a mean.*no value for {2 if hole == 'absent' else SLOTS} "
                                             f"of its {USERS} users x {SLOTS} slots"):
        DeviceFleet(config, UserValues(values, 1, slot_seconds=60, start=START), Devices.from_seed(3, "m"),
                    new_ledger=True)
    complete = UserValues(np.zeros((SLOTS, USERS), dtype=np.int64), 1, slot_seconds=60, start=START)
    DeviceFleet(config, complete, Devices.from_seed(3, "m"), new_ledger=True)  # every value there: it starts


# --- on disk -----------------------------------------------------------------------------------
def test_save_and_load_round_trip(tmp_path):
    path = tmp_path / "s.ledger"
    ledger = DeviceLedger(USERS, WINDOW, 1.0, path=path, owner="s 0/1")
    ledger.admit(ask(1, [0, 1, 2], epsilon=0.25), np.array([0, 1, 2]))
    ledger.admit(ask(1, [2, 3], epsilon=0.5, phase=Phase.DISSIMILARITY), np.array([2, 3]))
    ledger.admit(ask(2, [0], epsilon=0.75), np.array([0]))
    back = DeviceLedger.open(path, USERS, WINDOW, 1.0, owner="s 0/1")
    assert spent(back) == spent(ledger) and back.newest == 2
    assert spent(back, range(4)) == [1.0, 0.25, 0.75, 0.5]
    assert back.admit(ask(2, [0], epsilon=0.75), np.array([0])).tolist() == [True]  # the identical repeat
    with pytest.raises(Exception, match="another request"):
        back.admit(ask(2, [0], epsilon=0.5), np.array([0]))
    assert back.admit(ask(3, [0, 1], epsilon=0.5), np.array([0, 1])).tolist() == [False, True]


def test_the_file_holds_the_last_window_only(tmp_path):
    path = tmp_path / "s.ledger"
    ledger = DeviceLedger(USERS, WINDOW, 1.0, path=path, owner="s")
    last = 4 * WINDOW
    for slot in range(1, last + 1):
        ledger.admit(ask(slot, [slot % USERS], epsilon=0.1), np.array([slot % USERS]))
    state = unpack(path.read_bytes()[:-32])  # the body, before its checksum
    assert [c["slot"] for c in state["charges"]] == list(range(last - WINDOW + 1, last + 1))
    back = DeviceLedger.open(path, USERS, WINDOW, 1.0, owner="s")
    assert sum(spent(back)) == pytest.approx(0.1 * WINDOW)


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "window", "owner", "population"])
def test_a_damaged_or_foreign_file_is_an_error_not_a_reset(tmp_path, damage):
    path = tmp_path / "s.ledger"
    ledger = DeviceLedger(USERS, WINDOW, 1.0, path=path, owner="s 0/1")
    ledger.admit(ask(1, [0, 1]), np.array([0, 1]))
    data = path.read_bytes()
    if damage == "flip":
        path.write_bytes(data[:40] + bytes([data[40] ^ 1]) + data[41:])
    elif damage == "truncate":
        path.write_bytes(data[:-5])
    elif damage == "empty":
        path.write_bytes(b"")
    shape = {"window": (USERS, WINDOW + 1, "s 0/1"), "owner": (USERS, WINDOW, "s 0/2"),
             "population": (USERS + 1, WINDOW, "s 0/1")}.get(damage, (USERS, WINDOW, "s 0/1"))
    with pytest.raises(StateError, match="is unusable") as error:
        DeviceLedger.open(path, shape[0], shape[1], 1.0, owner=shape[2])
    assert "\n" not in str(error.value) and "not reset" in str(error.value)


def test_a_fleet_restarted_on_its_ledger_directory_keeps_the_spend(tmp_path):
    devices = fleet(ledger_dir=tmp_path)
    assert answered(devices.answer(ask(1, [0, 1], epsilon=0.6))) == [0, 1]
    restarted = fleet(ledger_dir=tmp_path, new_ledger=False)
    assert restarted.answer(ask(2, [0, 1], epsilon=0.6)) == [] and restarted.refused == 2  # 1.2 > 1
    assert answered(restarted.answer(ask(1, [0, 1], epsilon=0.6))) == [0, 1]  # the repeat, free
    assert restarted.answer(ask(1, [0, 1], epsilon=0.3)) == []  # another request for a charged slot


def test_a_fleet_does_not_start_from_an_empty_ledger_unless_told_it_is_the_first_start(tmp_path):
    """A fleet whose ledger file was lost answered, at no cost, a slot it had charged, and with the
    same random bytes at another budget: it stops instead, naming the directory it looked in."""
    devices = fleet(ledger_dir=tmp_path)
    assert (tmp_path / "s-0of1.ledger").is_file()  # written on the first start, before any request
    assert answered(devices.answer(ask(1, [0, 1], epsilon=0.6))) == [0, 1]
    (tmp_path / "s-0of1.ledger").unlink()
    with pytest.raises(StateError, match=f"no device ledger s-0of1.ledger in {tmp_path.resolve()}: .*--new-ledger"):
        fleet(ledger_dir=tmp_path, new_ledger=False)
    with pytest.raises(StateError, match="no device ledger"):
        fleet(ledger_dir=tmp_path / "never", new_ledger=False)
    assert not (tmp_path / "never").exists()  # nothing made where the fleet only looked
    with pytest.raises(ParameterError, match="new_ledger=True"):  # a ledger in memory is a new one every time
        fleet(new_ledger=False)


def test_a_first_start_on_an_existing_ledger_reads_it(tmp_path):
    fleet(ledger_dir=tmp_path).answer(ask(1, [0, 1], epsilon=0.6))
    again = fleet(ledger_dir=tmp_path)
    assert spent(again.ledger, [0, 1, 2]) == [0.6, 0.6, 0.0]
    assert again.answer(ask(2, [0, 1], epsilon=0.6)) == [] and again.refused == 2


def test_another_sharding_of_the_same_ledger_directory_is_refused(tmp_path):
    fleet(ledger_dir=tmp_path, shard=0, shards=2).answer(ask(1, None))
    with pytest.raises(Exception, match="another sharding"):
        fleet(ledger_dir=tmp_path)


def test_a_stream_without_a_window_budget_has_no_fleet():
    # A personalized stream has no (epsilon, w) of its own for the fleet's ledger to bound.
    personalized = parse_config({"seed": 1, "streams": [{
        "name": "p", "model": "personalized", "mechanism": "pba", "domain": DOMAIN, "users": USERS,
        "slot_seconds": 60, "start": START,
        "options": {"requirements": {"mix": "groups", "epsilon": 0.6, "window": WINDOW, "seed": 3}}}]}).streams[0]
    devices = Devices(DerivedRandomness(SecretKey.from_seed(3, purpose="devices"), "p"), block_size=BLOCK)
    with pytest.raises(ParameterError, match="stream 'p' has no window budget of its own"):
        DeviceFleet(personalized, UserValues(VALUES, DOMAIN, slot_seconds=60, start=START), devices, new_ledger=True)


def test_the_digest_follows_every_field_and_not_the_users_dtype():
    base = ask(4, [1, 2, 3], epsilon=0.5)
    assert base.digest == ask(4, np.array([1, 2, 3], dtype=np.int32), epsilon=0.5).digest
    assert base.digest == Request.from_dict(base.to_dict()).digest
    others = [ask(5, [1, 2, 3], 0.5), ask(4, [1, 2, 3], 0.5, phase=Phase.DISSIMILARITY), ask(4, [1, 2], 0.5),
              ask(4, [1, 2, 3], np.nextafter(0.5, 1)), ask(4, [1, 2, 3], 0.5, oracle="oue"), ask(4, None, 0.5),
              Request.from_dict({**base.to_dict(), "bound": 1.0}), Request.from_dict({**base.to_dict(), "population": 65})]
    assert len({r.digest for r in [base, *others]}) == 1 + len(others)


def test_a_ledger_that_cannot_be_written_stops_the_fleet_before_any_report(tmp_path):
    devices = fleet(ledger_dir=tmp_path)
    (tmp_path / "s-0of1.ledger.tmp").mkdir()  # the file the ledger is written to first cannot be opened
    with pytest.raises(StateError, match="cannot write device ledger"):
        devices.answer(ask(1, [0, 1]))
    on_disk = DeviceLedger.open(tmp_path / "s-0of1.ledger", USERS, WINDOW, 1.0, owner="s 0/1")
    assert on_disk.tightest() is None and devices.answered == 0  # the first start's empty ledger only


def test_by_default_a_request_may_run_a_hundred_windows_ahead():
    ledger = DeviceLedger(USERS, WINDOW, 1.0)
    assert ledger.admit(ask(100 * WINDOW, [0]), np.array([0])).tolist() == [True]
    with pytest.raises(Exception, match=f"more than {100 * WINDOW} slots past slot {100 * WINDOW}"):
        ledger.admit(ask(200 * WINDOW + 1, [0]), np.array([0]))
