"""A real `wevent devices` process killed with SIGKILL and restarted keeps its users' spend."""

from __future__ import annotations

import numpy as np
import pytest

from wevent.stream.wire.messages import ReportsMessage
from wevent.stream.runtime.child_processes import wait_until
from tests.integration.device_helpers import answers, committed, kept_stream

pytestmark = [pytest.mark.integration]

USERS, SLOTS = 500, 20


def test_a_fleet_killed_and_restarted_keeps_its_users_spend(broker, tmp_path):
    stream = kept_stream(broker, tmp_path, USERS, SLOTS)
    fleet = stream.start_fleet(0)
    try:
        for slot in (1, 2, 3):  # users 10..39 spend 0.6 each, ten a slot
            stream.ask(slot, 1, range(10 * slot, 10 * slot + 10), 0.6)
        assert wait_until(lambda: len(answers(broker.bootstrap)) == 3, 60), fleet.log_tail()
        # Killed once the requests are behind its committed offset: a restarted fleet does not read
        # them again, so only its ledger file can remember what the users spent.
        assert wait_until(lambda: committed(broker.bootstrap) == stream.sent, 60), fleet.log_tail()
        fleet.kill()
        fleet = stream.start_fleet(1)
        stream.ask(4, 1, [10, 25, 35, 45], 0.6)  # users 10, 25, 35 would reach 1.2 in the window: refused
        stream.ask(2, 1, range(20, 30), 0.9)  # another request for a charged (slot, phase): refused
        stream.ask(3, 1, range(30, 40), 0.6)  # slot 3's request again, byte-identical: the same reports
        # The requests are read in order: once the repeat is answered, the others have been handled.
        assert wait_until(lambda: len(answers(broker.bootstrap).get((3, 1), [])) == 2, 60), fleet.log_tail()
        got = {key: [ReportsMessage.decode(v) for v in values] for key, values in answers(broker.bootstrap).items()}
    finally:
        fleet.stop()
    assert [int(u) for a in got[(4, 1)] for u in a.users] == [45]
    first, again = got[(3, 1)]
    assert np.array_equal(first.users, again.users) and np.array_equal(first.reports, again.reports)
    assert len(got[(2, 1)]) == 1
    assert "was charged for another request" in fleet.log_path.read_text()
