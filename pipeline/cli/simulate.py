"""``wevent simulate``: run mechanisms over a generated or supplied stream and summarise them.

Each model family (central; the local model and personalized families add theirs) is a module
of its own contributing its mechanism names, its own settings and a runner
(:class:`~wevent.cli.simulate_family.Family`); the mechanisms' options are flags made from their
declarations (:mod:`~wevent.cli.simulate_options`); this front end owns the shared options and the
output, and dispatches to them.
"""

from __future__ import annotations

import json
import sys
from typing import Iterable

from ..core.synthetic import MODELS
from ..stream.settings import Settings
from ._common import (OneLineParser, UsageError, epsilon_value, readable_file, real, seed,
                      run_count, slot_count, user_count, window_length, writable_file)
from . import simulate_central, simulate_local, simulate_personalized
from . import COMMANDS
from ._help import add_command
from .simulate_family import Family, Outcome
from .simulate_options import add_option_flags, settle_options

__all__ = ["register", "summary", "Family", "Outcome"]


FAMILIES: tuple[Family, ...] = (simulate_central.FAMILY, simulate_local.FAMILY, simulate_personalized.FAMILY)


def _family_of(mechanism: str) -> Family:
    for family in FAMILIES:
        if mechanism in family.mechanisms:
            return family
    raise UsageError(f"unknown mechanism {mechanism!r}")


def _runs(mechanism: str) -> list[tuple[Family, str]]:
    """The (family, mechanism) runs ``--mechanism`` asks for: one, the central model's comparison
    (``all``), or every mechanism of a family (``all-FAMILY``)."""
    if mechanism == "all":
        return [(simulate_central.FAMILY, name) for name in simulate_central.FAMILY.compared]
    family = next((f for f in FAMILIES if f"all-{f.name}" == mechanism), None)
    if family is not None:
        return [(family, name) for name in family.mechanisms]
    return [(_family_of(mechanism), mechanism)]


def register(sub, settings: Settings) -> None:
    names = [m for f in FAMILIES for m in f.mechanisms]
    p = add_command(
        sub, "simulate", summary=COMMANDS["simulate"],
        description="Run one mechanism (or several: -m all, -m all-FAMILY) over a synthetic stream or a file, in "
        "this process, and summarise its error (MAE, MRE, MSE), publications and the largest window spend.\n\n"
        "Options that the mechanisms run do not take are refused, not ignored: each mechanism option says which "
        "mechanisms take it, and each model's group says which model its settings are for.",
        examples=[("Kellaris et al.'s four central mechanisms on the same synthetic stream",
                   "wevent simulate -m all --slots 200"),
                  ("a local-model mechanism with the OUE oracle, as JSON", "wevent simulate -m lpd --oracle oue "
                   "--users 20000 --slots 100 --json"),
                  ("a dump of real users' values (`wevent replay ... --dump`)",
                   "wevent replay synthetic --model lns --users 2000 --slots 200 --dump lns.npz && "
                   "wevent simulate --input lns.npz -m lba")])
    groups = [f"all-{f.name}" for f in FAMILIES]
    compared = ", ".join(simulate_central.FAMILY.compared)
    what = p.add_argument_group("what to run")
    what.add_argument("--mechanism", "-m", default="ba", choices=names + ["all"] + groups, metavar="NAME",
                      help=f"mechanism to run, one of {', '.join(names)} "
                   f"(default: ba); 'all' compares Kellaris et al.'s central mechanisms ({compared}) on the same "
                   "data, 'all-FAMILY' every mechanism of a family")
    stream = p.add_argument_group("stream (a synthetic one, or --input)")
    data = stream.add_mutually_exclusive_group()
    data.add_argument("--dataset", choices=sorted(MODELS), default="lns", help="synthetic stream (default: lns)")
    data.add_argument("--input", metavar="FILE", type=readable_file,
                      help="a CSV of counts (T rows, d columns) or a dump "
                      "of user values (`wevent replay --dump`, recognised by its content)")
    stream.add_argument("--users", type=user_count, default=None, help="users of the synthetic stream (default: 10000)")
    stream.add_argument("--slots", type=slot_count, default=None, help="slots of the synthetic stream (default: 800)")
    privacy = p.add_argument_group("privacy (of the central and local models)")
    privacy.add_argument("--epsilon", "-e", type=epsilon_value, default=None, help="privacy budget per window (default: 1)")
    privacy.add_argument("--window", "-w", type=window_length, default=None, help="window w in slots (default: 20)")
    what.add_argument("--seed", type=seed, default=0, help="seed of the data and of the noise key (default: 0)")
    what.add_argument("--runs", type=run_count, default=1, help="repeat on the same data with the "
                   "noise keys of seeds seed, seed+1, ... and average the errors (default: 1)")
    stream.add_argument("--stream", default="default", help="stream name; part of the noise derivation (default: default)")
    output = p.add_argument_group("output")
    output.add_argument("--mre-floor", type=real(above=0), default=None, help="MRE denominator floor max(c, floor) "
                   "(default: 1 for counts, 1e-3 for frequencies)")
    output.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    output.add_argument("--releases", metavar="FILE", type=writable_file,
                   help="write every release as one JSON line (the pipeline's format)")
    output.add_argument("--progress", dest="progress", action="store_true", default=None, help="always show a progress bar")
    output.add_argument("--no-progress", dest="progress", action="store_false", help="never show a progress bar")
    add_option_flags(p, FAMILIES)
    p.set_defaults(handler=handle)


