"""``wevent advise``: rank every mechanism that fits a stream by its error on that stream.

``wevent advise --input FILE`` runs each mechanism of the chosen model that can run on FILE (what
``wevent simulate --input`` reads: a CSV of counts fits the central mechanisms; a dump of user
values fits them, over its counts, and the local ones, whose devices report the users' values)
over FILE for ``--runs`` seeds, exactly as ``wevent simulate`` runs it, and prints the mechanisms
from the smallest mean error to the largest, each with the standard error of that mean over the
runs (their sample standard deviation over the square root of their number); ``--out`` draws the
same as a PNG. The ranking is a function of the data: choosing a mechanism by it is a release of
that data which no mechanism's guarantee covers, so it is meant for public, synthetic or retired
data, and says so wherever it is shown.
"""

from __future__ import annotations

import argparse
import math
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.data import is_dump, load_input
from ..core.validation import ParameterError
from ..stream.settings import Settings
from . import COMMANDS
from ._common import UsageError, epsilon_value, readable_file, run_count, seed, window_length, writable_file
from ._help import add_command
from .simulate import FAMILIES, summary

__all__ = ["register", "WARNING", "Standing", "rank_mechanisms"]

WARNING = ("The ranking is a function of the data: run it on public, synthetic or retired data. Choosing a "
           "mechanism by its errors on private data is itself a release of that data, which the w-event "
           "guarantee of the chosen mechanism does not cover.")
MODELS = {family.name: family for family in FAMILIES if family.name in ("central", "local")}
METRICS = {"mae": "MAE", "mre": "MRE", "mse": "MSE"}

EXAMPLES = [
    ("the central mechanisms on a public dump, 5 runs each, ranked by MAE, with a picture",
     "wevent advise --input taxi.npz -e 1 -w 30 --out advice.png"),
    ("three of them by MRE over 20 runs",
     "wevent advise --input counts.csv --metric mre --runs 20 --mechanisms uniform,sample,fast-w"),
    ("the local mechanisms (a dump of user values only)", "wevent advise --input taxi.npz --model local -e 2 -w 20"),
]


def register(sub, settings: Settings) -> None:
    p = add_command(
        sub, "advise", summary=COMMANDS["advise"], examples=EXAMPLES,
        description=("Run every mechanism of a model that fits the stream in --input over it, for --runs seeds each, "
                     "as `wevent simulate` runs it, and print them from the smallest mean error to the largest, with "
                     "the standard error of each mean over the runs; --out also draws it.\n\n" + WARNING))
    data = p.add_argument_group("the stream")
    data.add_argument("--input", required=True, type=readable_file, metavar="FILE",
                      help="a CSV of counts (T rows, d columns) or a dump of user values (`wevent replay --dump`), "
                      "as `wevent simulate --input` reads them")
    data.add_argument("--model", choices=tuple(MODELS), default="central",
                      help="central (any input) or local (a dump only): which mechanisms compete (default: central)")
    privacy = p.add_argument_group("privacy")
    privacy.add_argument("--epsilon", "-e", type=epsilon_value, default=1.0,
                         help="privacy budget per window (default: 1)")
    privacy.add_argument("--window", "-w", type=window_length, default=20, help="window w in slots (default: 20)")
    comparison = p.add_argument_group("the comparison")
    comparison.add_argument("--runs", type=run_count, default=5, metavar="R",
                            help="runs of every mechanism, with the noise keys of seeds seed..seed+R-1 (default: 5)")
    comparison.add_argument("--seed", type=seed, default=0, help="the first run's seed (default: 0)")
    comparison.add_argument("--metric", choices=tuple(METRICS), default="mae",
                            help="the error that ranks them: mean absolute, mean relative (floored at 1 for counts, "
                            "1e-3 for a local model's frequencies) or mean squared error (default: mae)")
    comparison.add_argument("--mechanisms", type=_names, metavar="A,B,...",
                            help="only these mechanisms, comma-separated (default: every one of the model)")
    output = p.add_argument_group("output")
    output.add_argument("--out", "-o", type=writable_file, metavar="PNG",
                        help="also draw the ranking with its error bars into PNG (needs the reproduce extra)")
    p.set_defaults(handler=handle)


def _names(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(","))
    if not all(names):
        raise argparse.ArgumentTypeError(f"must be mechanism names separated by commas, got {text!r}")
    return names


@dataclass(frozen=True)
class Standing:
    """One mechanism's errors over the runs: their mean and the standard error of that mean."""

    mechanism: str
    errors: tuple[float, ...]

    @property
    def mean(self) -> float:
        return float(np.mean(self.errors))

    @property
    def standard_error(self) -> float:
        """The sample standard deviation over the square root of the runs; NaN for one run."""
        if len(self.errors) < 2:
            return math.nan
        return float(np.std(self.errors, ddof=1) / math.sqrt(len(self.errors)))


