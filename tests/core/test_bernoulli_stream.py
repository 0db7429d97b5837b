"""Du et al.'s binary streams: each user 1 with probability p_t, independently."""

import numpy as np

from wevent.core.bernoulli_stream import bernoulli_values
from wevent.core.synthetic import synthetic


def test_counts_are_binomial_around_p_t_n():
    users, slots = 20_000, 400
    values = bernoulli_values("log", users, slots, seed=5)
    p = synthetic("log", users, slots, 5).p
    ones = values.sum(axis=1, dtype=np.int64)
    z = (ones - p * users) / np.sqrt(users * p * (1 - p))
    assert abs(z.mean()) < 4 / np.sqrt(slots)  # standardised counts: mean 0 and variance 1
    assert abs(z.var(ddof=1) - 1) < 4 * np.sqrt(2 / (slots - 1))
    # not exact counts: LDP-IDS's generator would give z = 0 up to rounding at every slot
    assert np.abs(z).max() > 1


def test_users_are_drawn_independently_across_slots():
    values = bernoulli_values("sin", 5000, 300, seed=2).astype(float)
    p = synthetic("sin", 5000, 300, 2).p
    # the correlation of a user's consecutive values: 0 up to its sampling error 1/sqrt(pairs)
    a, b = values[:-1] - p[:-1, None], values[1:] - p[1:, None]
    correlation = (a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum())
    assert abs(correlation) < 4 / np.sqrt(a.size)


def test_the_same_seed_gives_the_same_stream_and_blocks_do_not_change_it(monkeypatch):
    first = bernoulli_values("lns", 300, 50, seed=9)
    assert np.array_equal(first, bernoulli_values("lns", 300, 50, seed=9))
    assert not np.array_equal(first, bernoulli_values("lns", 300, 50, seed=10))
    monkeypatch.setattr("wevent.core.bernoulli_stream._DRAWS_PER_BLOCK", 700)  # blocks of 2 slots
    assert np.array_equal(first, bernoulli_values("lns", 300, 50, seed=9))
