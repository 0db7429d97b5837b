"""The range-query service in-process: answers, restart rebuild, pruning and refusals."""

import numpy as np
import pytest

from wevent.core.decayed import RTPDMM, CombinedIndex, ReleaseIndex
from wevent.core.randomness import DerivedRandomness, SecretKey
from wevent.core.synthetic import synthetic
from wevent.stream.config import ConfigError, parse_config
from wevent.stream.agents.index import QueryService, release_variance
from wevent.stream.settings import Settings
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
    service = QueryService({s.name: s for s in config.streams}, lambda n: DerivedRandomness(Settings().noise_key(config), n))
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
    from wevent.stream.audit import verify
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
    service = QueryService({s.name: s for s in config.streams}, lambda n: DerivedRandomness(Settings().noise_key(config), n))
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


# --- local-model streams: the oracle's variance ---------------------------------------------------
LOCAL_USERS, LOCAL_W, LOCAL_D = 4000, 4, 4
FREQUENCIES = np.array([0.4, 0.3, 0.2, 0.1])


def local_query_config(mechanism, oracle="ada", domain=LOCAL_D, **options):
    return parse_config({"seed": 5, "report_partitions": 1, "stream_partitions": 1, "streams": [{
        "name": "l", "model": "local", "mechanism": mechanism, "epsilon": 1.0, "window": LOCAL_W, "domain": domain,
        "users": LOCAL_USERS, "slot_seconds": 60, "start": START, "oracle": oracle, "options": options,
        "query": {"mode": "A", "window": WINDOW, "decay": DECAY}}]})


def served_slots(config, values, slots, **mechanism_options):
    """Runs the stream's mechanism on its devices, sends each slot's release line (as M2 writes it)
    to the query service, and queries that slot alone: (record, answer, standard error) per slot."""
    from wevent.core.local import MECHANISMS
    from wevent.core.local.device_reports import Devices
    from wevent.stream.agents.local import answers_absent
    from wevent.stream.agents.processors import logic_for

    stream = config.stream("l")
    logic = logic_for(config, stream, Settings())
    mechanism = MECHANISMS[stream.mechanism](1.0, LOCAL_W, stream.domain, LOCAL_USERS, oracle=stream.oracle,
                                             absent=answers_absent(stream.oracle),  # as the stream's devices
                                             randomness=DerivedRandomness(Settings().noise_key(config), "l"),
                                             devices=Devices.from_seed(3, "l"), **stream.mechanism_options,
                                             **mechanism_options)
    service = QueryService({stream.name: stream}, lambda n: DerivedRandomness(Settings().noise_key(config), n))
    table, served = {}, []
    for t in range(1, slots + 1):
        record = logic.record(mechanism, mechanism.step(values), np.zeros(1))
        service.ingest(record.to_bytes(), "releases", table.get, table.__setitem__, lambda k: table.pop(k, None))
        status, body = service.answer({"stream": "l", "from": str(t), "to": str(t)}, table.get)
        assert status == 200, body
        served.append((record, np.array(body["answer"]), np.array(body["standard_error"])))
    return served, service, table


def oracle_of(record):
    """The oracle the devices answered with: over the release's bins and "absent"."""
    from wevent.core.local.oracles import make_oracle

    return make_oracle(record.extras["oracle2"], record.eps2, len(record.release) + 1)


def oracle_variance(record):
    return oracle_of(record).variance(record.extras["n2"])


