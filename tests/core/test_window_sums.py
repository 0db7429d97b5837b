"""Window sums are exact sums rounded up, so every path that sums a window agrees to the bit and no
rounding hides an overspend."""

import math
from fractions import Fraction

import numpy as np

from wevent.core.accounting import latest_window_spend
from wevent.core.ledger import window_sums


def test_window_sums_are_the_exact_sums_rounded_up_as_a_live_ledger_finds_them():
    # Charges like the personalized ones (multiples of eps/(2w) and shares), in windows long enough
    # for numpy's pairwise reductions to reorder a float sum: the stream's M2 sums its last w
    # charges, simulations call window_sums, and release records must match exactly.
    rng = np.random.default_rng(0)
    for w in (5, 12, 40, 120):
        charges = rng.choice([0.0, 1 / 6, 1 / 12, 0.1, 0.3, 1 / 24], size=600) * rng.choice([1, 2, 3], size=600)
        sums = window_sums(charges, w)
        for i in range(charges.size):
            window = charges[max(0, i - w + 1): i + 1]
            exact = sum(map(Fraction, window.tolist()), Fraction(0))
            assert Fraction(sums[i]) >= exact > Fraction(math.nextafter(sums[i], 0))
            assert latest_window_spend(window[:, None], [w])[0] == sums[i]
