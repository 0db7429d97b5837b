"""A device ledger's memory grows with the charges in its window as bitmaps of the population
(N/8 bytes each), not as lists of user ids (8 bytes per charged user): a fleet shard of a
budget-division stream, whose every user is charged in both phases of every slot, holds 2w
charges, which at a million users and w = 120 was about a gigabyte."""

import tracemalloc
from fractions import Fraction

import numpy as np

from wevent.core.exact import divide
from wevent.core.local import Request
from wevent.core.randomness import Phase
from wevent.producers.device_fleet import DeviceLedger

POPULATION, WINDOW = 200_000, 20
# Each of a window's 2w charges, rounded down onto epsilon's grid as mechanisms divide budgets: the
# float nearest 1/40 is above it, and 40 of them add up to more than 1 exactly.
BUDGET = divide(1.0, 2 * WINDOW)


def charge_every_slot(ledger: DeviceLedger, users: np.ndarray, slots: int) -> None:
    for slot in range(1, slots + 1):
        for phase in (Phase.DISSIMILARITY, Phase.PUBLICATION):
            allowed = ledger.admit(Request(slot, phase, BUDGET, "oue", 117, POPULATION, users), users)
            assert allowed.all()


def test_a_full_window_of_charges_to_every_user_is_held_as_bitmaps():
    users = np.arange(0, POPULATION, 2)  # the users of shard 0 of 2, every one asked
    tracemalloc.start()
    try:
        ledger = DeviceLedger(POPULATION, WINDOW, 1.0)
        charge_every_slot(ledger, users, 3 * WINDOW)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    charges = 2 * WINDOW  # (slot, phase) pairs in the window
    bitmaps = charges * -(-POPULATION // 8)
    counts = 8 * POPULATION  # the users' exact spend: one count per user of the window's one budget
    assert held < 1.5 * (counts + bitmaps), held  # user ids would be charges * users.nbytes more
    # the window slid twice: charges that left it were taken off exactly their users
    assert set(ledger.charges.spend(users)) == {charges * Fraction(BUDGET)} and not any(ledger.charges.spend(users + 1))