@pytest.mark.parametrize("mechanism", ["lbu", "lsp", "lpu", "lbd", "lba", "lpd", "lpa", "lp-dsat"])
def test_local_standard_errors_are_the_oracles_and_match_the_spread_of_the_releases(mechanism):
    values = np.repeat(np.arange(LOCAL_D), (FREQUENCIES * LOCAL_USERS).astype(int))
    served, _, _ = served_slots(local_query_config(mechanism), values, 160, decision_override=lambda t: True)
    fresh = [(r, a, e) for r, a, e in served if r.strategy == "publish"]
    assert len(fresh) >= 20
    last = None
    for record, answer, error in served:
        if record.strategy == "publish":
            last = np.sqrt(oracle_variance(record))
            if mechanism == "lp-dsat":  # its threshold is a controller's setting, not a variance
                assert not np.isclose(last ** 2, record.threshold)
        if last is not None:  # a repeat keeps the standard error of the release it repeats
            assert np.allclose(error, last, rtol=1e-12), (record.slot, error, last)
    # Each fresh release's error over its standard error. The oracle's variance is the average of
    # the exact per-bin variances over its d + 1 categories, where "absent" holds nobody here, so
    # the d released bins' mean square is theirs over it (a little above 1). A slot's d bins count
    # at most as one sample of variance 2: the mean square of F slots has standard error at most
    # sqrt(2 / F).
    z = np.array([(answer - FREQUENCIES) / error for _, answer, error in fresh])
    shares = np.append(FREQUENCIES, 0.0)  # nobody is without a value
    expected = np.mean([np.mean(oracle_of(r).bin_variance(shares, r.extras["n2"])[:LOCAL_D] / oracle_variance(r))
                        for r, _, _ in fresh])
    assert abs(np.mean(z ** 2) - expected) < 5 * np.sqrt(2 / len(fresh)), (np.mean(z ** 2), expected)


def test_lbu_standard_error_of_a_range_is_the_decayed_sum_of_the_oracle_variance():
    from wevent.core.local.grr import GRR

    values = np.repeat(np.arange(LOCAL_D), (FREQUENCIES * LOCAL_USERS).astype(int))
    served, service, table = served_slots(local_query_config("lbu"), values, 30)
    variance = GRR(1.0 / LOCAL_W, LOCAL_D + 1).variance(LOCAL_USERS)  # the values and "absent"; not 2 / 0.25^2 = 32
    assert np.allclose(served[-1][2], np.sqrt(variance), rtol=1e-12)
    status, body = service.answer({"stream": "l", "from": "23", "to": "30"}, table.get)
    weights = DECAY ** (2 * np.arange(8))
    assert status == 200 and np.allclose(body["standard_error"], np.sqrt(variance * weights.sum()), rtol=1e-12)


def test_mean_estimates_get_the_hybrid_mechanisms_worst_case_variance():
    config = local_query_config("lbu", oracle="hm", domain=1, bound=10.0)
    values = np.linspace(0, 10, LOCAL_USERS)
    served, _, _ = served_slots(config, values, 100)
    from wevent.core.local.hybrid import HybridMechanism

    variance = HybridMechanism(1.0 / LOCAL_W, 10.0).variance(LOCAL_USERS)
    assert all(np.allclose(error, np.sqrt(variance), rtol=1e-12) for _, _, error in served)
    z = np.array([(answer - 5.0) / error for _, answer, error in served])
    assert np.mean(z ** 2) < 1 + 5 * np.sqrt(2 / len(z))  # a worst case: at most the spread


def test_lp_rescuedp_streams_refuse_range_queries_with_the_reason():
    """A config asking for it is refused at load; the service refuses it too, should one get through."""
    from dataclasses import replace

    from wevent.core.local.device_reports import Devices
    from wevent.core.local.lp_rescue import LPRescueDP
    from wevent.stream.agents.processors import logic_for

    with pytest.raises(ConfigError, match="Kalman"):
        local_query_config("lp-rescuedp")
    config = local_query_config("lpa")
    config = replace(config, streams=(replace(config.stream("l"), mechanism="lp-rescuedp"),))
    stream = config.stream("l")
    mechanism = LPRescueDP(1.0, LOCAL_W, LOCAL_D, LOCAL_USERS, randomness=DerivedRandomness(Settings().noise_key(config), "l"),
                           devices=Devices.from_seed(3, "l"))
    record = logic_for(config, stream, Settings()).record(mechanism, mechanism.step(np.zeros(LOCAL_USERS, dtype=int)), np.zeros(1))
    service = QueryService({"l": stream}, lambda n: DerivedRandomness(Settings().noise_key(config), n))
    table = {}
    service.ingest(record.to_bytes(), "releases", table.get, table.__setitem__, lambda k: table.pop(k, None))
    assert table == {}  # nothing indexed
    status, body = service.answer({"stream": "l", "from": "1", "to": "1"}, table.get)
    assert status == 400 and "Kalman" in body["error"], body
    with pytest.raises(Exception, match="Kalman"):
        release_variance(record)