# The synthetic stream's size and the shared budget, filled in by _settle when left out (None): with --input
# the input has its size, and personalized mechanisms take every user's own budget.
DEFAULTS = {"users": 10_000, "slots": 800, "epsilon": 1.0, "window": 20}


def _settle(args) -> list[tuple[Family, str]]:
    """The runs ``args`` ask for, after refusing the options none of them would use, with every
    option left out at its default."""
    runs = _runs(args.mechanism)
    settle_options(args, [(family.name, name) for family, name in runs])
    personalized = [name for family, name in runs if family is simulate_personalized.FAMILY]
    for name, default in DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
        elif args.input and name in ("users", "slots"):
            raise UsageError(f"--{name} sizes the synthetic stream: the --input file has its own")
        elif personalized and name in ("epsilon", "window"):
            raise UsageError(f"--{name} is the one budget of the other models: the personalized mechanisms "
                             f"({', '.join(personalized)}) take every user's own (w_i, eps_i) from --requirements or --strict-epsilon/--strict-window")
    return runs


def handle(args) -> int:
    outcomes = [family.run(name, args) for family, name in _settle(args)]
    if args.releases:
        _write_releases(args.releases, (r for o in outcomes for r in o.records))
    summaries = [o.summary for o in outcomes]
    if args.json:
        print(json.dumps(summaries[0] if len(summaries) == 1 else summaries, indent=None, sort_keys=True))
    else:
        _print_table(summaries, sys.stdout)
    return 0


def summary(arguments: list[str]) -> dict:
    """The JSON summary ``wevent simulate ARGUMENTS --json`` would print, computed in this process
    (``wevent reproduce`` computes its cells so)."""
    parser = OneLineParser(prog="wevent")
    register(parser.add_subparsers(dest="command"), Settings())  # simulate's options stand for no environment
    args = parser.parse_args(["simulate", *arguments, "--no-progress"])
    ((family, name),) = _settle(args)
    return family.run(name, args).summary


def _write_releases(path: str, records: Iterable) -> None:
    try:
        with open(path, "w") as fh:
            for record in records:
                fh.write(record.to_json() + "\n")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None


def _percent(share: float) -> str:
    """A share as a percentage in the table's column: two decimals, or four digits and an exponent
    past 100,000% (a budget near the smallest one makes errors near the largest float)."""
    return f"{share:.2%}" if abs(share) < 1e3 else f"{share * 100:.4g}%"


def _window_spend(summary: dict) -> str:
    """The largest window spend: absolute (one budget), or relative to each user's own budget."""
    if "max_window_epsilon" in summary:
        return f"{summary['max_window_epsilon']:.6g}"
    return f"{summary['max_user_window_spend_ratio']:.4f} x eps_i"


def _print_table(summaries: list[dict], out) -> None:
    first = summaries[0]
    out.write(
        f"{first['slots']} slots, d = {first['domain_size']}, epsilon = {first['epsilon']:g} per window of "
        f"w = {first['window']} slots; MRE floor {first['mre_floor']:g}\n\n"
    )
    extra = [k for k in ("cfpu", "bits_per_user_per_slot", "roc_auc") if k in first]  # local-model measures
    titles = {"cfpu": "CFPU", "bits_per_user_per_slot": "bits/user/slot", "roc_auc": "ROC AUC"}
    header = f"{'mechanism':<10} {'MAE':>12} {'MRE':>9} {'MSE':>12} {'published':>10} {'max window spend':>17}"
    header += "".join(f" {titles[k]:>14}" for k in extra) + "\n"
    out.write(header)
    out.write("-" * (len(header) - 1) + "\n")
    for s in summaries:
        out.write(
            f"{s['mechanism']:<10} {s['mae']:>12.4g} {_percent(s['mre']):>9} {s['mse']:>12.4g} "
            f"{s['publications']:>5g}/{s['slots']:<4} {_window_spend(s):>17}"
            + "".join(f" {s[k]:>14.4g}" if s.get(k) is not None else f" {'-':>14}" for k in extra) + "\n"
        )
