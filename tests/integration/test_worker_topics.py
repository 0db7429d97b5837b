"""A worker creates its tables' changelog topics, and waits until Kafka serves them, before Faust starts.

Left to Faust, a changelog is created at start and its partitions compared with its source
topic's from a metadata snapshot; a real Kafka may not list the new topic there yet, and the
agent then crashes on "0 partitions" while the worker runs on without it (seen once in a
``make test`` run, in the scale-out test on Apache Kafka: one stream never released).
"""

from __future__ import annotations

import pytest

from wevent.bench.crash import sample_values, trial_config
from wevent.cli import main
from wevent.stream.runtime.broker import free_port
from wevent.stream.runtime.child_processes import write_config
from wevent.stream.runtime.kafka import client_config
from wevent.stream.wire.topics import changelog
from wevent.stream.runtime import worker

from .conftest import compat_flags

pytestmark = [pytest.mark.integration]

TABLES = ("assembler", "dissimilarity-state", "publication-state", "collector-state", "query-log")


def test_the_worker_creates_every_changelog_before_faust_starts(broker, tmp_path, monkeypatch):
    from confluent_kafka.admin import AdminClient, ConfigResource

    started = []
    monkeypatch.setattr(worker, "setup_prometheus_sensors", lambda app, **kwargs: None)  # once per process
    monkeypatch.setattr(worker, "shorten_fetch_wait", lambda: None)  # would patch Faust for the whole process
    monkeypatch.setattr(worker, "run_worker", lambda app, loglevel: started.append(app))
    config = trial_config(sample_values(4), seed=1)
    path = write_config(config, tmp_path)

    assert main(["worker", "--config", str(path), "--bootstrap", broker.bootstrap, "--web-port", str(free_port()),
                 *compat_flags(broker)]) == 0

    assert len(started) == 1  # Faust would have started only now
    admin = AdminClient(client_config(broker.bootstrap))
    listed = admin.list_topics(timeout=30).topics
    partitions = {"assembler": config.report_partitions}
    for table in TABLES:
        name = changelog(config.app, table)
        assert name in listed, sorted(listed)
        assert len(listed[name].partitions) == partitions.get(table, config.stream_partitions), name
    if broker.kind == "kafka":  # tansu keeps no topic settings
        resources = [ConfigResource("topic", changelog(config.app, table)) for table in TABLES]
        for future in admin.describe_configs(resources).values():
            assert future.result(30)["cleanup.policy"].value == "compact"