def test_through_the_pipeline_a_local_release_has_the_variance_of_the_reports_that_came():
    """Half the devices never answer: a publication's estimate rests on the n2 reports that came,
    not on the N users asked (what LBD's decision threshold V(eps_2, N) assumes)."""
    from wevent.core.data import UserValues
    from wevent.core.local.oracles import make_oracle
    from wevent.core.local.device_reports import Devices
    from wevent.producers.device_fleet import DeviceFleet
    from wevent.stream.wire.messages import TickMessage
    from tests.stream.test_local_pipeline import BLOCK, SLOTS, USERS, W

    config = parse_config({"seed": 13, "report_partitions": 2, "stream_partitions": 1, "streams": [{
        "name": "l", "model": "local", "mechanism": "lbd", "epsilon": 1.0, "window": W, "domain": 2, "users": USERS,
        "slot_seconds": 60, "start": START, "options": {"block_size": BLOCK, "force_first": True},
        "query": {"mode": "A", "window": WINDOW, "decay": DECAY}}]})
    values = synthetic("sin", USERS, SLOTS, seed=3).values().astype(np.int64)
    half = DeviceFleet(config.stream("l"), UserValues(values, 2, start=START, slot_seconds=60),
                       Devices(DerivedRandomness(Settings().device_key(config), "l"), block_size=BLOCK), shard=0, shards=2,
                       new_ledger=True)
    pipeline = InProcessPipeline(config, {"l": half})
    stream = config.stream("l")
    for slot in range(1, SLOTS + 1):
        pipeline.send_slot("l", stream.slot_start(slot), stream.slot_end(slot), None, None)
        pipeline.run(now=100.0 * slot)
        for phase_deadline in (40.0, 80.0):  # the collector closes M1's round, then M2's, at their deadlines
            pipeline.produce("ldp.reports", TickMessage("l").encode(), key="l")
            pipeline.run(now=100.0 * slot + phase_deadline)
    service = QueryService({"l": config.stream("l")}, lambda n: DerivedRandomness(Settings().noise_key(config), n))
    table, fresh = {}, 0
    for record in pipeline.releases("l"):
        service.ingest(record.to_bytes(), "releases", table.get, table.__setitem__, lambda k: table.pop(k, None))
        status, body = service.answer({"stream": "l", "from": str(record.slot), "to": str(record.slot)}, table.get)
        assert status == 200, body
        if record.strategy == "publish":
            fresh += 1
            oracle = make_oracle(record.extras["oracle2"], record.eps2, 3)  # the 2 values and "absent"
            assert 0 < record.extras["n2"] < USERS
            assert np.allclose(body["standard_error"], np.sqrt(oracle.variance(record.extras["n2"])), rtol=1e-12)
            assert not np.isclose(body["standard_error"][0] ** 2, oracle.variance(USERS))
    assert fresh >= 3, fresh


@pytest.mark.parametrize("noise", [None, "laplace"])
def test_central_releases_get_the_variance_of_the_streams_noise_kind(noise):
    """Discrete Laplace (the default) has variance 1 / (2 sinh^2(eps/2)); continuous 2 / eps^2.
    Mode C's RTP_DMM draws the stream's noise kind too, so a rebuilt index repeats its draws."""
    from wevent.core.noise import discrete_laplace_variance, laplace_variance

    config = build("C", epsilon=0.2)
    if noise is not None:
        from dataclasses import replace

        stream = config.stream("s")
        config = replace(config, streams=(replace(stream, options={**stream.options, "noise": noise}),))
    pipeline, service, table = run(config)
    fresh = [r for r in pipeline.releases("s") if r.strategy == "publish"]
    expected = (laplace_variance if noise == "laplace" else discrete_laplace_variance)(fresh[0].eps2)
    entry = service.route(fresh[0].to_bytes(), "releases")[2]
    assert entry["variance"] == pytest.approx(expected, rel=1e-12)
    assert service.indexes["s"].raw.noise == (noise or "discrete")
