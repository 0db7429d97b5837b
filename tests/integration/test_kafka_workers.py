"""Several workers on Apache Kafka (4 partitions, 4 streams): one SIGKILLed mid-stream and
another started; a scale-out from one worker to three mid-stream. Every slot of every stream is
released with the values of an uninterrupted run, the audit passes, and a stream's gauges are
served only by the worker that publishes it now."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from wevent.stream.runtime.child_processes import wait_until
from tests.integration.conftest import release_key
from tests.integration.kafka_runs import KafkaRun, check_releases, duplicates, metrics

pytestmark = [pytest.mark.integration, pytest.mark.slow]

GAUGE = re.compile(r'^wevent_last_released_slot\{stream="([^"]+)"\}', re.MULTILINE)


@pytest.fixture
def run(apache_kafka, tmp_path):
    from tests.integration.conftest import KafkaBroker

    KafkaBroker(apache_kafka).empty()
    run = KafkaRun(apache_kafka.bootstrap, tmp_path, streams=4, partitions=4, slots=15)
    yield run
    run.stop()


def finish(run: KafkaRun) -> list:
    run.send(run.slots - run.sent)
    run.close()
    records = run.read_releases()
    check_releases(run, records)
    audit = subprocess.run([sys.executable, "-m", "wevent.cli", "audit", "--bootstrap", run.bootstrap,
                            "--release-key", release_key(run.config)], capture_output=True, text=True, timeout=300)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    return records


def gauge_owners(run: KafkaRun) -> dict[str, list[int]]:
    """stream -> the live workers serving its last-released-slot gauge."""
    owners: dict[str, list[int]] = {name: [] for name in run.names}
    for n, worker in enumerate(run.workers):
        if worker.alive:
            for name in GAUGE.findall(metrics(worker)):
                owners[name].append(n)
    return owners


def test_a_worker_killed_among_three_and_replaced(run):
    for _ in range(3):
        run.start_worker()
    run.send(5)
    run.workers[0].kill()
    run.start_worker()
    run.send(5)
    records = finish(run)
    print(f"3 workers, one SIGKILLed and replaced: {duplicates(records)} duplicate (stream, slot) records")


def test_scale_out_from_one_worker_to_three(run):
    first = run.start_worker()
    run.send(5)
    assert wait_until(lambda: sorted(GAUGE.findall(metrics(first))) == sorted(run.names), 120), run.logs()
    run.start_worker()
    run.start_worker()
    # The first worker hands streams over (and drops their gauges); then every stream releases
    # again, from whichever worker has it now.
    assert wait_until(lambda: len(GAUGE.findall(metrics(first))) < len(run.names), 120), run.logs()
    finish(run)
    # A worker drops a handed-over stream's gauges when its rebalance completes, which may come after
    # the last release: wait for every stream to settle on one live worker.
    seen = []
    assert wait_until(lambda: seen.append(gauge_owners(run)) or all(len(o) == 1 for o in seen[-1].values()),
                      60, 1.0), seen[-1]
    owners = seen[-1]
    assert len({o[0] for o in owners.values()}) > 1, owners  # the streams did spread
