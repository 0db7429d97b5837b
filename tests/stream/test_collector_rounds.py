"""The collector's record of who answered a round: by position among the asked users.

As a set of user ids it became a bitset of the whole population once enough users answered, and
was rewritten with every message of reports: at ten million users (LPA, w = 20: 250,000 asked)
1.25 MB, over the bound of a table value, so the round's reports were dead-lettered as too_large."""

from __future__ import annotations

import numpy as np

from wevent.core.local import Request
from wevent.core.randomness import Phase
from wevent.core.packing import pack, unpack
from wevent.stream.wire.records import DeadLetter
from wevent.stream.wire.messages import ReportsMessage, RequestMessage, SupportMessage
from wevent.stream.wire.seals import report_seal, seal
from wevent.stream.config import parse_config
from wevent.stream.agents.base import MAX_MESSAGE_BYTES, Out
from wevent.stream.agents.processors import Processors
from wevent.stream.settings import Settings
from tests.stream.harness import store
from tests.stream.test_processors import START

NAME, MESSAGE = "l", 16_384  # reports per message, as a fleet sends them


def collector_for(population: int):
    config = parse_config({"seed": 3, "report_partitions": 1, "stream_partitions": 1, "streams": [{
        "name": NAME, "model": "local", "mechanism": "lpa", "epsilon": 1.0, "window": 20, "domain": 2,
        "users": population, "slot_seconds": 60, "start": START}]})
    return config, Processors.build(config, Settings()).collector


class Round:
    """A request and its answers through one collector, with its table in a dict."""

    def __init__(self, population: int, asked: np.ndarray) -> None:
        self.config, self.collector = collector_for(population)
        self.table, self.offset, self.letters, self.supports = {}, 0, [], []
        self.request = Request(1, Phase.DISSIMILARITY, 0.5, "grr", 2, population, asked)
        body = RequestMessage(NAME, self.request).encode()
        self.send("ldp.requests", self.collector.keys.sealed(Out("ldp.requests", body, NAME)).value)

    def send(self, topic: str, raw: bytes) -> dict:
        outputs, updates, _ = self.collector.process(raw, topic, 0, self.offset, self.table.get, 0.0)
        self.offset += 1
        store(self.table, updates)
        self.letters += [DeadLetter.from_json(o.value) for o in outputs if o.topic == "deadletter"]
        self.supports += [o for o in outputs if o.topic != "deadletter"]
        return updates

    def answer(self, users: np.ndarray) -> dict:
        body = ReportsMessage(NAME, 1, int(Phase.DISSIMILARITY), users, (users % 2).astype(np.int64)).encode()
        return self.send("ldp.reports", seal("ldp.reports", NAME, body, report_seal(Settings().device_key(self.config))))


def test_a_round_of_250000_users_of_ten_million_stays_small():
    asked = np.sort(np.random.default_rng(0).choice(10_000_000, 250_000, replace=False))
    round_ = Round(10_000_000, asked)
    largest = 0
    for start in range(0, asked.size - MESSAGE, MESSAGE):  # all but the last message: the round stays open
        updates = round_.answer(asked[start : start + MESSAGE])
        largest = max([largest, *(len(v) for v in updates.values() if v is not None)])
    assert not round_.letters and not round_.supports
    assert largest < MAX_MESSAGE_BYTES / 2  # the packed request's ids and a bit per asked user
    # each message rewrites the round: a bit per asked user and the support, not the request's ids
    assert len(round_.table[NAME]) < asked.size / 8 + 4096


def test_a_second_answer_is_a_duplicate_and_the_last_closes_the_round():
    asked = np.arange(0, 3000, 3)
    round_ = Round(3000, asked)
    round_.answer(asked[:400])
    round_.answer(asked[300:500])  # 100 answered already
    assert [(d.reason, d.payload["count"]) for d in round_.letters] == [("duplicate", 100)]
    round_.answer(asked[500:])
    support = SupportMessage.decode(round_.supports[0].value)
    assert (support.n, support.missing) == (asked.size, 0)
    assert sorted(round_.table) == [NAME]  # the round's request left with it


