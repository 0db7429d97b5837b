"""``wevent bench producers``: T-Drive preprocessing time per million lines, against a csv-module loop,
and reports per second from the files into a broker.

The input is T-Drive-format files written to a temporary directory by the fixture generator
(:func:`wevent.producers.fixtures.generate.tdrive_sample`, gaps of 170 s like the real data's ~177 s,
its malformed lines included). The vectorised reader (:func:`wevent.producers.tdrive.read_tdrive`) reads
all of it; the baseline (:func:`csv_baseline`: ``csv.reader``, ``datetime.strptime``, ``float``
and dictionaries, one line at a time) reads the first files up to ``--baseline-lines``. Both build
the same (slot x taxi) matrix and skip the same lines; the benchmark checks that on the baseline's
files before printing the ratio. The baseline is also the tests' slow reference implementation.

Then the preprocessed matrix is replayed as fast as the broker takes it (the embedded tansu broker,
one record per batch, or ``--bootstrap``) through the same sink as ``wevent replay``: batched
binary reports and per-partition watermarks. Its rate, and the file-to-broker rate including the
preprocessing, are printed.
"""

from __future__ import annotations

import calendar
import csv
import math
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np

from ..cli._help import add_command
from ..cli._common import bootstrap_servers, partition_count, reachable_kafka, seed, user_count
from ..core.data import ABSENT, UserValues


def register(sub) -> None:
    p = add_command(
        sub, "producers", summary="T-Drive preprocessing time per million lines against a csv-module loop",
        description='Time the T-Drive preprocessing per million lines against a csv-module loop, and the replay into the reports topic.',
        examples=[
        ('the default sizes, against the embedded broker', 'wevent bench producers'),
        ('smaller inputs', 'wevent bench producers --lines 200000 --baseline-lines 50000')])
    p.add_argument("--lines", type=user_count, default=1_000_000,
                   help="input lines for the vectorised reader (default: 1000000)")
    p.add_argument("--baseline-lines", type=user_count, default=200_000,
                   help="lines for the csv baseline (default: 200000)")
    p.add_argument("--partitions", type=partition_count, default=4, help="partitions of the reports topic (default: 4)")
    p.add_argument("--bootstrap", "-b", type=bootstrap_servers,
                   help="a Kafka to send to instead of the embedded broker")
    p.add_argument("--seed", type=seed, default=0)
    p.set_defaults(handler=handle)


