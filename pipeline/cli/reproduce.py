"""``wevent reproduce``: regenerate the papers' tables and figures as CSV, PNG and an index.

``wevent reproduce [PAPER|all] [--quick] [--out DIR] [--runs K] [--jobs J] [--data DIR] [--streams DIR]
[--thumbnails DIR]`` computes every cell (dataset, x, method, run) of the chosen papers (and of the
benchmark of every central mechanism, ``benchmark``) over ``--jobs`` processes,
caching each under ``OUT/cells`` so that a rerun reuses what is finished, then writes
``OUT/PAPER/FIGURE.csv`` and ``.png``, ``OUT/index.md`` and ``OUT/results.md`` (README's tables).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..stream.settings import SCALE_ENV, Settings
from ._common import directory, integer, run_count
from . import COMMANDS
from ._help import add_command

def register(sub, settings: Settings) -> None:
    from ..reproduce import PAPERS

    p = add_command(sub, "reproduce", summary=COMMANDS["reproduce"], examples=[
        ("every paper in minutes, with fewer runs, points and slots", "wevent reproduce --quick"),
        ("one paper at full scale, into a directory of its own", "wevent reproduce kellaris --out kellaris-full"),
        ("on the full datasets instead of the bundled samples", "wevent reproduce ldp-ids --data ~/datasets"),
        ("the benchmark of every central mechanism: error over epsilon and w, and the ranking",
         "wevent reproduce benchmark --quick --out bench-out"),
        ("the benchmark on your own streams: a directory of CSVs of counts (T rows, d columns) or .npz dumps",
         "wevent reproduce benchmark --streams my-streams/ --out my-bench")],
                       description="Regenerate every table and figure of the papers our data allows: one CSV per "
                       "figure or table (exact parameters and seeds in its header), one PNG per figure and "
                       "an index.md beside the papers' printed values. Finished cells are reused on a rerun. "
                       "'benchmark' is Schäler et al.'s benchmark (PVLDB 2023): the error of every central "
                       "mechanism over epsilon and w, and their mean rank over the datasets.")
    p.add_argument("paper", nargs="?", default="all", choices=[*PAPERS, "all"], help="which paper (default: all)")
    p.add_argument("--quick", action="store_true", help="fewer runs, points and slots: all papers in minutes")
    p.add_argument("--out", type=directory, default="reproduce", metavar="DIR",
                   help="output and cache directory (default: ./reproduce)")
    p.add_argument("--runs", type=run_count, default=None, metavar="K",
                   help="runs per cell, seeds 0..K-1 (default: 10, or 2 with --quick)")
    p.add_argument("--jobs", type=integer(1, 256), default=os.cpu_count() or 1, metavar="J",
                   help="parallel processes (default: the number of CPUs)")
    p.add_argument("--data", type=_existing_directory, metavar="DIR", help="full datasets instead of the bundled "
                   "samples: DIR/tdrive (T-Drive taxi files) and/or DIR/foursquare (TIST2015 check-ins and POIs)")
    p.add_argument("--streams", type=_existing_directory, metavar="DIR", help="benchmark only: run it on the "
                   "streams in DIR instead of ours, each a CSV of counts (T rows, d columns, an optional header "
                   "row) or a .npz dump of user values (`wevent replay --dump`), named by its file name")
    p.add_argument("--thumbnails", type=directory, metavar="DIR", help="also draw the figures README.md shows "
                   "(LDP-IDS Fig. 3, Du et al. Fig. 11, Kellaris et al. Fig. 6, Sun et al. Figs. 7-9), 900 pixels "
                   "wide, into DIR")
    p.add_argument("--progress", dest="progress", action="store_true", default=None, help="always show a progress bar")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="never show a progress bar")
    p.set_defaults(handler=handle)


def _existing_directory(text: str) -> str:
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"must be an existing directory, got {text!r}")
    return text


def handle(args) -> int:
    from ..reproduce import PAPERS, benchmark, use_streams
    from ..reproduce.figures import SCALES
    from ..reproduce.style import check_matplotlib
    from ..reproduce.runner import run
    from ._common import UsageError
    from .simulate import summary

    check_matplotlib()
    scale_name = args.settings.reproduce_scale or ("quick" if args.quick else "full")
    if scale_name not in SCALES:
        raise UsageError(f"{SCALE_ENV} must be one of {', '.join(SCALES)}, got {scale_name!r}")
    scale = SCALES[scale_name]
    if args.data and not any(os.path.isdir(os.path.join(args.data, feed)) for feed in ("tdrive", "foursquare")):
        raise UsageError(f"--data {args.data} has neither a tdrive nor a foursquare directory")
    if args.streams and args.paper != benchmark.PAPER.name:
        raise UsageError(f"--streams runs the benchmark only: wevent reproduce {benchmark.PAPER.name} --streams DIR")
    streams = benchmark.read_streams(Path(args.streams)) if args.streams else None
    use_streams(streams)
    papers = list(PAPERS.values()) if args.paper == "all" else [PAPERS[args.paper]]
    done = run(papers, scale, Path(args.out), args.runs or scale.runs, args.jobs,
               Path(args.data) if args.data else None, summary, args.progress,
               Path(args.thumbnails) if args.thumbnails else None, streams)
    spent = "; ".join(f"{name} {seconds:.0f}" for name, seconds in done["cpu_seconds"].items())
    print(f"wevent reproduce: {done['computed']} cells computed, {done['reused']} reused, "
          f"{len(done['files'])} files in {args.out} ({done['seconds']:.0f} s"
          f"{f'; CPU seconds of the cells computed: {spent}' if spent else ''}); see {Path(args.out) / 'index.md'}",
          file=sys.stderr)
    return 0