def _competitors(model: str, chosen: tuple[str, ...] | None) -> tuple[str, ...]:
    fitting = MODELS[model].mechanisms
    if chosen is None:
        return fitting
    unfit = [name for name in chosen if name not in fitting]
    if unfit:
        raise UsageError(f"--mechanisms: {', '.join(unfit)} not of the {model} model; choose among "
                         f"{', '.join(fitting)}")
    return tuple(dict.fromkeys(chosen))


def rank_mechanisms(path: str, model: str, epsilon: float, window: int, runs: int, first_seed: int, metric: str,
                    chosen: tuple[str, ...] | None = None) -> tuple[list[Standing], dict[str, str]]:
    """Every mechanism of ``model`` (or of ``chosen``) over the stream in ``path``, ``runs`` times each, from the
    smallest mean ``metric`` to the largest; and those that do not fit this stream at these parameters (a
    population division needs at least 2w users), each with the reason."""
    names = _competitors(model, chosen)
    if model == "local" and not is_dump(path):
        raise UsageError(f"{path}: the local model needs every user's values: give a dump (`wevent replay ... "
                         "--dump`), not a CSV of counts")
    load_input(path)  # a bad file is one line now, before any mechanism runs
    common = ["--input", path, "-e", f"{epsilon!r}", "-w", str(window)]
    if model == "local":
        common += ["--mode", "sufficient"]  # the reports' exact distribution, without drawing every report
    standings, unfit = [], {}
    for name in names:
        try:
            errors = [summary([*common, "-m", name, "--seed", str(first_seed + run)])[metric] for run in range(runs)]
        except ParameterError as exc:  # the mechanism refuses these parameters for this stream
            unfit[name] = " ".join(str(exc).split())
            continue
        standings.append(Standing(name, tuple(errors)))
    if not standings:
        raise UsageError(f"no {model} mechanism fits {path} at epsilon = {epsilon:g}, w = {window}: "
                         + "; ".join(f"{name}: {reason}" for name, reason in unfit.items()))
    return sorted(standings, key=lambda s: (s.mean, s.mechanism)), unfit


def handle(args) -> int:
    from ..reproduce.style import check_matplotlib

    if args.out:
        check_matplotlib()
    standings, unfit = rank_mechanisms(args.input, args.model, args.epsilon, args.window, args.runs, args.seed,
                                       args.metric, args.mechanisms)
    label = METRICS[args.metric]
    spread = (f"± the standard error of the mean over {args.runs} runs (seeds {args.seed}..{args.seed + args.runs - 1})"
              if args.runs > 1 else f"one run (seed {args.seed}): no spread; give --runs 2 or more")
    print(f"wevent advise: {args.model} mechanisms on {args.input}, epsilon = {args.epsilon:g}, w = {args.window}; "
          f"by mean {label}, {spread}")
    print(f"NOTE: {WARNING}")
    print()
    print(f"{'rank':>4}  {'mechanism':<12} {'mean ' + label:>14} {'± std. error':>14}")
    for place, standing in enumerate(standings, start=1):
        error = "-" if math.isnan(standing.standard_error) else f"{standing.standard_error:.4g}"
        print(f"{place:>4}  {standing.mechanism:<12} {standing.mean:>14.4g} {error:>14}")
    for name, reason in unfit.items():
        print(f"   -  {name:<12} does not fit: {reason}")
    if args.out:
        _draw(standings, args, label, spread, Path(args.out))
        print(f"wevent advise: {args.out}", file=sys.stderr)
    return 0


def _draw(standings: list[Standing], args, label: str, spread: str, path: Path) -> None:
    """The ranking as horizontal error bars, the smallest error at the top."""
    from ..reproduce.style import method_label, method_style, pyplot, save

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 1.2 + 0.4 * len(standings)), layout="constrained")
    for place, standing in enumerate(standings):
        style = method_style(standing.mechanism)
        error = None if math.isnan(standing.standard_error) else standing.standard_error
        ax.errorbar(standing.mean, place, xerr=error, fmt=style["marker"], color=style["color"],
                    markerfacecolor="none", capsize=3, gid=standing.mechanism)
    ax.set_yticks(range(len(standings)), [method_label(s.mechanism) for s in standings])
    ax.invert_yaxis()  # rank 1 at the top
    ax.set_xlabel(f"mean {label}, {spread}", fontsize=8)
    ax.grid(alpha=0.3, axis="x")
    ax.set_title(f"{args.model} mechanisms on {Path(args.input).name} (epsilon = {args.epsilon:g}, w = {args.window})",
                 fontsize=9)
    fig.supxlabel(textwrap.fill(WARNING, 110), fontsize=7)
    save(fig, path)
