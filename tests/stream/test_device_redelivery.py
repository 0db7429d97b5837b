"""A request the devices read again after a crash mid-answer changes nothing downstream.

The fleet commits a request's offset only after its whole answer is delivered, so a fleet killed
after sending part of an answer reads the request again on restart and sends the whole answer:
its ledger makes the repeat free and identical, and the collector drops the reports it already
counted as duplicates.
"""

import numpy as np

from wevent.core.synthetic import synthetic
from wevent.stream.wire.messages import ReportsMessage
from wevent.producers.device_fleet import signed_reports
from tests.helpers import rejected
from tests.stream.harness import InProcessPipeline
from tests.stream.test_local_pipeline import SLOTS, USERS, local_config, run_pipeline


class KilledMidAnswer(InProcessPipeline):
    """Devices that send the first half of every answer, crash, and answer the request again."""

    resent: list[tuple[list[bytes], list[bytes]]] = []  # (the answer, the answer after the restart)

    def answer(self, value: bytes) -> None:
        for name, fleet in self.fleets.items():
            request = self.requests[name].read(value)
            if request is None:
                continue
            first = signed_reports(fleet.answer(request), self.device_seal)
            again = signed_reports(fleet.answer(request), self.device_seal)  # the request is read again
            self.resent.append((first, again))
            for message in first[:len(first) // 2] + again:
                self.produce("ldp.reports", message, key=name)


def test_an_answer_resent_after_a_crash_is_identical_and_counted_once(monkeypatch):
    values = synthetic("sin", USERS, SLOTS, seed=3).values().astype(np.int64)
    clean, _ = run_pipeline(local_config("lpa"), values)
    monkeypatch.setattr("tests.stream.test_local_pipeline.InProcessPipeline", KilledMidAnswer)
    monkeypatch.setattr(KilledMidAnswer, "resent", [])
    duplicates, late = rejected("l", "duplicate"), rejected("l", "late")
    crashed, fleet = run_pipeline(local_config("lpa"), values)
    assert [r.to_json() for r in crashed.releases("l")] == [r.to_json() for r in clean.releases("l")]
    assert all(first == again for first, again in KilledMidAnswer.resent)  # byte for byte
    resent = sum(np.size(ReportsMessage.decode(m).users) for first, _ in KilledMidAnswer.resent
                 for m in first[:len(first) // 2])
    assert resent > SLOTS
    assert rejected("l", "duplicate") - duplicates == resent and rejected("l", "late") == late
    assert fleet.refused == 0
