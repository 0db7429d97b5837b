"""``wevent bench ...``: benchmarks that print ratios against a baseline measured in the same run."""

from __future__ import annotations

import importlib

from ..stream.settings import Settings
from . import COMMANDS
from ._help import add_command

# Benchmark modules under wevent.bench, each with register(subparsers).
BENCHMARKS = ("central", "local", "ingest", "producers", "decayed", "soak", "crash", "stream")


def register(sub, settings: Settings) -> None:
    p = add_command(
        sub, "bench", summary=COMMANDS["bench"],
        description="Benchmarks that print speed ratios against a baseline measured in the same run (a numpy "
        "floor, a per-user Python loop, one JSON message per report), so that the ratios hold on any machine.",
        examples=[("every central mechanism's time per slot", "wevent bench central --domains 1,100 --runs 1"),
                  ("what each benchmark measures", "wevent bench local --help")])
    bench_sub = p.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK", parser_class=type(p))
    for name in BENCHMARKS:
        importlib.import_module(f"wevent.bench.{name}").register(bench_sub)