def reference_matrix(records: list[tuple[str, int, int]], labels: list[str], slot_seconds: float, absent: str,
                     max_slots: int | None = None, name: str = "data") -> UserValues:
    """The preprocessing rules written out with Python loops: ``records`` are (user id, epoch s, value) in
    read order. See :mod:`wevent.producers.preprocess` for the rules."""
    start = min(t for _, t, _ in records)
    slots = int((max(t for _, t, _ in records) - start) // slot_seconds) + 1
    if max_slots is not None:
        slots = min(slots, max_slots)
    latest: dict[tuple[str, int], tuple[int, int]] = {}
    for user, moment, value in records:
        key = (user, int((moment - start) // slot_seconds))
        if key not in latest or moment >= latest[key][0]:  # equal times: the later line wins
            latest[key] = (moment, value)
    distinct = {user for user, _, _ in records}
    numeric = all(i.isascii() and i.isdigit() for i in distinct)
    ids = sorted(distinct, key=(lambda i: (len(i), i)) if numeric else (lambda i: i.encode()))
    by_user: dict[str, dict[int, int]] = {i: {} for i in ids}
    for (user, slot), (_, value) in latest.items():
        by_user[user][slot] = value
    labels = list(labels) + (["absent"] if absent == "category" else [])
    matrix = np.full((slots, len(ids)), ABSENT, dtype=np.int64)
    for column, user in enumerate(ids):
        seen = by_user[user]
        current = seen[min(seen)] if absent == "carry-forward" else ABSENT
        for slot in range(slots):
            if slot in seen:
                current = seen[slot]
            elif absent != "carry-forward":
                current = ABSENT if absent == "none" else len(labels) - 1
            matrix[slot, column] = current
    return UserValues(matrix, domain_size=len(labels), labels=labels, user_ids=ids, slot_seconds=float(slot_seconds),
                      start=float(start), name=name)


def csv_baseline(files: list[str], profile) -> tuple[UserValues, dict[str, list[tuple[str, int]]]]:
    """T-Drive read one line at a time with the csv module; returns the matrix and the skipped lines by reason."""
    box, (rows, cols) = profile.box, profile.grid
    skipped: dict[str, list[tuple[str, int]]] = {}
    records = []
    for path in files:
        with open(path, newline="", encoding="latin-1") as handle:
            for number, row in enumerate(csv.reader(handle), start=1):
                reason, record = _baseline_line(row, profile, box, rows, cols)
                if reason:
                    skipped.setdefault(reason, []).append((path, number))
                elif record:
                    records.append(record)
    labels = [f"r{r}c{c}" for r in range(rows) for c in range(cols)]
    return reference_matrix(records, labels, profile.slot_seconds, profile.absent, profile.max_slots, "tdrive"), skipped


def _baseline_line(row: list[str], profile, box, rows: int, cols: int):
    """(skip reason, None) or (None, (taxi, epoch, cell)); (None, None) for a blank line."""
    if not row:
        return None, None
    if len(row) != 4:
        return "wrong column count", None
    taxi, stamp, lon_text, lat_text = row
    if not 0 < len(taxi.encode("latin-1")) <= 256:
        return "bad field", None
    try:
        moment = calendar.timegm(datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").timetuple())
    except ValueError:
        return "bad time", None
    try:
        lon, lat = float(lon_text), float(lat_text)
    except ValueError:
        return "bad number", None
    if not (math.isfinite(lon) and math.isfinite(lat)):
        return "bad number", None
    if not (box.lon_min <= lon <= box.lon_max and box.lat_min <= lat <= box.lat_max):
        return "outside box", None
    col = min(int((lon - box.lon_min) / (box.lon_max - box.lon_min) * cols), cols - 1)
    row_index = min(int((lat - box.lat_min) / (box.lat_max - box.lat_min) * rows), rows - 1)
    return None, (taxi, moment - profile.utc_offset_minutes * 60, row_index * cols + col)


def handle(args) -> int:
    from wevent.producers.fixtures.generate import tdrive_sample, write
    from wevent.producers.tdrive import PROFILES, read_tdrive, tdrive_files

    if args.bootstrap:
        reachable_kafka(args.bootstrap, args.settings)  # fail now, not after the preprocessing runs
    profile = PROFILES["personalized"]
    taxis = max(1, round(args.lines / (22 * 3600 / 170)))  # a taxi drives ~22 of the 24 hours
    with tempfile.TemporaryDirectory(prefix="wevent-bench-") as tmp:
        write(Path(tmp), tdrive_sample(args.seed, taxis=taxis, mean_gap=170.0))
        files = tdrive_files([tmp])
        start = time.perf_counter()
        fast = read_tdrive(files, profile)
        fast_seconds = time.perf_counter() - start
        subset, lines = [], 0
        for path in files:
            if lines >= args.baseline_lines:
                break
            subset.append(path)
            with open(path, "rb") as fh:
                lines += fh.read().count(b"\n")
        start = time.perf_counter()
        slow, slow_skipped = csv_baseline(subset, profile)
        slow_seconds = time.perf_counter() - start
        check = read_tdrive(subset, profile)
    agree = (np.array_equal(check.values.values, slow.values) and check.values.user_ids == slow.user_ids
             and check.skipped.counts == {r: len(v) for r, v in slow_skipped.items()})
    fast_rate, slow_rate = fast.lines / fast_seconds, lines / slow_seconds
    print(f"T-Drive format, personalized profile ({profile.grid[0]}x{profile.grid[1]} grid, "
          f"{profile.slot_seconds:g} s slots): {fast.lines:,} lines in {len(files):,} files, "
          f"{fast.values.users:,} taxis x {fast.values.slots:,} slots; csv baseline on the first {lines:,} lines")
    print(f"{'reader':<12} {'lines':>11} {'seconds':>9} {'s per 1M lines':>15} {'lines/s':>12}")
    print(f"{'wevent':<12} {fast.lines:>11,} {fast_seconds:>9.2f} {fast_seconds / fast.lines * 1e6:>15.2f} "
          f"{fast_rate:>12,.0f}")
    print(f"{'csv loop':<12} {lines:>11,} {slow_seconds:>9.2f} {slow_seconds / lines * 1e6:>15.2f} {slow_rate:>12,.0f}")
    print(f"speed-up {fast_rate / slow_rate:.1f}x; same matrix and skipped lines on the baseline's files: {agree}")
    reports, sending = to_broker(fast.values, args.partitions, args.bootstrap, args.settings)
    print(f"to the broker: {reports:,} reports in {sending:.2f} s = {reports / sending:,.0f} reports/s; file to broker "
          f"(preprocessing included): {reports / (fast_seconds + sending):,.0f} reports/s "
          f"({fast.lines / (fast_seconds + sending):,.0f} input lines/s)")
    return 0 if agree else 1


def to_broker(values: UserValues, partitions: int, bootstrap: str | None, settings) -> tuple[int, float]:
    """Replay ``values`` into ``reports`` as fast as possible: (reports sent, seconds until all acknowledged);
    the embedded broker's memory limit and the Kafka credentials are those ``settings`` give."""
    from wevent.producers.replay import MatrixFeed, replay

    from ..stream.runtime.broker import EmbeddedBroker, create_topics
    from ..stream.runtime.kafka import KafkaReportSink
    from ..stream.wire.topics import REPORTS

    broker = None
    if not bootstrap:
        broker = EmbeddedBroker(memory_limit_mb=settings.broker_memory_limit_mb()).start()
        bootstrap = broker.bootstrap
    try:
        credentials = settings.kafka_credentials()
        create_topics(bootstrap, {REPORTS: partitions}, credentials=credentials)
        sink = KafkaReportSink(bootstrap, "taxi", partitions, tansu_compat=broker is not None, credentials=credentials)
        start = time.perf_counter()
        stats = replay(MatrixFeed(values), sink)  # closes the sink: every message acknowledged
        return stats.reports, time.perf_counter() - start
    finally:
        if broker:
            broker.stop()
