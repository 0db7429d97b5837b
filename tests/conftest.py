"""Shared fixtures: keys, zero-noise randomness, scripted decisions and a real Apache Kafka."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import settings

from wevent.core.randomness import DerivedRandomness, Phase, SecretKey, ZeroNoise

# Property tests draw the same examples on every run, so a failure in CI is one anyone can rerun;
# HYPOTHESIS_PROFILE=explore draws new ones (and pins what it finds with @example).
settings.register_profile("reproducible", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "reproducible"))


@pytest.fixture
def zero_noise():
    return ZeroNoise(SecretKey.from_seed(0))


def derived(seed: int = 0, stream: str = "test") -> DerivedRandomness:
    return DerivedRandomness(SecretKey.from_seed(seed), stream)


def scripted(decisions):
    """A decision_override hook: slot i uses decisions[i-1] (None = let the rule decide)."""
    return lambda slot: decisions[slot - 1] if slot - 1 < len(decisions) else None


class CountingNoise(DerivedRandomness):
    """Records the slots at which publication noise was drawn."""

    def __init__(self, key, stream="test"):
        super().__init__(key, stream)
        self.publication_slots = []

    def laplace(self, slot, phase, scale, size=None):
        if phase == Phase.PUBLICATION:
            self.publication_slots.append(slot)
        return super().laplace(slot, phase, scale, size)

    def discrete_laplace(self, slot, phase, epsilon, size=None):
        if phase == Phase.PUBLICATION:
            self.publication_slots.append(slot)
        return super().discrete_laplace(slot, phase, epsilon, size)


def random_counts(rng: np.random.Generator, slots: int, domain: int, scale: float = 100.0) -> np.ndarray:
    return rng.poisson(scale, (slots, domain)).astype(float)


def pytest_collection_modifyitems(config, items):
    """Files of tests on real brokers first, then files with slow tests, then the rest, each file's
    tests in their order. `make test` hands whole files to its two processes in this order
    (``--dist loadfile --no-loadscope-reorder``): the long files start early and the many short
    ones even out the end, where a long file last would keep one process busy alone."""
    rank: dict = {}
    for item in items:
        kind = 0 if item.get_closest_marker("integration") else 1 if item.get_closest_marker("slow") else 2
        rank[item.path] = min(rank.get(item.path, kind), kind)
    items.sort(key=lambda item: rank[item.path])  # stable: the order within a rank stays


def pytest_configure(config):
    config.addinivalue_line("markers", "tansu_only(reason): a broker test that runs on the embedded tansu broker only")
    config.addinivalue_line("markers", "kafka_only(reason): a broker test that runs on Apache Kafka only")


@pytest.fixture(scope="session")
def apache_kafka(tmp_path_factory):
    """A one-node Apache Kafka (KRaft) for the whole session; the jars are fetched on first use."""
    from wevent.stream.runtime.apache_kafka import KafkaCluster

    with KafkaCluster(1, tmp_path_factory.mktemp("apache-kafka")) as cluster:
        yield cluster


@pytest.fixture
def kafka_cluster3(tmp_path):
    """A factory of 3-node Apache Kafka clusters (keyword arguments of ``KafkaCluster``), all
    stopped at teardown, even when the test fails."""
    from wevent.stream.runtime.apache_kafka import KafkaCluster

    clusters = []

    def make(**options):
        cluster = KafkaCluster(3, tmp_path / f"kafka{len(clusters)}", **options)
        clusters.append(cluster)
        return cluster.start()

    yield make
    for cluster in clusters:
        cluster.stop()
