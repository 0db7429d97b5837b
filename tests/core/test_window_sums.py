"""Window sums add their terms in one fixed order, so every path that sums a window agrees to the bit."""

import numpy as np

from wevent.core.ledger import window_sums


def test_window_sums_equal_a_live_ledgers_left_to_right_sum():
    # Charges like the personalized ones (multiples of eps/(2w) and shares), in windows long enough
    # for numpy's pairwise reductions to reorder a sum: the stream's M2 sums its last w charges
    # left to right, simulations call window_sums, and release records must match exactly.
    rng = np.random.default_rng(0)
    for w in (5, 12, 40, 120):
        charges = rng.choice([0.0, 1 / 6, 1 / 12, 0.1, 0.3, 1 / 24], size=600) * rng.choice([1, 2, 3], size=600)
        sums = window_sums(charges, w)
        live = [sum(charges[max(0, i - w + 1): i + 1].tolist()) for i in range(charges.size)]
        assert sums.tolist() == live
