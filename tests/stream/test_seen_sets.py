"""The assembler's and the collector's sets of users seen in a slot or round, against Python sets:
whatever the order and repetitions of a batch, and across the switch from a sorted list to a bitset."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from wevent.stream.agents.assemble import REJECT_REASONS, Assembler
from wevent.stream.agents.seen import seen_add, seen_contains

POPULATION = 300
batches = st.lists(st.lists(st.integers(0, POPULATION - 1), max_size=80).map(sorted) | st.lists(
    st.integers(0, POPULATION - 1), max_size=80), min_size=1, max_size=6)


@settings(max_examples=100, deadline=None)
@given(batches)
def test_seen_users_are_exactly_the_users_added(batches):
    seen, expected = np.zeros(0, dtype=np.int64), set()
    for batch in batches:
        users = np.array(batch, dtype=np.int64)
        seen = seen_add(seen, users, POPULATION)
        expected |= set(batch)
        everyone = np.arange(POPULATION)
        assert set(everyone[seen_contains(seen, everyone)].tolist()) == expected


@settings(max_examples=100, deadline=None)
@given(batches, st.integers(1, 3))
def test_a_batch_keeps_the_first_report_of_each_user_not_seen_before(batches, partitions):
    seen, counted = np.zeros(0, dtype=np.int64), set()
    for batch in batches:
        users = np.array(batch, dtype=np.int64) * partitions  # users one partition owns
        reason = np.zeros(users.size, dtype=np.int8)
        kept = Assembler._drop_duplicates(np.arange(users.size), users, seen, reason, partitions)
        firsts = [i for i, u in enumerate(batch) if u not in counted and u not in batch[:i]]
        assert kept.tolist() == firsts
        assert (reason == 0).sum() == len(firsts)
        assert set(reason[reason != 0].tolist()) <= {1 + REJECT_REASONS.index("duplicate")}
        seen = seen_add(seen, users[kept] // partitions, POPULATION)
        counted |= set(batch)
