"""A record a fetch passed over is read again, not lost.

On tansu, with two device shards writing one ``ldp.reports`` partition at once, a fetch could
return the records after one message of reports before that message could be read: the collector
applied offsets 440 and 442..451 and never 441, whose round closed at its deadline short of about
1,600 answers, with nothing rejected (one slot in 3 to 8 local runs at 1,023,154 users). A first
re-read 3 ms later could still start past the hole. The agent's :class:`InputGaps` sees the hole,
seeks back to it, ignores what was fetched past it, and reads it again until it is there."""

from __future__ import annotations

import pytest

pytest.importorskip("faust")  # the worker's app module; the stream extra is installed with the tests

from prometheus_client import REGISTRY  # noqa: E402

from wevent.stream.runtime.faust_patches import HOLE_WAIT_SECONDS, InputGaps  # noqa: E402

TOPIC = "ldp.reports"
APPLY, SKIP, SEEK = InputGaps.APPLY, InputGaps.SKIP, InputGaps.SEEK


def deliver(gaps: InputGaps, offsets, now: float = 0.0) -> list[tuple[str, int]]:
    return [gaps.check(TOPIC, 0, offset, now) for offset in offsets]


def counted(outcome: str) -> float:
    return REGISTRY.get_sample_value("wevent_input_gaps_total", {"topic": TOPIC, "outcome": outcome}) or 0.0


def test_a_passed_over_record_is_read_again_and_applied_in_order():
    gaps, before = InputGaps(), counted("reread")
    # the stalled run: 441 never came, the fetch went on at 442; the seek re-reads from 441
    actions = deliver(gaps, [439, 440, 442, 443, 444, 441, 442, 443, 444, 445])
    assert actions == [(APPLY, 439), (APPLY, 440), (SEEK, 441), (SKIP, 443), (SKIP, 444),
                       (APPLY, 441), (APPLY, 442), (APPLY, 443), (APPLY, 444), (APPLY, 445)]
    assert counted("reread") - before == 1
    applied = [offset for action, offset in actions if action == APPLY]
    assert applied == list(range(439, 446))  # each once, none missing


def test_a_hole_not_readable_yet_is_read_again_until_it_is():
    gaps, absent = InputGaps(), counted("absent")
    actions = deliver(gaps, [469, 471, 472])  # 470 passed over
    actions += deliver(gaps, [471, 472], now=0.01)  # the first re-read starts past it again
    actions += deliver(gaps, [473, 470, 471, 472, 473], now=0.1)  # one fetched before the seek, then 470
    assert actions == [(APPLY, 469), (SEEK, 470), (SKIP, 472), (SEEK, 470), (SKIP, 472),
                       (SKIP, 473), (APPLY, 470), (APPLY, 471), (APPLY, 472), (APPLY, 473)]
    assert counted("absent") == absent


def test_a_hole_still_there_after_the_wait_is_accepted_and_counted():
    gaps, before = InputGaps(), counted("absent")
    # offsets 11 and 12 hold no record (a transaction marker of a foreign producer on Kafka)
    actions = deliver(gaps, [10, 13, 14]) + deliver(gaps, [13, 14], now=1.0)
    actions += deliver(gaps, [13, 14, 15], now=HOLE_WAIT_SECONDS)
    assert actions == [(APPLY, 10), (SEEK, 11), (SKIP, 14), (SEEK, 11), (SKIP, 14),
                       (APPLY, 13), (APPLY, 14), (APPLY, 15)]
    assert counted("absent") - before == 2


def test_a_seek_to_an_older_offset_is_no_hole():
    gaps = InputGaps()
    # a replay after a rebalance: the worker sought back to where its state stands
    assert deliver(gaps, [20, 21, 5, 6, 7]) == [(APPLY, 20), (APPLY, 21), (APPLY, 5), (APPLY, 6), (APPLY, 7)]


def test_a_partition_sought_elsewhere_starts_afresh():
    gaps = InputGaps()
    deliver(gaps, [3, 4])
    gaps.forget(TOPIC, 0)  # a partition assigned again, sought to its state's position
    assert deliver(gaps, [30, 31]) == [(APPLY, 30), (APPLY, 31)]
    assert gaps.check(TOPIC, 1, 0, 0.0) == (APPLY, 0)  # partitions are watched apart