def test_a_round_stored_by_the_first_layout_is_refused_in_one_line_and_changes_nothing():
    """A round stored with its request inline and its answered users by id is of an older layout:
    every input of its collector is dead-lettered with one line saying so, and nothing is written."""
    asked = np.arange(0, 3000, 3)
    round_ = Round(3000, asked)
    round_.answer(asked[:400])
    state = unpack(round_.table[NAME])
    first = state["rounds"]["1:1"]
    first["answered"] = asked[:400].copy()  # the first layout: by id, the request inline
    del first["answered_at"]
    first["request"] = unpack(round_.table.pop(f"{NAME}/request/1:1"))
    round_.table[NAME] = pack(state)
    before = dict(round_.table)
    assert round_.answer(asked[350:]) == {} and round_.table == before
    [letter] = round_.letters
    assert (letter.reason, letter.stream) == ("unreadable_state", NAME)
    assert letter.detail == ("a Round of an older layout (without answered_at): this version reads only its own; "
                             "drain the stream and start a new one")
    assert "\n" not in letter.detail and not round_.supports


def test_every_honest_report_of_the_hybrid_mechanism_counts_and_the_mean_is_unbiased():
    """HM answers with the Piecewise Mechanism's outputs too, which reach C = (e^(eps/2) + 1) /
    (e^(eps/2) - 1), beyond stochastic rounding's C_d: a collector that took |r| <= C_d for HM's
    range dropped honest reports, more of them the nearer the values lie to the ends of [0, B]: at
    eps = 1, 18% of those of users holding 9.0 on [0, 10], whose mean came out 8.67."""
    from wevent.core.local.device_reports import Devices

    users, bound, truth = 200_000, 10.0, 9.0
    config = parse_config({"seed": 3, "report_partitions": 1, "stream_partitions": 1, "streams": [{
        "name": NAME, "model": "local", "mechanism": "lbu", "oracle": "hm", "epsilon": 1.0, "window": 1,
        "domain": 1, "users": users, "slot_seconds": 60, "start": START, "options": {"bound": bound}}]})
    collector = Processors.build(config, Settings()).collector
    request = Request(1, Phase.PUBLICATION, 1.0, "hm", 1, users, None, bound)
    reports = Devices.from_seed(4, NAME).reports(request, np.full(users, truth))
    device = report_seal(Settings().device_key(config))
    table, outputs = {}, []
    messages = [("ldp.requests", collector.keys.sealed(Out("ldp.requests", RequestMessage(NAME, request).encode(),
                                                            NAME)).value)]
    for first in range(0, users, MESSAGE):
        body = ReportsMessage(NAME, 1, int(Phase.PUBLICATION), np.arange(first, min(users, first + MESSAGE)),
                              reports[first:first + MESSAGE]).encode()
        messages.append(("ldp.reports", seal("ldp.reports", NAME, body, device)))
    for offset, (topic, raw) in enumerate(messages):
        out, updates, _ = collector.process(raw, topic, 0, offset, table.get, 0.0)
        store(table, updates)
        outputs += out
    assert [o.topic for o in outputs] == ["dissimilarity"]  # no report dead-lettered; the round closed
    support = SupportMessage.decode(outputs[0].value)
    assert (support.n, support.missing) == (users, 0)
    oracle = request.make_oracle()
    assert np.abs(reports).max() > oracle.sr_constant  # the Piecewise Mechanism's wider outputs were sent
    # The estimate is unbiased with a variance of at most variance(n) (HM's worst case over values):
    # 5 standard deviations leave a false failure below 1e-6, and the old bias of 0.33 is 14 of them.
    estimate = oracle.estimate(support.support, support.n)[0]
    assert abs(estimate - truth) < 5 * np.sqrt(oracle.variance(users))
