"""``wevent plot``: one stream's run as a PNG, from its release log (and audit log, and truth).

The reading, checking and drawing are :mod:`wevent.reproduce.run_picture`'s; this module parses
the options and says where the picture went.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..stream.settings import Settings
from . import COMMANDS
from ._common import UsageError, integer, readable_file, writable_file
from ._help import add_command

TOP = integer(1, 12)

EXAMPLES = [
    ("a run's releases, audit and truth; writes r.png",
     "wevent run --slots 100 --release-log r.jsonl --audit-log a.jsonl --truth-log t.jsonl && "
     "wevent plot r.jsonl --audit-log a.jsonl --truth t.jsonl"),
    ("the 5 busiest cells of a simulated run against the dump it read",
     "wevent replay synthetic --model lns --users 2000 --slots 200 --dump lns.npz && "
     "wevent simulate --input lns.npz --releases s.jsonl && "
     "wevent plot s.jsonl --truth lns.npz --top 5 -o lns.png"),
    ("two bins of a live stream", "wevent subscribe --no-verify --json --limit 500 > live.jsonl && "
     "wevent plot live.jsonl --stream taxi --bin 0 --bin 7 -o live.png"),
]


def register(sub, settings: Settings) -> None:
    p = add_command(
        sub, "plot", summary=COMMANDS["plot"], examples=EXAMPLES,
        description=("Draw one stream's run as a PNG, over its slots: the releases against the truth (when one is "
        "given), the strategy of every slot (publish, approximate, nullified, not sampled) as the releases record it, "
        "and the window spend at every slot against epsilon (with --audit-log, the audit's verdict too). Releases of "
        "d bins are drawn as their total (counts only: a local-model release is a share of the users per bin) and a "
        "few bins, each in a panel: the --top largest by their mean truth (by their mean release without a truth), "
        "or those named by --bin. Needs matplotlib (the reproduce extra: pip install -e '.[reproduce]' in the wevent "
        "checkout)."))
    p.add_argument("releases", type=readable_file,
                   help="release log: JSON lines of `wevent run --release-log`, `wevent subscribe --json` or "
                   "`wevent simulate --releases`")
    p.add_argument("--audit-log", type=readable_file, metavar="FILE",
                   help="the run's audit log (`wevent run --audit-log`): its verdict is written over the spend")
    p.add_argument("--truth", type=readable_file, metavar="FILE",
                   help="the truth: the feed dump the run replayed (`wevent replay ... --dump`, `wevent run --feed`), "
                   "or the truth log of `wevent run --truth-log`. The truth is the users' raw data: keep the picture "
                   "where you keep them")
    p.add_argument("--stream", "-s", help="the stream to draw when the log holds several")
    p.add_argument("--top", type=TOP, default=3, metavar="K",
                   help="draw the K largest bins (default: 3; at most 12)")
    p.add_argument("--bin", type=integer(0, None), action="append", metavar="I",
                   help="draw bin I (repeatable; instead of --top)")
    p.add_argument("--out", "-o", type=writable_file, metavar="PNG",
                   help="where to write the picture (default: the release log's name with .png)")
    p.set_defaults(handler=handle)


def handle(args) -> int:
    from ..reproduce.run_picture import choose_bins, draw_run, read_run
    from ..reproduce.style import check_matplotlib

    check_matplotlib()
    out = Path(args.out) if args.out else Path(args.releases).with_suffix(".png")
    if out.resolve() in {Path(f).resolve() for f in (args.releases, args.audit_log, args.truth) if f}:
        raise UsageError(f"the picture would overwrite the input {out}: give another name with --out")
    if not args.out:  # the default's directory is the release log's, which may be read-only
        try:
            writable_file(str(out))
        except argparse.ArgumentTypeError as exc:
            raise UsageError(f"the picture {out} {exc}: give another name with --out") from None
    run = read_run(args.releases, args.stream, args.audit_log, args.truth)
    draw_run(run, choose_bins(run, args.bin, args.top), out)
    print(f"wevent plot: {out}: {len(run.slots)} releases of stream {run.stream!r} ({run.mechanism})"
          + (f"; audit {run.audit}" if run.audit else ""), file=sys.stderr)
    return 0
