"""A worker rides out Kafka outages on a durable Apache Kafka: started before its broker, it waits
and comes up when the broker does; while the broker is down it stays alive (/livez 200, so a
liveness probe never restarts it) and unready (/readyz 503), and ready again once it is back."""

from __future__ import annotations

import time

import pytest

from wevent.stream.runtime.apache_kafka import KafkaCluster
from wevent.stream.runtime.broker import free_port
from wevent.stream.runtime.child_processes import WorkerProcess, wait_until
from tests.integration.test_replay_delivery import write_taxi_config
from tests.integration.test_worker_broker_restart import FIRST_SLOT, health, replay_last_slots

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OUTAGE = 30.0  # seconds the broker stays down: longer than the readiness check needs to notice


def releases(cluster: KafkaCluster) -> int:
    from wevent.stream.runtime.subscription import read_topic

    try:
        return len(read_topic(cluster.bootstrap, "releases", timeout=5))
    except Exception:  # the topic is not there yet
        return 0


def test_a_worker_waits_for_kafka_and_stays_alive_through_an_outage(tmp_path):
    config, path = write_taxi_config(tmp_path, FIRST_SLOT)
    cluster = KafkaCluster(1, tmp_path / "kafka")  # durable log directory; not started yet
    worker = WorkerProcess(path, cluster.bootstrap, free_port(), tmp_path / "worker.log", tansu_compat=False,
                           datadir=tmp_path / "data").start()
    try:
        assert wait_until(lambda: health(worker)[0] == 503, 30), worker.log_tail()
        assert health(worker)[1]["problems"][0]["reason"] == "broker unreachable"
        assert health(worker, "/livez")[0] == 200

        cluster.start()
        assert wait_until(lambda: health(worker)[0] == 200, 120), (health(worker), worker.log_tail())
        replay_last_slots(path, cluster.bootstrap, tansu_compat=False)
        assert wait_until(lambda: releases(cluster) >= 8, 120), worker.log_tail()  # the 8 slots replayed

        cluster.kill(0)
        down = time.monotonic()
        alive = []
        while time.monotonic() - down < OUTAGE:
            alive.append(health(worker, "/livez")[0])
            time.sleep(1.0)
        status, body = health(worker)
        assert set(alive) == {200} and worker.alive, (alive, worker.log_tail())
        assert status == 503 and body["problems"][0]["reason"] == "broker unreachable", body

        cluster.start(0)
        assert wait_until(lambda: health(worker)[0] == 200, 120), (health(worker), worker.log_tail())
        assert health(worker, "/livez")[0] == 200 and worker.alive
    finally:
        worker.stop()
        cluster.stop()
