"""Crash safety: random SIGKILLs of the worker, the replay and the device fleet change no release.

The first test builds on purpose the disagreement a SIGKILL could leave: Faust's committed offset
of ``reports`` ahead of the assembler state recovered from its changelog. The worker used to
never read the reports in between again and closed their slots without them.

The second runs random kill schedules (``wevent bench crash``): each trial starts its own
embedded broker, worker, replay and, for a local-model stream, a two-shard device fleet, kills
them at random moments and compares every release with a clean run. A trial passes when every
release is identical, or, in the local model, when the first release that differs was made from
fewer device answers than its ledger entry says were asked (answers that missed their deadline
while a shard was down: by design, and stated by the release and its ledger entry). A worker
that stopped reading a partition after a rebalance, or released a slot short of its reports,
fails it. (The cause of the rebalance stall, records Faust dropped and nobody sought back to,
is tested directly in ``tests/test_state_positioned_app.py``: these short trials hit it too
rarely to show it.)

``WEVENT_CRASH_TRIALS`` raises the number of random trials (at least 50; one in four local),
``WEVENT_CRASH_SEED`` sets the first trial's seed. Trials are short (10 slots, kills within
8 s, restarts after up to 3 s, a 4 s group session) and run five at a time.

The third runs a small sample of trials over the benchmark's central mechanisms, which rotates
by the day so that every one comes round within four days while the suite keeps its time: day
``n`` (the date's ordinal, or ``WEVENT_CRASH_DAY``) runs mechanisms ``2n`` and ``2n + 1`` of the
list (modulo its length) with seeds of that day. No draw is random: the test prints the day, the
seeds and the mechanisms, and ``WEVENT_CRASH_DAY=n`` runs the same trials again.
"""

from __future__ import annotations

import datetime
import os
from collections import Counter

import numpy as np
import pytest

from wevent.bench.crash import clean_releases, run_trials, sample_values, trial_config
from wevent.stream.runtime.kafka import KafkaReportSink, consumer_config
from wevent.stream.runtime.subscription import Releases

pytestmark = [pytest.mark.integration]

TRIALS = max(50, int(os.environ.get("WEVENT_CRASH_TRIALS", "50")))
FIRST_SEED = int(os.environ.get("WEVENT_CRASH_SEED", "7000"))
PARALLEL = 5
# A trial's releases may take 300 s to come: a trial stalled by the machine's load is slow, not wrong,
# and only a wrong release (or none at all) is a failure.
SHORT_TRIAL = {"slots": 10, "horizon": 8.0, "max_delay": 3.0, "session_seconds": 4.0, "timeout": 300.0}
BENCHMARK = ("fast-w", "rescuedp", "dsat", "pegasus", "adapub", "bd-grouped", "ba-grouped")
ROTATING = 2  # trials a day


def rotation(day: int) -> list[tuple[int, str, str]]:
    """Day ``day``'s trials: (seed, model, mechanism), the mechanisms 2 day, 2 day + 1, ... of the
    benchmark's (every one within four days), each with a seed of that day."""
    return [(FIRST_SEED + 10 * (day % 100_000) + i, "central", BENCHMARK[(ROTATING * day + i) % len(BENCHMARK)])
            for i in range(ROTATING)]


def failed_trials(results) -> str:
    """What the trials that changed a release did, with the first one's logs ("" if none did)."""
    failed = [result for result in results if not result.correct]
    if not failed:
        return ""
    report = "\n".join(f"{result.summary()}\n  positions: {result.positions}" for result in failed)
    return f"{len(failed)} of {len(results)} trials changed a release:\n{report}\n{failed[0].logs}"


