"""Loud faults: rate-limited client logs, and what a worker's ``/healthz`` reports.

A broker that goes away makes every Kafka client log the same connection error again and again;
:class:`RateLimit` lets one line through per interval and says how many it held back.
:class:`BrokerWatch` looks at the broker from beside the worker (its own client, in a thread):
whether the broker answers, whether it still holds what the worker has read, whether the
worker's consumer moves while input is pending, and whether each stream it owns releases.
"""

from __future__ import annotations

import logging
import time

CLIENT_LOGGERS = ("aiokafka", "faust", "mode", "wevent.kafka")

kafka_log = logging.getLogger("wevent.kafka")
kafka_log.addHandler(logging.NullHandler())  # no handler configured (a CLI): silent, not Python's last resort


class RateLimit(logging.Filter):
    """At most one record per ``interval`` seconds for each (logger, message template) of the
    Kafka clients' loggers; the next one let through counts those held back. A traceback is
    folded into the line: the full one would repeat on every reconnection attempt.

    Parameters
    ----------
    interval : float
        Seconds between two records of the same kind.
    clock : callable
        Monotonic seconds.
    """

    def __init__(self, interval: float = 30.0, clock=time.monotonic) -> None:
        super().__init__()
        self.interval = interval
        self.clock = clock
        self.last: dict[tuple[str, str], float] = {}
        self.held: dict[tuple[str, str], int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(CLIENT_LOGGERS) or record.levelno < logging.WARNING:
            return True
        kind = (record.name, str(record.msg))
        now = self.clock()
        if now - self.last.get(kind, -self.interval) < self.interval:
            self.held[kind] = self.held.get(kind, 0) + 1
            return False
        self.last[kind] = now
        held = self.held.pop(kind, 0)
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            record.msg, record.args = f"{record.getMessage()}: {type(error).__name__}: {error}", None
            record.exc_info = record.exc_text = None
        if held:
            record.msg, record.args = f"{record.getMessage()} ({held} more like it in the last {self.interval:g} s)", None
        return True


def rate_limit_client_logs(logger: logging.Logger, interval: float = 30.0) -> None:
    """Put one :class:`RateLimit` on every handler of ``logger`` (the root logger of a process)."""
    limit = RateLimit(interval)
    for handler in logger.handlers:
        handler.addFilter(limit)
