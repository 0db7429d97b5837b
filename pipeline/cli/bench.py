"""``wevent bench ...``: benchmarks that print ratios against a baseline measured in the same run."""

from __future__ import annotations

import importlib

from ..stream.settings import Settings

# Benchmark modules under wevent.bench, each with register(subparsers).
BENCHMARKS = ("central", "local", "ingest", "producers", "decayed", "soak", "crash", "stream")


def register(sub, settings: Settings) -> None:
    p = sub.add_parser("bench", help="benchmarks (speed ratios against a baseline run alongside)")
    bench_sub = p.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK", parser_class=type(p))
    for name in BENCHMARKS:
        importlib.import_module(f"wevent.bench.{name}").register(bench_sub)
