"""`wevent run --bootstrap` on a broker that keeps its streams: a run shows only releases made with
the parameters and the key it asked for.

The scenarios, each against a fresh tansu broker (given with --bootstrap, so that it outlives the
runs) and against Apache Kafka. After a BA run of 30 slots, a BD run at epsilon 0.5 on the same
stream printed and logged the BA releases as its own within a second; with 50 slots it then
waited for ever at slot 31, which M2 refuses (its parameters changed); a run under another key
continued the stream silently. Each now stops at once, in one line naming the stream and what
differs and how to start a new stream; a run of the same parameters and key continues the stream.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from wevent.core.randomness import SecretKey
from tests.integration.run_helpers import children, environment, kill_leftovers, start_run

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEY, OTHER_KEY = SecretKey.from_seed(41, "test").hex(), SecretKey.from_seed(42, "test").hex()
# seconds: a run that stops before starting a worker (the old code printed or waited instead); a
# bound on a whole process on a loaded machine, it means "promptly, not for ever"
AT_ONCE = 60


class Runs:
    """`wevent run --bootstrap` processes against one broker, each in its own directory."""

    def __init__(self, broker, tmp_path: Path) -> None:
        self.broker, self.tmp_path, self.count = broker, tmp_path, 0

    def run(self, *arguments: str, key: str = KEY, timeout: float = 300) -> tuple[int, str, Path, float]:
        """(exit status, stderr, directory, seconds) of one run; every process it started is gone after."""
        self.count += 1
        directory = self.tmp_path / f"run{self.count}"
        directory.mkdir()
        compat = {"WEVENT_TANSU_COMPAT": "1"} if self.broker.tansu_compat else {}
        env = environment(directory / "tmp", WEVENT_NOISE_KEY=key, **compat)
        began = time.monotonic()
        run = start_run(["--bootstrap", self.broker.bootstrap, "--quiet", "--speed", "0", *arguments], env, directory)
        started = {}
        try:
            while run.poll() is None and time.monotonic() - began < timeout:
                started.update(children(run.pid))
                time.sleep(0.2)
            status = run.wait(1)
        finally:
            kill_leftovers(run, started)
        return status, (directory / "stderr").read_text(), directory, time.monotonic() - began


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.fixture
def runs(broker, tmp_path):
    return Runs(broker, tmp_path)


def test_a_run_stops_at_once_on_a_stream_of_other_parameters_or_another_key(runs, broker):
    status, err, first, _ = runs.run("--slots", "30", "--release-log", "r.jsonl")
    assert status == 0, err[-3000:]
    published = (first / "r.jsonl").read_text().splitlines()
    assert len(published) == 30
    where = f"stream 'taxi' on {broker.bootstrap}"
    new_stream = "to start a new stream, pass --stream NAME"

    for slots in ("30", "50"):  # 30: it printed the BA releases as its own; 50: it then waited for ever
        status, err, directory, seconds = runs.run("--slots", slots, "-m", "bd", "-e", "0.5",
                                                   "--release-log", "r.jsonl", timeout=120)
        line = one_line(err)
        assert status == 2 and seconds < AT_ONCE, (status, seconds, err)
        assert line == (f"wevent run: error: {where} was made with other parameters: mechanism ba (this run: bd), "
                        f"epsilon 1 (this run: 0.5); {new_stream}")
        assert not (directory / "r.jsonl").exists()  # nothing shown, nothing logged

    status, err, _, seconds = runs.run("--slots", "30", key=OTHER_KEY, timeout=120)
    line = one_line(err)
    assert status == 2 and seconds < AT_ONCE, (status, seconds, err)
    assert re.fullmatch(rf"wevent run: error: {re.escape(where)} was made under another key: none of its \d+ records "
                        rf"on releases verifies under this run's release key \(fingerprint [0-9a-f]{{16}}\); "
                        rf"{new_stream}", line), line

    status, err, again, _ = runs.run("--slots", "30", "--release-log", "r.jsonl")  # its own parameters and key
    assert status == 0, err[-3000:]
    assert "stream 'taxi' exists, released up to slot 30 with these parameters and key: this run continues it" in err
    assert (again / "r.jsonl").read_text().splitlines() == published  # the same signed releases, byte for byte


@pytest.mark.kafka_only("the stream's releases expire while its state stays: Kafka's DeleteRecords, which tansu "
                        "lacks (it also ignores retention, so there its releases never expire)")
def test_a_run_stops_with_one_line_when_its_worker_refuses_its_parameters(runs, broker):
    """The stream's releases expired (retention) but its state did not: the start-up check sees no
    release, the worker starts, and M2 refuses slot 31 under the new parameters (config_changed).
    The run watches its stream's dead letters and stops with that line, instead of waiting."""
    status, err, _, _ = runs.run("--slots", "30")
    assert status == 0, err[-3000:]
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    from wevent.stream.runtime.kafka import client_config

    consumer = Consumer(client_config(broker.bootstrap) | {"group.id": "wevent-test-retention"})
    partitions = consumer.list_topics("releases", timeout=30).topics["releases"].partitions
    ends = [TopicPartition("releases", p, consumer.get_watermark_offsets(TopicPartition("releases", p), 30)[1])
            for p in partitions]
    consumer.close()
    admin = AdminClient(client_config(broker.bootstrap))  # kept: its futures complete only while it lives
    for future in admin.delete_records(ends).values():
        future.result(60)
    status, err, _, seconds = runs.run("--slots", "50", "-m", "bd", "-e", "0.5", timeout=240)
    started = re.search(r"follow it from another terminal: [^\n]*\n", err)  # the last line a started run prints
    assert started, err
    line = one_line(err[started.end():])
    assert status == 2, err
    assert line.startswith("wevent run: error: the worker stopped releasing stream 'taxi' (config_changed): slot 31 "
                           "not released: the config says "), line
    assert line.endswith("; to start a new stream, pass --stream NAME"), line
