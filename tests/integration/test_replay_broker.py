"""`wevent replay` into a real broker delivers every report exactly as dumped."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from wevent.core.data import UserValues
from wevent.stream.runtime.broker import create_topics
from wevent.stream.wire.reports import ReportBatch, Watermark, decode_report_message
from wevent.stream.config import parse_config
from wevent.stream.runtime.child_processes import write_config
from wevent.stream.runtime.subscription import read_topic
from tests.integration.conftest import compat_flags

pytestmark = [pytest.mark.integration]

TDRIVE = Path(__file__).resolve().parents[2] / "producers" / "fixtures" / "tdrive"
PROFILE = ["--grid", "4x4", "--slot-seconds", "300"]


def digest(rows) -> str:
    """Order-free checksum of (slot start ms, user, value) triples."""
    rows = np.asarray(sorted(rows), dtype=np.int64)
    return hashlib.sha256(rows.tobytes()).hexdigest()


def test_replayed_reports_equal_the_dump(broker, tmp_path):
    dump = tmp_path / "taxi.npz"
    subprocess.run([sys.executable, "-m", "wevent.cli", "replay", "tdrive", str(TDRIVE), *PROFILE, "--dump", str(dump),
                    "--no-progress"], check=True, capture_output=True, timeout=120)
    values = UserValues.load(dump)
    config = parse_config({"seed": 1, "report_partitions": 3, "stream_partitions": 1, "streams": [{
        "name": "taxi", "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 20,
        "domain": values.domain_size, "users": values.users, "slot_seconds": values.slot_seconds,
        "start": values.start}]})
    create_topics(broker.bootstrap, config.topics())
    sent = subprocess.run([sys.executable, "-m", "wevent.cli", "replay", "tdrive", str(TDRIVE), *PROFILE,
                           "--config", str(write_config(config, tmp_path)), "--bootstrap", broker.bootstrap,
                           *compat_flags(broker), "--no-progress", "--json"], capture_output=True, text=True, timeout=300)
    assert sent.returncode == 0, sent.stderr

    delivered, watermarks = [], 0
    for value in read_topic(broker.bootstrap, "reports"):
        message = decode_report_message(value)
        if isinstance(message, Watermark):
            watermarks += 1
            continue
        assert isinstance(message, ReportBatch) and message.stream == "taxi"
        delivered += zip(message.times_ms.tolist(), message.users.tolist(), message.values.tolist())
    slot_ms = np.array([round((values.start + (t - 1) * values.slot_seconds) * 1000) for t in range(1, values.slots + 1)])
    present = values.values >= 0
    t, u = np.nonzero(present)
    dumped = list(zip(slot_ms[t].tolist(), u.tolist(), values.values[present].tolist()))
    assert len(delivered) == len(dumped) == int(present.sum())
    assert digest(delivered) == digest(dumped)
    # every partition: the replay's first watermark (at the start of slot 1), then one closing each slot
    assert watermarks == (values.slots + 1) * config.report_partitions
