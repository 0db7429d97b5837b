"""Topic names and partition counts come from one declaration."""

from __future__ import annotations

from wevent.stream.wire import topics
from wevent.stream.config import parse_config

WIRE_NAMES = [t.name for t in topics.TOPICS]


def test_config_creates_every_declared_topic_with_its_partitioning():
    config = parse_config({"app": "w", "report_partitions": 5, "stream_partitions": 3, "seed": 1, "streams": [
        {"name": "s", "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 4, "domain": 3, "users": 10,
         "slot_seconds": 60, "start": "2020-01-01T00:00:00Z"}]})
    counts = config.topics()
    assert list(counts) == WIRE_NAMES
    assert counts[topics.REPORTS] == 5 and counts[topics.DEAD_LETTERS] == 1
    assert {counts[name] for name in WIRE_NAMES if name not in (topics.REPORTS, topics.DEAD_LETTERS)} == {3}

