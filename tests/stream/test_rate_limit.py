"""Kafka clients' repeated errors: one line per kind and interval."""

from __future__ import annotations

import io
import logging

from wevent.stream.runtime.health import RateLimit


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def capture(limit: RateLimit) -> tuple[io.StringIO, list[logging.Handler]]:
    out = io.StringIO()
    handlers = [logging.StreamHandler(out), logging.StreamHandler(io.StringIO())]  # one limit on two handlers
    for handler in handlers:
        handler.addFilter(limit)
    return out, handlers


def log_with(handlers, name: str, level: int, message: str, *args, exc_info=None) -> None:
    record = logging.LogRecord(name, level, __file__, 1, message, args, exc_info)
    for handler in handlers:
        handler.handle(record)


def test_one_line_per_kind_and_interval_with_the_count_held_back():
    clock = Clock()
    limit = RateLimit(30.0, clock)
    out, handlers = capture(limit)
    for second in range(61):  # a reconnection attempt per second for a minute
        clock.now = float(second)
        log_with(handlers, "aiokafka.conn", logging.ERROR, "Unable connect to node with id %s: %s", 1, "refused")
        log_with(handlers, "aiokafka.client", logging.ERROR, "Unable to update metadata from [%s]", 1)
    lines = out.getvalue().splitlines()
    assert lines == [
        "Unable connect to node with id 1: refused", "Unable to update metadata from [1]",
        "Unable connect to node with id 1: refused (29 more like it in the last 30 s)",
        "Unable to update metadata from [1] (29 more like it in the last 30 s)",
        "Unable connect to node with id 1: refused (29 more like it in the last 30 s)",
        "Unable to update metadata from [1] (29 more like it in the last 30 s)",
    ]


def test_a_traceback_is_folded_into_the_line_and_other_loggers_pass():
    limit = RateLimit(30.0, Clock())
    out, handlers = capture(limit)
    try:
        raise ConnectionError("closed")
    except ConnectionError as exc:
        error = (type(exc), exc, exc.__traceback__)
    log_with(handlers, "faust.transport", logging.ERROR, "Failed fetch", exc_info=error)
    for _ in range(3):
        log_with(handlers, "wevent.worker", logging.ERROR, "assemble failed on %s", "reports[0]@7")
        log_with(handlers, "aiokafka", logging.INFO, "connected")
    assert out.getvalue().splitlines() == ["Failed fetch: ConnectionError: closed"] \
        + ["assemble failed on reports[0]@7", "connected"] * 3


def test_a_command_logs_a_dead_broker_once_per_interval():
    from confluent_kafka import Producer

    from wevent.stream.runtime.broker import free_port
    from wevent.stream.runtime.kafka import kafka_log, producer_config
    from wevent.stream.runtime.health import log_client_errors

    out = io.StringIO()
    log_client_errors(out, interval=60.0)
    try:
        producer = Producer(producer_config(f"127.0.0.1:{free_port()}", tansu_compat=True))  # nothing listens there
        for _ in range(30):
            producer.poll(0.1)  # librdkafka retries the connection several times meanwhile
    finally:
        kafka_log.handlers = [h for h in kafka_log.handlers if not isinstance(h, logging.StreamHandler)]
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and "Connection refused" in lines[0], lines
