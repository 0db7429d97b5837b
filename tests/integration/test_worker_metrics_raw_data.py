"""A worker's default /metrics is no function of the raw data: only of messages and releases.

Two runs of the same stream send the same messages (one batch per partition and slot, then a
watermark per partition) that carry very different numbers of reports: a few in one run, hundreds
in the other, with rejected reports of the same reasons in every batch of both (so each batch is
dead-lettered for the same reasons). The stream's mechanism, Uniform, publishes every slot with the
same budget whatever the data, so the releases' metrics match too. Every series the default page
serves must then have the same value in both runs, except those that measure time, the process or
the consumer group (each named below with why). With ``--export-report-counts`` the exact counts appear, and they are
the only difference.
"""

from __future__ import annotations

import urllib.request

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from wevent.stream.config import parse_config
from wevent.stream.runtime.broker import EmbeddedBroker, create_topics, free_port
from wevent.stream.runtime.child_processes import WorkerProcess, wait_until, write_config
from wevent.stream.runtime.kafka import KafkaReportSink
from wevent.stream.runtime.subscription import read_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]

START = 1_700_000_000.0
SLOTS = 6
PARTITIONS = 2
DOMAIN = 4
CONFIG = parse_config({"seed": 5, "report_partitions": PARTITIONS, "stream_partitions": 1, "streams": [
    {"name": "counted", "model": "central", "mechanism": "uniform", "epsilon": 1.0, "window": 3, "domain": DOMAIN,
     "users": 2000, "slot_seconds": 60, "start": START}]})
RAW_DATA = ("wevent_reports_accepted_total", "wevent_reports_rejected_total")
# Series that follow the clock or the process, not the input: latencies and timings (the events
# they time are counted elsewhere too), wall times (a counter's _created, a release's time), the
# process's own resources, the metrics page's own requests.
TIMING = ("_latency", "_runtime_ms", "_timestamp_seconds", "wevent_faust_http_")
PROCESS = ("process_", "python_gc_", "python_info")
# Faust's counts of consumer-group events (assignments, rebalances, those recovering): a run has
# as many as the group's joins take, which the broker's and the machine's timing decide.
GROUP = ("_assignment_operations", "_total_rebalances")


def reports(valid: int, rejected: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Per partition: ``valid`` distinct users with values in the domain, then ``rejected`` more
    out-of-domain values and ``rejected`` repeats of the first user (duplicates)."""
    users, values = [], []
    for p in range(PARTITIONS):
        owned = np.arange(p, PARTITIONS * (valid + rejected), PARTITIONS)
        users += [owned[:valid], owned[valid:valid + rejected], np.full(rejected, owned[0])]
        values += [rng.integers(0, DOMAIN, valid), np.full(rejected, DOMAIN), rng.integers(0, DOMAIN, rejected)]
    return np.concatenate(users), np.concatenate(values)


def scrape(port: int) -> dict[tuple, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def compared(samples: dict[tuple, float]) -> dict[tuple, float]:
    """The samples that must not depend on the number of reports."""
    return {key: value for key, value in samples.items() if not key[0].startswith(PROCESS + RAW_DATA)
            and not key[0].endswith("_created") and not any(part in key[0] for part in TIMING + GROUP)}


def run(tmp_path, valid: int, rejected: int, *flags: str) -> tuple[dict[tuple, float], int]:
    """One run on a broker of its own: every slot sent and released; the metrics once they settle,
    and how many messages were sent."""
    rng = np.random.default_rng(valid)
    tmp_path.mkdir()
    with EmbeddedBroker() as broker:
        create_topics(broker.bootstrap, CONFIG.topics())
        worker = WorkerProcess(write_config(CONFIG, tmp_path), broker.bootstrap, free_port(), tmp_path / "worker.log",
                               tansu_compat=True, datadir=tmp_path / "data")
        worker.command += flags
        worker.start()
        try:
            sink = KafkaReportSink(broker.bootstrap, "counted", PARTITIONS, tansu_compat=True)
            stream = CONFIG.streams[0]
            for slot in range(1, SLOTS + 1):
                users, values = reports(valid, rejected, rng)
                sink.send_slot(slot, stream.slot_start(slot), stream.slot_end(slot), users, values)
            sink.close()
            assert wait_until(lambda: len(read_topic(broker.bootstrap, "releases", timeout=2)) >= SLOTS, 120), \
                worker.log_tail()
            # Faust commits every few seconds: read until two scrapes 3 s apart agree.
            seen = [compared(scrape(worker.web_port))]
            assert wait_until(lambda: seen.append(compared(scrape(worker.web_port))) or seen[-1] == seen[-2], 60, 3.0)
            return scrape(worker.web_port), sink.messages_sent
        finally:
            worker.stop()


def test_the_default_metrics_depend_on_messages_and_releases_not_on_reports(tmp_path):
    few, few_messages = run(tmp_path / "few", 2, 1)
    many, many_messages = run(tmp_path / "many", 300, 40, "--export-report-counts")

    assert few_messages == many_messages  # watermarks, and one batch per partition and slot
    assert not [key for key in few if key[0].startswith(RAW_DATA)]
    assert compared(few) == compared(many)
    batches = ("wevent_report_batches_total", (("stream", "counted"),))
    assert few[batches] == many[batches] == SLOTS * PARTITIONS
    # What the option adds: the exact counts, a function of the raw data.
    per_slot = SLOTS * PARTITIONS
    assert many["wevent_reports_accepted_total", (("stream", "counted"),)] == 300 * per_slot
    for reason in ("out_of_domain", "duplicate"):
        assert many["wevent_reports_rejected_total", (("reason", reason), ("stream", "counted"))] == 40 * per_slot