def commit(bootstrap: str, group: str, topic: str, partition: int, offset: int) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(consumer_config(bootstrap) | {"group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
    finally:
        consumer.close()


def high_watermark(bootstrap: str, topic: str, partition: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(consumer_config(bootstrap))
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)[1]
    finally:
        consumer.close()


def test_a_committed_offset_ahead_of_the_state_is_read_again(cluster_factory):
    slots = 8
    values = sample_values(slots)
    config = trial_config(values, seed=11)
    stream = config.stream("taxi")
    cluster = cluster_factory(config)
    sink = KafkaReportSink(cluster.bootstrap, "taxi", config.report_partitions, tansu_compat=cluster.tansu_compat)
    half = slots // 2
    for slot in range(1, half + 1):
        sink.send_slot(slot, stream.slot_start(slot), stream.slot_end(slot), np.arange(values.users),
                       values.values[slot - 1])
    sink.producer.flush(30)
    # A dead worker applied partition 0's first reports and had its offset committed, but none of
    # the state recording them survived: the group's position and the (empty) state disagree.
    commit(cluster.bootstrap, config.app, "reports", 0, high_watermark(cluster.bootstrap, "reports", 0))
    worker = cluster.start_worker()
    for slot in range(half + 1, slots + 1):
        sink.send_slot(slot, stream.slot_start(slot), stream.slot_end(slot), np.arange(values.users),
                       values.values[slot - 1])
    sink.close()
    expected = clean_releases(config, values)
    got = {}
    with Releases(cluster.bootstrap, streams=["taxi"]) as releases:
        for record in releases.follow(idle_timeout=90):
            got[record.slot] = record.release
            if len(got) == slots:
                break
    assert sorted(got) == list(range(1, slots + 1)), cluster.logs()
    assert {s: r for s, r in got.items() if r != expected[s]["release"]} == {}
    assert "from offset 0, where its state stands, not from the committed" in worker.log_path.read_text()


@pytest.mark.slow
def test_random_kills_of_worker_replay_and_devices_change_no_release(tmp_path):
    trials = [(seed, "local" if seed % 4 == 3 else "central") for seed in range(FIRST_SEED, FIRST_SEED + TRIALS)]
    results = list(run_trials(trials, tmp_path, parallel=PARALLEL, **SHORT_TRIAL))
    killed = Counter(kill.split()[0].rstrip("01") for result in results for kill in result.kills)
    assert all(result.kills for result in results), "a schedule killed nothing"
    assert {"worker", "replay", "devices"} <= set(killed), killed
    assert not failed_trials(results), failed_trials(results)


def test_the_rotation_covers_every_benchmark_mechanism_within_four_days():
    covered = {mechanism for day in range(738_000, 738_004) for _, _, mechanism in rotation(day)}
    assert covered == set(BENCHMARK)
    assert rotation(738_000) == rotation(738_000) != rotation(738_001)


@pytest.mark.slow
def test_a_rotating_sample_of_the_benchmark_mechanisms_survives_random_kills(tmp_path):
    day = int(os.environ.get("WEVENT_CRASH_DAY", datetime.date.today().toordinal()))
    trials = rotation(day)
    print(f"crash trials of day {day} (WEVENT_CRASH_DAY={day} runs them again): "
          + ", ".join(f"{mechanism} seed {seed}" for seed, _, mechanism in trials))
    results = list(run_trials(trials, tmp_path, parallel=ROTATING, **SHORT_TRIAL))
    assert [result.mechanism for result in results] == [mechanism for _, _, mechanism in trials]
    assert all(result.kills for result in results), "a schedule killed nothing"
    assert not failed_trials(results), f"day {day} (WEVENT_CRASH_DAY={day}): {failed_trials(results)}"


def test_a_trial_whose_worker_cannot_start_says_why(tmp_path, monkeypatch):
    """A trial that stalls for a reason outside the stream (here its worker's web port is taken)
    reports the process that exited and where the group stands, not an error of its own."""
    import socket

    import wevent.stream.runtime.child_processes as child_processes

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()

    class WorkerOnTakenPort(child_processes.WorkerProcess):
        def __init__(self, config_path, bootstrap, web_port, log_path, **options):
            super().__init__(config_path, bootstrap, taken.getsockname()[1], log_path, **options)

    monkeypatch.setattr(child_processes, "WorkerProcess", WorkerOnTakenPort)
    with taken:
        [result] = run_trials([(FIRST_SEED, "central")], tmp_path, slots=4, horizon=1.0, timeout=15.0)
    assert result.verdict == "stalled" and result.released == 0, result.summary()
    # the schedule's kill at 1 s may find the first worker still starting: then its restart exits
    assert any(exit.startswith("worker-") and "Address already in use" in exit for exit in result.exits), result.exits
    assert "exited by themselves: worker-" in result.summary()
    assert set(result.positions) == {"committed", "states", "groups"}, result.positions
