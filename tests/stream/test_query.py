"""The range-query service in-process: answers, restart rebuild, pruning and refusals."""

import numpy as np
import pytest

from pipeline.core.decayed import RTPDMM, CombinedIndex, ReleaseIndex
from pipeline.core.randomness import DerivedRandomness, SecretKey
from pipeline.core.synthetic import synthetic
from pipeline.stream.codecs import ReleaseRecord
from pipeline.stream.config import ConfigError, parse_config
from pipeline.stream.query import QueryService, release_variance
from tests.stream.harness import InProcessPipeline
from tests.stream.test_processors import START, feed

SLOTS, WINDOW, DECAY = 50, 16, 0.9


def build(mode="A", epsilon=None, mechanism="ba"):
    query = {"mode": mode, "window": WINDOW, "decay": DECAY}
    if epsilon:
        query["epsilon"] = epsilon
    return parse_config({"seed": 4, "report_partitions": 2, "stream_partitions": 1, "streams": [{
        "name": "s", "model": "central", "mechanism": mechanism, "epsilon": 1.0, "window": 5, "domain": 2,
        "users": 800, "slot_seconds": 60, "start": START, "query": query}]})


def run(config):
    pipeline = InProcessPipeline(config)
    feed(pipeline, "s", synthetic("sin", 800, SLOTS, seed=9).values(), SLOTS)
    service = QueryService({s.name: s for s in config.streams}, lambda n: DerivedRandomness(config.noise_key(), n))
    table = {}
    for topic in ("releases", "dissimilarity"):
        for value in pipeline.log[topic]:
            service.ingest(value, topic, table.get, table.__setitem__, lambda k: table.pop(k, None))
    return pipeline, service, table


def naive(releases, first, last, t):
    return sum(DECAY ** (t - i) * np.asarray(releases[i - 1].release) for i in range(first, last + 1))


def test_mode_a_answers_equal_the_decayed_sum_of_the_releases_and_survive_a_restart():
    pipeline, service, table = run(build("A"))
    releases = pipeline.releases("s")
    status, body = service.answer({"stream": "s", "from": str(SLOTS - 10), "to": str(SLOTS - 2)}, table.get)
    assert status == 200 and body["slot"] == SLOTS
    assert np.allclose(body["answer"], naive(releases, SLOTS - 10, SLOTS - 2, SLOTS), rtol=1e-12)
    # the same index fed directly gives the same standard error
    direct = ReleaseIndex(WINDOW, DECAY, bins=2)
    for r in releases:
        direct.insert(r.release, release_variance(r), repeated=r.strategy != "publish")
    assert np.allclose(body["standard_error"], direct.query(SLOTS - 10, SLOTS - 2)[1])
    # a restarted worker has only the table: it rebuilds the index from the logged window (its
    # blocks start at the oldest logged slot, so sums may differ in the last bit)
    fresh = QueryService(service.streams, service.randomness)
    status_again, again = fresh.answer({"stream": "s", "from": str(SLOTS - 10), "to": str(SLOTS - 2)}, table.get)
    assert status_again == 200 and again["slot"] == SLOTS
    assert np.allclose(again["answer"], body["answer"], rtol=1e-12)
    assert np.allclose(again["standard_error"], body["standard_error"], rtol=1e-12)
    block = service.indexes["s"].index_block_size
    assert len([k for k in table if k != "s/head"]) < WINDOW + block  # pruned by whole blocks beyond the window


