"""The processors, their logic and the codecs need no metrics library: they return events, and only
the worker (or a test harness) exports them to Prometheus."""

import json
import subprocess
import sys

SCRIPT = """
import importlib.abc
import json
import sys


class NoPrometheus(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "prometheus_client":
            raise ImportError(f"{name} is not installed here")
        return None


sys.meta_path.insert(0, NoPrometheus())

import numpy as np

from wevent.stream.wire.reports import ReportBatch, Watermark
from wevent.stream.config import parse_config
from wevent.stream.agents.processors import Processors
from wevent.stream.settings import Settings

config = parse_config({"seed": 1, "report_partitions": 1, "stream_partitions": 1, "streams": [{
    "name": "s", "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 5, "domain": 2, "users": 4,
    "slot_seconds": 60, "start": 0.0}]})
assembler = Processors.build(config, Settings()).assembler
table = {}
seen = []
for offset, raw in enumerate([ReportBatch("s", np.arange(4), np.array([0, 1, 1, 7]), np.full(4, 1000)).encode(),
                              Watermark("s", 60.0).encode()]):
    outputs, updates, events = assembler.process(raw, "reports", 0, offset, table.get, 0.0)
    table.update(updates)
    seen.append({"topics": [out.topic for out in outputs], "accepted": dict(events.reports_accepted),
                 "rejected": [[*labels, n] for labels, n in events.reports_rejected.items()],
                 "closed": dict(events.slots_closed)})
print(json.dumps({"seen": seen, "prometheus_loaded": any(m.startswith("prometheus_client") for m in sys.modules)}))
"""


def test_a_message_runs_through_a_processor_without_prometheus_client():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert not result["prometheus_loaded"]
    batch, watermark = result["seen"]
    assert batch == {"topics": ["deadletter"], "accepted": {"s": 3}, "rejected": [["s", "out_of_domain", 1]],
                     "closed": {}}
    assert watermark == {"topics": ["slots"], "accepted": {}, "rejected": [], "closed": {"s": 1}}
