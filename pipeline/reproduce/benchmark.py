"""Schäler, Hütter and Schäler's benchmark of w-event mechanisms (PVLDB 16(8), 2023), on our data.

The benchmark runs every central w-event mechanism over count streams and compares their errors,
over epsilon at w = 120 and over w at epsilon = 1, and ranks them: its finding is that the simple
baselines (Uniform, Sample) often beat the adaptive mechanisms. Here every central mechanism of
the registry runs with its defaults and the paper's Lap(1/eps) noise, scored by MAE and MRE; the
ranking is each method's rank by error among all of them at one (dataset, x), averaged over the
datasets (ties share their mean rank; :mod:`~wevent.reproduce.ranking`). The data is ours, or the
user's (``--streams DIR``); :data:`DIFFERENCES` says on the index how the set-up differs from the paper's.
"""

from __future__ import annotations

import functools
from pathlib import Path

from ..core.data import is_dump, load_input
from ..core.registry import mechanisms
from ..errors import UsageError
from .cells import Paper
from .figures import Figure, Scale

__all__ = ["PAPER", "METHODS", "paper", "read_streams", "DIFFERENCES", "OUR_DATA", "USER_DATA"]

SYNTHETIC = ("lns", "sin", "log")
DATASETS = (*SYNTHETIC, "tdrive-personalized", "foursquare-personalized")
# Kellaris et al.'s four first (the baselines Uniform and Sample among them), then the others by name.
METHODS = ("uniform", "sample", "bd", "ba",
           *sorted(n for n, cls in mechanisms().items() if cls.model == "central"
                   and n not in ("uniform", "sample", "bd", "ba")))
EPSILONS = (0.1, 0.3, 0.5, 0.7, 0.9, 1.0)
WINDOWS = (40, 80, 120, 160, 200)
# The paper's synthetic streams have 1,000 slots and maxima up to 10,000; ours are counts of 10,000
# users. A central mechanism's cost does not grow with the users: only the slots shrink at smaller
# scales, never below two of the longest window.
USERS, SLOTS = 10_000, 1_000
METRICS = ("mae", "mre")
STREAM_SUFFIXES = (".csv", ".npz")

OUR_DATA = ("the data are ours (the LNS, Sin and Log streams as two-bin counts of 10,000 users, the bundled T-Drive "
            "sample on the same 10 x 10 grid and the bundled Foursquare sample by country), far smaller and of other "
            "shapes than the paper's real streams")
USER_DATA = "the data are the streams given with --streams, not the paper's"
DIFFERENCES = (
    "How this differs from the paper. The paper runs each mechanism 100 times on real count streams (single "
    "series of flu outpatients, unemployment and flu deaths; flu cases by US state, d = 51; T-Drive taxis on a "
    "10 x 10 grid, d = 100; an online retail log and the World Cup log sampled to d = 1,289) and on periodic "
    "synthetic streams of 1,000 slots scaled to maxima of 10 to 10,000; over epsilon in 0.1, 0.3, 0.5, 0.7, 0.9, "
    "1.0 at w = 120 and over w in 40, 80, 120, 160, 200 at epsilon = 1. Ours keeps the sweeps, the mechanisms' "
    "published parameters, the Laplace noise and MAE, but: (1) {data}, so the absolute errors and the order of close competitors differ; (2) MRE divides by max(c, 1), where the paper's "
    "relative error floors each bin's denominator at 1% of that bin's total over the stream, which weighs "
    "sparse bins less; (3) releases are not clamped to non-negative integers (the paper clamps them on its "
    "real streams only; `--clamp-round` does it here); (4) 10 runs a cell (2 with --quick, which also runs "
    "3 points of each sweep and 400-slot synthetic streams), not 100; (5) the mechanisms run at their defaults "
    "(BD and BA without the budget shift), untuned per dataset."
)


def read_streams(directory: Path) -> dict[str, str]:
    """The streams of ``directory`` by name (file stem): each a CSV of counts (T rows, d columns, an
    optional header row) or a dump of user values (``wevent replay --dump``), as ``wevent simulate
    --input`` reads them. Every file is read once here, so a bad one is one line before any work."""
    if not directory.is_dir():
        raise UsageError(f"--streams {directory} is not a directory")
    files = sorted(p for p in directory.iterdir() if p.is_file() and p.suffix.lower() in STREAM_SUFFIXES)
    if not files:
        raise UsageError(f"--streams {directory} holds no stream: give CSV files of counts (T rows, d columns) "
                         "or .npz dumps of user values (`wevent replay --dump`)")
    streams: dict[str, str] = {}
    for path in files:
        if path.stem in streams:
            raise UsageError(f"--streams {directory}: two streams are named {path.stem!r}")
        if path.suffix.lower() == ".npz" and not is_dump(path):
            raise UsageError(f"{path} is not a wevent dump (.npz from `wevent replay --dump`)")
        load_input(path)  # a ParameterError (one line, exit status 2) names what is wrong with it
        streams[path.stem] = str(path.resolve())
    return streams


def _command(streams: dict[str, str] | None, figure: Figure, dataset: str, x, method: str, scale: Scale,
             inputs: dict) -> list[str]:
    epsilon, window = (x, 120) if figure.x == "epsilon" else (1.0, x)
    if streams:
        data = ["--input", streams[dataset]]
    elif dataset in SYNTHETIC:
        data = ["--dataset", dataset, "--users", str(USERS),
                "--slots", str(max(2 * max(WINDOWS), SLOTS // scale.shrink))]
    else:
        data = ["--input", inputs[dataset]]
    return [*data, "-m", method, "-e", f"{epsilon:g}", "-w", str(window), "--noise", "laplace"]


def paper(streams: dict[str, str] | None = None) -> Paper:
    """The benchmark on our datasets, or on ``streams`` (name -> CSV of counts or dump) instead."""
    datasets = tuple(streams) if streams else DATASETS
    data_note = ("the user's streams (--streams)" if streams else
                 "our LNS, Sin and Log streams as counts and the bundled T-Drive and Foursquare samples")
    figures = (
        Figure("error-vs-epsilon", "Error of every central mechanism vs. epsilon (w = 120)", "epsilon", EPSILONS,
               METHODS, METRICS, datasets, log_y=True,
               note=f"The benchmark's sweep over epsilon on {data_note}; Lap(1/eps) noise, defaults, untuned."),
        Figure("error-vs-w", "Error of every central mechanism vs. w (epsilon = 1)", "w", WINDOWS, METHODS, METRICS,
               datasets, log_y=True, note=f"The benchmark's sweep over w on {data_note}."),
    )
    return Paper("benchmark", "Schäler, Hütter and Schäler, Benchmarking the utility of w-event differential "
                 "privacy mechanisms: when baselines become mighty competitors, PVLDB 2023", figures,
                 command=functools.partial(_command, streams), ranked=True,
                 differences=DIFFERENCES.format(data=USER_DATA if streams else OUR_DATA))


PAPER = paper()
