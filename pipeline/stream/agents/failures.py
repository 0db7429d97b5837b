"""What a worker does with a message its processor failed on: count it, dead-letter it, log it once.

A bug that fails on every message must neither flood the log nor go uncounted. The message
becomes an ``internal_error`` dead letter (``wevent_dead_letters_total``), and the reports it
carried, if it was a report message, are counted as rejected (``wevent_reports_rejected_total``).
The dead letter and the log line name the exception's type and where it was raised, never its
text, which can quote the input. :class:`ErrorLog` writes one line per source and exception type
per interval, with the number of failures it held back; the full traceback is logged at DEBUG.

Failures are counted, not flooded
---------------------------------

**Failures are counted, not flooded.** A message a worker fails on is dead-lettered as
`internal_error` (`wevent_dead_letters_total` counts every dead letter by reason), and the
reports it carried are counted in `wevent_reports_rejected_total` (served with
`--export-report-counts`). The dead letter and the log
name the exception's type and line, never its text (which could quote input). The log gets one
line per agent and exception type per minute, with how many were held back; `--loglevel debug`
shows every traceback.

**Bad input never changes a release.** Malformed bytes, unknown streams, unknown users,
out-of-domain values, duplicates, late reports (after the slot closed), raw reports sent to a
local-model stream, and unrequested or duplicate LDP reports are all dead-lettered and counted
by reason (`wevent_dead_letters_total` per message; `wevent_reports_rejected_total` per report,
served with `--export-report-counts`). So are reports of users on a partition that does not own
them (`wrong_partition`), watermarks more than `max_watermark_jump_slots` slots past the closed
ones (`watermark_too_far_ahead`, default 60), and the watermarks of a 101st live producer of a
partition (`too_many_producers`); a refused watermark changes nothing. Raw values are never
copied into a dead letter of a local-model stream, and bytes that decode to no stream are
dead-lettered as their length and a digest keyed with a sub-key of the server's secret, never as
the bytes (an unkeyed digest of one short report could be reversed by hashing every candidate
value).
"""

from __future__ import annotations

import logging
import time
import traceback
from pathlib import Path
from typing import Callable

from ..config import AppConfig
from ..wire.messages import ReportsMessage, decode_message
from ..wire.reports import ReportBatch, decode_report_message
from ..wire.topics import LDP_REPORTS, REPORTS
from .base import Processed, dead_letter
from .events import Events

__all__ = ["Throttle", "ErrorLog", "internal_error", "raised_at"]

ERROR_LOG_INTERVAL = 60.0  # seconds between two lines about the same failure


def raised_at(exc: BaseException) -> str:
    """Where ``exc`` was raised (``file.py:line in function``): locates the bug without quoting any input."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "unknown location"
    frame = frames[-1]
    return f"{Path(frame.filename).name}:{frame.lineno} in {frame.name}"


class Throttle:
    """At most one event per ``interval`` seconds of each kind; counts the ones held back.

    >>> clock = iter([0.0, 1.0, 31.0]).__next__
    >>> throttle = Throttle(30.0, clock)
    >>> throttle.admit("e"), throttle.admit("e"), throttle.admit("e")
    (0, None, 1)
    """

    def __init__(self, interval: float, clock=time.monotonic) -> None:
        self.interval, self.clock = float(interval), clock
        self.last: dict = {}  # kinds are code's own (logger and template, agent and exception type): bounded
        self.held: dict = {}

    def admit(self, kind) -> int | None:
        """None when ``kind`` is held back; else how many of it were held back since the last one."""
        now = self.clock()
        if kind in self.last and now - self.last[kind] < self.interval:
            self.held[kind] = self.held.get(kind, 0) + 1
            return None
        self.last[kind] = now
        return self.held.pop(kind, 0)


class ErrorLog:
    """Logs failures in one line each, at most one per (source, exception type) per ``interval`` seconds.

    Parameters
    ----------
    logger : logging.Logger
        Where the lines go: ERROR for the one-line summaries, DEBUG for every full traceback.
    interval : float
        Seconds during which further failures of the same source and type are only counted; the
        next line says how many were held back.
    clock : callable
        Monotonic seconds.

    Attributes
    ----------
    suppressed : dict
        Failures held back since the last line, per (source, exception type name).
    """

    def __init__(self, logger: logging.Logger, interval: float = ERROR_LOG_INTERVAL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.throttle = Throttle(interval, clock)

    @property
    def suppressed(self) -> dict:
        return self.throttle.held

    def failed(self, source: str, exc: BaseException, where: str) -> None:
        """``source`` (an agent) failed with ``exc`` on ``where`` (a topic, partition and offset)."""
        self.logger.debug("%s failed on %s", source, where, exc_info=exc)
        held = self.throttle.admit((source, type(exc).__name__))
        if held is None:
            return
        self.logger.error("%s failed on %s: %s at %s (%straceback at debug level)", source, where, type(exc).__name__,
                          raised_at(exc), f"{held} more since the last line; " if held else "")


def internal_error(config: AppConfig, raw: bytes, topic: str, exc: BaseException) -> Processed:
    """What a message a processor failed on causes: its dead letter, no state, its reports counted as rejected."""
    stream, reports = _reports_in(raw, topic)
    known = stream if isinstance(stream, str) and config.stream(stream) is not None else None
    events = Events()
    if reports:
        events.reports_rejected[known or "", "internal_error"] += reports
    return Processed([dead_letter(events, "internal_error", topic, f"{type(exc).__name__} at {raised_at(exc)}", known)],
                     {}, events)


def _reports_in(raw: bytes, topic: str) -> tuple[object, int]:
    """(stream field, number of reports) of a message of a report topic; (None, 0) for other topics."""
    if topic not in (REPORTS, LDP_REPORTS):
        return None, 0
    try:
        if topic == REPORTS:
            message = decode_report_message(raw)
            return message.stream, (message.users.size if isinstance(message, ReportBatch) else 0)
        internal = decode_message(raw)
        return internal.stream, (int(internal.users.size) if isinstance(internal, ReportsMessage) else 0)
    except Exception:  # noqa: BLE001 - as unreadable here as it was to the processor: one report of no known stream
        return None, 1