def test_mode_c_combines_the_releases_with_rtp_dmm_on_raw_counts():
    config = build("C", epsilon=0.25, mechanism="bd")
    pipeline, service, table = run(config)
    assert pipeline.releases("s")[0].epsilon == pytest.approx(0.75)  # the host gets what the index leaves
    data = synthetic("sin", 800, SLOTS, seed=9)
    releases = ReleaseIndex(WINDOW, DECAY, bins=2)
    raw = RTPDMM(0.25, WINDOW, DECAY, bins=2, privacy_window=5,
                 randomness=DerivedRandomness(SecretKey.from_seed(4), "s"))
    for r, counts in zip(pipeline.releases("s"), data.counts):
        releases.insert(r.release, release_variance(r), repeated=r.strategy != "publish")
        raw.insert(counts)
    expected = CombinedIndex(releases, raw).query(40, 48)
    status, body = service.answer({"stream": "s", "from": "40", "to": "48"}, table.get)
    assert status == 200
    assert np.allclose(body["answer"], expected[0]) and np.allclose(body["standard_error"], expected[1])
    from pipeline.stream.audit import verify
    import json
    audit = [json.loads(v) for v in pipeline.log["audit"]]
    assert audit[0]["reserved"] == 0.25 and verify(audit)[0].ok


@pytest.mark.parametrize("params, reason", [
    ({}, "give ?stream"),
    ({"stream": "nope", "from": "1", "to": "2"}, "unknown stream"),
    ({"stream": "s", "to": "2"}, "missing ?from"),
    ({"stream": "s", "from": "x", "to": "2"}, "whole slot number"),
    ({"stream": "s", "from": "45", "to": "44"}, "from"),
    ({"stream": "s", "from": "1", "to": "3"}, "window"),
    ({"stream": "s", "from": "45", "to": str(SLOTS + 1)}, str(SLOTS)),
    ({"stream": "s", "from": "45", "to": "46", "decay": "1.5"}, "decay"),
    ({"stream": "s", "from": "45", "to": "46", "decay": "0"}, "decay"),
    ({"stream": "s", "from": "45", "to": "46", "decay": "0.5"}, "decay"),
    ({"stream": "s", "from": "45", "to": "46", "decay": "abc"}, "float"),
])
def test_bad_queries_get_400_with_the_reason(params, reason):
    _, service, table = run(build("A"))
    status, body = service.answer(params, table.get)
    assert status == 400 and reason in body["error"], body


def test_query_config_is_validated():
    with pytest.raises(ConfigError, match="mode A spends nothing"):
        build("A", epsilon=0.1)
    with pytest.raises(Exception, match="decay"):
        parse_config({"seed": 1, "streams": [{"name": "s", "model": "central", "mechanism": "ba", "epsilon": 1,
                                               "window": 5, "domain": 2, "users": 5, "slot_seconds": 60, "start": 0,
                                               "query": {"decay": 2}}]})
    with pytest.raises(ConfigError, match="leaves nothing"):
        build("B", epsilon=1.0)


def test_a_restarted_mode_b_index_answers_bit_identically_at_every_restart_point():
    """Rebuilt indexes must recompute the very nodes they released, noise included: releasing a
    slot's draw again at another scale would give away its raw counts (two answers, two scales)."""
    config = build("B", epsilon=0.25, mechanism="bd")
    pipeline = InProcessPipeline(config)
    feed(pipeline, "s", synthetic("sin", 800, SLOTS, seed=9).values(), SLOTS)
    service = QueryService({s.name: s for s in config.streams}, lambda n: DerivedRandomness(config.noise_key(), n))
    table = {}
    for value in pipeline.log["dissimilarity"]:
        service.ingest(value, "dissimilarity", table.get, table.__setitem__, lambda k: table.pop(k, None))
        live = service.indexes["s"]
        t = live.slot
        restarted = QueryService(service.streams, service.randomness)
        for first in range(max(1, t - WINDOW + 1), t + 1):
            a = service.answer({"stream": "s", "from": str(first), "to": str(t)}, table.get)
            b = restarted.answer({"stream": "s", "from": str(first), "to": str(t)}, table.get)
            assert a == b
        rebuilt = restarted.indexes["s"].raw
        block = rebuilt.block_size
        for slot in range(t // block * block + 1, t + 1):  # the open block's released nodes (sealed at its end)
            assert np.array_equal(rebuilt.node(slot), live.raw.node(slot))
