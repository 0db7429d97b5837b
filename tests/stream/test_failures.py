"""A processor failing on a message: counted by reason, dead-lettered without its input, logged once."""

import logging

import numpy as np
import pytest
from prometheus_client import REGISTRY

from wevent.stream.runtime import prometheus
from wevent.stream.wire.records import DeadLetter
from wevent.stream.wire.reports import ReportBatch, Watermark
from wevent.stream.wire.messages import ReportsMessage, pack_message
from wevent.stream.wire.seals import report_seal, seal
from wevent.stream.agents.failures import ErrorLog, internal_error
from wevent.stream.settings import Settings
from tests.helpers import dead_lettered, rejected
from tests.stream.test_local_pipeline import local_config

INTERNAL = "internal_error"
SECRET = "user 17 value 3 \x00\xff"  # what an exception's text may quote from its input


def exported_letter(config, raw, topic, exc):
    """The one output of a failed message, its events exported as the worker exports them."""
    outputs, updates, events = internal_error(config, raw, topic, exc)
    prometheus.export(events)
    [out] = outputs
    assert updates == {}
    return out


def failure(text=SECRET, kind=RuntimeError):
    try:
        raise kind(text)
    except Exception as exc:
        return exc


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_failures_log_one_line_per_agent_and_type_per_interval_with_the_count_held_back(caplog):
    clock = Clock()
    errors = ErrorLog(logging.getLogger("wevent.test"), interval=60, clock=clock)
    caplog.set_level(logging.ERROR, "wevent.test")
    for offset in range(1000):  # M = 1000 failures of one agent within a minute: one line
        clock.now = offset * 0.05
        errors.failed("assemble", failure(), f"reports[0]@{offset}")
    errors.failed("measure", failure(), "slots[0]@0")  # another agent, another type: their own lines
    errors.failed("assemble", failure(kind=KeyError), "reports[0]@1000")
    clock.now = 61.0
    errors.failed("assemble", failure(), "reports[0]@1001")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4 and all("\n" not in line and SECRET not in line for line in lines)
    assert lines[0].startswith("assemble failed on reports[0]@0: RuntimeError at test_failures.py:")
    assert lines[-1].startswith("assemble failed on reports[0]@1001: RuntimeError")
    assert lines[-1].endswith(" (999 more since the last line; traceback at debug level)")
    assert errors.suppressed == {}


def test_the_full_traceback_is_logged_at_debug_level_only(caplog):
    errors = ErrorLog(logging.getLogger("wevent.test"), interval=60)
    caplog.set_level(logging.DEBUG, "wevent.test")
    for offset in range(3):
        errors.failed("assemble", failure(), f"reports[0]@{offset}")
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert len(debug) == 3 and all(r.exc_info and r.exc_info[0] is RuntimeError for r in debug)
    assert [r.levelno for r in caplog.records].count(logging.ERROR) == 1


@pytest.mark.parametrize("kind", ["batch", "local", "watermark", "request", "unreadable"])
def test_an_internal_error_is_counted_by_reason_and_its_reports_as_rejected(kind):
    config = local_config("lpa")
    users = np.arange(7)
    message = {
        "batch": ("reports", ReportBatch("l", users, users % 2, np.zeros(7, dtype=np.int64)).encode(), "l", 7),
        "local": ("ldp.reports", seal("ldp.reports", "l", ReportsMessage("l", 1, 1, users, users % 2).encode(),
                                      report_seal(Settings().device_key(config))), "l", 7),
        "watermark": ("reports", Watermark("l", 60.0).encode(), "l", 0),
        "request": ("ldp.requests", pack_message("request", {"stream": "l", "slot": 1}), None, 0),
        "unreadable": ("reports", b"\x00\xffnot a report", None, 1),
    }[kind]
    topic, raw, stream, reports = message
    before, letters, unknown = rejected("l", INTERNAL), dead_lettered(INTERNAL), rejected("", INTERNAL)
    out = exported_letter(config, raw, topic, failure())
    letter = DeadLetter.from_json(out.value)
    assert (out.topic, letter.reason, letter.topic, letter.stream) == ("deadletter", "internal_error", topic, stream)
    assert letter.detail.startswith("RuntimeError at test_failures.py:") and SECRET not in out.value.decode()
    assert dead_lettered(INTERNAL) - letters == 1
    assert (rejected("l", INTERNAL) - before, rejected("", INTERNAL) - unknown) == ((reports, 0) if stream else (0, reports))


def test_a_stream_named_by_the_input_but_not_configured_is_not_a_label():
    config = local_config("lpa")
    raw = ReportBatch("nobody's", np.arange(3), np.zeros(3, dtype=np.int64), np.zeros(3, dtype=np.int64)).encode()
    before = rejected("", INTERNAL)
    letter = DeadLetter.from_json(exported_letter(config, raw, "reports", failure()).value)
    assert letter.stream is None and rejected("", INTERNAL) - before == 3
    assert REGISTRY.get_sample_value("wevent_reports_rejected_total",
                                     {"stream": "nobody's", "reason": INTERNAL}) is None
