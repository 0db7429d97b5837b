"""The size of a device fleet's ledger file, and files of the first format (bitsets) read back.

A fleet rewrites its window of charges before every answer. With a bitset of the population per
charge that was 5 MB per request at a million users (LPA, w = 20): 45 ms of each request's round."""

from __future__ import annotations

import hashlib

import numpy as np

from wevent.core.local import Request
from wevent.core.randomness import Phase
from wevent.core.packing import pack
from wevent.producers.device_fleet import BITSET_LEDGER_FORMAT, DIGEST_BYTES, DeviceLedger

POPULATION, WINDOW, ASKED = 100_000, 20, 1_000


def ask(slot: int, users: np.ndarray, phase=Phase.PUBLICATION) -> Request:
    return Request(slot, phase, 0.5, "oue", 8, POPULATION, users)


def test_a_charge_of_few_users_takes_about_a_byte_per_user_on_disk(tmp_path):
    path = tmp_path / "s.ledger"
    ledger = DeviceLedger(POPULATION, WINDOW, 1.0, path=path, owner="s 0/1")
    rng = np.random.default_rng(1)
    for slot in range(1, 2 * WINDOW + 1):
        users = np.sort(rng.choice(POPULATION, ASKED, replace=False))
        ledger.admit(ask(slot, users), users)
    # the window's charges as gaps: about 2 bytes per user at gaps of 100 (a bitset: 12,500 bytes each)
    assert path.stat().st_size < WINDOW * (2 * ASKED + 200)
    back = DeviceLedger.open(path, POPULATION, WINDOW, 1.0, owner="s 0/1")
    everyone = np.arange(POPULATION)
    assert back.charges.spend(everyone) == ledger.charges.spend(everyone) and back.newest == 2 * WINDOW


def test_a_file_of_bitsets_is_read_with_every_charge(tmp_path):
    path = tmp_path / "s.ledger"
    charges, spend = [], np.zeros(POPULATION)
    for slot, users in ((3, np.array([0, 7, 99_999])), (4, np.arange(0, POPULATION, 3))):
        bits = np.zeros(POPULATION, dtype=bool)
        bits[users] = True
        digest = ask(slot, users).digest
        charges.append({"slot": slot, "phase": int(Phase.PUBLICATION), "digest": digest, "epsilon": 0.5,
                        "users": np.packbits(bits)})
        spend[users] += 0.5
    body = pack({"format": BITSET_LEDGER_FORMAT, "owner": "s 0/1", "population": POPULATION, "window": WINDOW,
                 "newest": 4, "charges": charges})
    path.write_bytes(body + hashlib.blake2b(body, digest_size=DIGEST_BYTES).digest())
    back = DeviceLedger.open(path, POPULATION, WINDOW, 1.0, owner="s 0/1")
    assert back.charges.spend(np.arange(POPULATION)) == list(spend) and back.newest == 4
    users = np.arange(0, POPULATION, 3)
    assert back.admit(ask(4, users), users).all()  # the charged request again: free, same users
    assert back.admit(ask(5, np.array([0, 1])), np.array([0, 1])).tolist() == [False, True]  # 0 spent 1.0
