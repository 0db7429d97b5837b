"""The privacy core is numpy only: importing every module of it loads no stream, broker or metrics library."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("faust", "kafka", "aiokafka", "confluent_kafka", "prometheus_client")

PROBE = """
import importlib, pkgutil, sys
import wevent.core
for module in pkgutil.walk_packages(wevent.core.__path__, "wevent.core."):
    importlib.import_module(module.name)
roots = {name.split(".")[0] for name in sys.modules}
print(" ".join(sorted(roots & set(sys.argv[1:]))))
print(sum(1 for name in sys.modules if name.startswith("wevent.core")))
"""


def test_the_core_imports_nothing_of_faust_kafka_or_prometheus():
    # A fresh interpreter: this test process has imported the stream layer already.
    done = subprocess.run([sys.executable, "-c", PROBE, *FORBIDDEN], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert done.returncode == 0, done.stderr
    loaded, core_modules = done.stdout.splitlines()
    assert loaded == ""
    assert int(core_modules) >= 50  # every module was imported, not just the package
