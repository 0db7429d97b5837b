"""Audit records written by the pipeline list a phase's users as packed text (base64 of a bitset or
of sorted-id gaps): the auditor reads them as it reads lists, and refuses text that is not a set."""

import numpy as np
import pytest

from wevent.core.local.user_sets import users_to_text
from wevent.stream.audit import MalformedRecord, verify
from tests.stream.test_audit import record


@pytest.mark.parametrize("population", [1000, 100_000])  # gaps, then a bitset
def test_packed_users_are_charged_like_listed_ones(population):
    users = np.arange(0, population, 7 if population == 1000 else 2)
    again = users[:3]
    as_text = [record(1, [(1.0, users_to_text(users, population))]), record(2, [(1.0, users_to_text(again, population))])]
    as_lists = [record(1, [(1.0, users.tolist())]), record(2, [(1.0, again.tolist())])]
    for ledger in (as_text, as_lists):  # three users are asked in both slots of one window
        finding = verify(ledger)[0]
        assert not finding.ok and "user 0 spends 2 > epsilon 1 in slots 1..2" in finding.message


@pytest.mark.parametrize("text", ["not base64!", "WgE=", "R4E="])  # not base64; unknown kind; cut varint
def test_packed_users_that_are_not_a_set_are_malformed(text):
    with pytest.raises(MalformedRecord, match="slot 1: a phase's users"):
        verify([record(1, [(1.0, text)])])
