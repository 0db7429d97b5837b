"""The picture of one stream's run (``wevent plot``): releases, strategies and spend over the slots.

Panels share the slot axis, top to bottom:

* the releases against the truth, when a truth is given: the total over the bins (for counts;
  a local-model release is a share of the users per bin, whose total says nothing) and the bins
  chosen, each in a panel of its own, the release in the mechanism's style
  (:func:`~wevent.reproduce.style.method_style`) and the truth as a black line;
* every slot's strategy as its release records it (publish, approximate, nullified, not sampled);
* the window spend at every slot (the ``w`` slots ending there) against epsilon; for a
  personalized stream, the largest requirement type's spend over its own epsilon, against 1;
  for a central one also what the slot itself charged every user. With an audit log, the
  panel's title is the audit's verdict (what ``wevent audit`` prints for it).

The truth is either the dump the run replayed (``wevent replay ... --dump``), counted per slot
as the pipeline counts it (:class:`~wevent.stream.runtime.truth.TruthMonitor`, whose error ``wevent
run`` serves), or the truth log ``wevent run --truth-log`` writes. The dump's slots are matched to
the releases' by their clocks, and a local stream's users are the dump's (as ``wevent run --feed``
configures the stream; a config's stream of another population is drawn from its truth log).
Every input is checked before anything is drawn: a file that is not what it should be, a log of
another stream or of no release, a truth of other bins or slots is one line
(:class:`~wevent.errors.UsageError`).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..core.base import Strategy
from ..core.data import UserValues, is_dump
from ..core.registry import mechanisms
from ..errors import UsageError
# What this module takes from the stream layer: the release records, the audit's check, the truth.
from ..stream.audit import verify
from ..stream.wire.records import ReleaseRecord
from ..stream.runtime.truth import TruthMonitor
from .style import method_label, method_style, pyplot, save

if TYPE_CHECKING:  # matplotlib is an optional extra, imported where a picture is drawn
    from matplotlib.artist import Artist

__all__ = ["Run", "read_run", "choose_bins", "draw_run", "TRUTH_RECORD"]

TRUTH_RECORD = "truth"  # the "record" field of a truth log's lines (``wevent run --truth-log``)
STRATEGY_MARKS = {Strategy.PUBLISH: ("s", "black"), Strategy.APPROXIMATE: ("o", "#7f7f7f"),
                  Strategy.NULLIFIED: ("x", "#d62728"), Strategy.NOT_SAMPLED: (".", "#7f7f7f")}


@dataclass
class Run:
    """One stream's releases, slot by slot, with their truth when one is given."""

    stream: str
    mechanism: str
    model: str | None  # None: a mechanism this version does not know
    slots: np.ndarray  # (n,) ascending
    releases: np.ndarray  # (n, d)
    strategies: list[str]
    spend: np.ndarray  # (n,) what the spend panel draws
    bound: np.ndarray  # (n,) its limit
    charged: np.ndarray | None  # (n,) eps1 + eps2 of a central mechanism's slots (what everyone paid)
    epsilon: float
    window: int
    slot_seconds: float  # 0: the releases have no clock (a simulation)
    first_start: float
    truth: np.ndarray | None = None  # (n, d), NaN rows where the truth does not cover a slot
    labels: list[str] | None = None
    audit: str | None = None  # the audit's verdict

    @property
    def shares(self) -> bool:
        """Whether releases are shares of the users (local model) rather than counts."""
        return self.model == "local"


def read_run(releases: str, stream: str | None = None, audit: str | None = None, truth: str | None = None) -> Run:
    """The run of ``stream`` (the only one, if None) in the release log ``releases``, with the
    audit's verdict from ``audit`` and the truth from ``truth`` (a dump or a truth log)."""
    records = _releases(releases, stream)
    run = _run(records)
    if audit:
        run.audit = _audit(audit, run.stream)
    if truth:
        run.truth, run.labels = (_truth_of_dump if is_dump(truth) else _truth_of_log)(truth, run, records)
    return run


def choose_bins(run: Run, bins: list[int] | None, top: int) -> list[int]:
    """The bins asked for, or the ``top`` largest by their mean truth (mean release without a truth)."""
    d = run.releases.shape[1]
    if bins:
        wrong = [b for b in bins if b >= d]
        if wrong:
            raise UsageError(f"--bin {wrong[0]}: the releases have bins 0..{d - 1}")
        return list(dict.fromkeys(bins))
    basis = run.releases if run.truth is None or np.isnan(run.truth).all() else run.truth
    means = np.nanmean(basis, axis=0)
    return [int(b) for b in np.argsort(-means, kind="stable")[:top]]


# --- reading --------------------------------------------------------------------------------------

def _lines(path: str) -> list[tuple[int, str]]:
    """The non-blank lines of a text file, numbered from 1."""
    try:
        with open(path, encoding="utf-8") as fh:
            return [(number, line) for number, line in enumerate(fh, start=1) if line.strip()]
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not a text file of JSON lines (not UTF-8)") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


def _objects(path: str) -> list[tuple[str, str, dict]]:
    """Every line of ``path`` as a JSON object: (where, the line, the object)."""
    objects = []
    for number, line in _lines(path):
        where = f"{path}, line {number}"
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"{where}: not JSON ({getattr(exc, 'msg', exc)})") from None
        if not isinstance(value, dict):
            raise UsageError(f"{where}: not a JSON object")
        objects.append((where, line, value))
    return objects


def _releases(path: str, stream: str | None) -> list[ReleaseRecord]:
    """The releases of one stream, one per slot, in slot order."""
    records: list[ReleaseRecord] = []
    for where, line, value in _objects(path):
        if value.get("record") in ("audit", TRUTH_RECORD):
            raise UsageError(f"{where}: a line of the {value['record']} log, not a release: give the release log "
                             f"first (`wevent run --release-log`, `wevent subscribe --json`)")
        try:
            record = ReleaseRecord.from_json(line)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"{where}: not a release record ({' '.join(str(exc).split())})") from None
        _check_release(record, where)
        records.append(record)
    if not records:
        raise UsageError(f"{path} holds no releases")
    streams = sorted({r.stream for r in records})
    if stream is None and len(streams) > 1:
        raise UsageError(f"{path} holds releases of {len(streams)} streams ({', '.join(streams)}): choose one with "
                         f"--stream")
    stream = streams[0] if stream is None else stream
    if stream not in streams:
        raise UsageError(f"{path} holds no releases of stream {stream!r} (it holds {', '.join(map(repr, streams))})")
    by_slot: dict[int, ReleaseRecord] = {}
    for record in (r for r in records if r.stream == stream):
        first = by_slot.setdefault(record.slot, record)
        if first != record:  # a re-emitted release is identical: two different ones are two runs mixed
            raise UsageError(f"{path}: two different releases of stream {stream!r} for slot {record.slot}")
    ordered = [by_slot[slot] for slot in sorted(by_slot)]
    first = ordered[0]
    for record in ordered:
        if (record.mechanism, len(record.release)) != (first.mechanism, len(first.release)):
            raise UsageError(f"{path}: slot {record.slot} is a release of {record.mechanism} over "
                             f"{len(record.release)} bins, slot {first.slot} of {first.mechanism} over "
                             f"{len(first.release)}: one run at a time")
    return ordered


def _check_release(record: ReleaseRecord, where: str) -> None:
    """The fields the picture draws, of the types the codec writes."""
    def number(value) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

    problems = [
        (isinstance(record.stream, str) and isinstance(record.mechanism, str), "its stream or mechanism is not a name"),
        (isinstance(record.slot, int) and not isinstance(record.slot, bool) and record.slot >= 1,
         "its slot is not a whole number >= 1"),
        (isinstance(record.release, list) and record.release and all(map(number, record.release)),
         "its release is not a list of numbers"),
        (isinstance(record.strategy, str) and record.strategy in {s.value for s in Strategy},
         f"its strategy {record.strategy!r} is unknown"),
        (number(record.epsilon) and record.epsilon > 0, "its epsilon is not a number > 0"),
        (isinstance(record.window, int) and not isinstance(record.window, bool) and record.window >= 1,
         "its window is not a whole number >= 1"),
        (all(map(number, (record.window_spend, record.eps1, record.eps2, record.slot_start, record.slot_end))),
         "its budgets or its slot's clock are not numbers"),
        (isinstance(record.extras, dict), "its extras are not an object"),
    ]
    bad = next((problem for ok, problem in problems if not ok), None)
    if bad:
        raise UsageError(f"{where}: not a release record: {bad}")


def _run(records: list[ReleaseRecord]) -> Run:
    first = records[0]
    registered = mechanisms().get(first.mechanism)
    model = registered.model if registered is not None else None
    ratios = [r.extras.get("window_spend_ratio") for r in records]
    personalized = model == "personalized" and all(isinstance(v, (int, float)) for v in ratios)
    return Run(
        stream=first.stream, mechanism=first.mechanism, model=model,
        slots=np.array([r.slot for r in records]),
        releases=np.array([r.release for r in records], dtype=float),
        strategies=[r.strategy for r in records],
        spend=np.array(ratios if personalized else [r.window_spend for r in records], dtype=float),
        bound=np.ones(len(records)) if personalized else np.array([r.epsilon for r in records]),
        charged=np.array([r.eps1 + r.eps2 for r in records]) if model == "central" else None,
        epsilon=first.epsilon, window=first.window,
        slot_seconds=first.slot_end - first.slot_start, first_start=first.slot_start,
    )


def _audit(path: str, stream: str) -> str:
    """The audit's verdict on ``stream`` from an audit log."""
    audits = []
    for where, _, value in _objects(path):
        if value.get("record") != "audit":
            raise UsageError(f"{where}: not an audit record (`wevent run --audit-log` writes them)")
        audits.append(value)
    if not audits:
        raise UsageError(f"{path} holds no audit records")
    streams = sorted({str(a.get("stream")) for a in audits})
    if stream not in streams:
        raise UsageError(f"{path} is the audit of stream {', '.join(map(repr, streams))}, not of {stream!r}")
    try:
        findings = verify(audits, [stream])
    except ValueError as exc:  # a malformed record
        raise UsageError(f"{path}: {exc}") from None
    return "; ".join(("passes: " if f.ok else "FAILS: ") + f.message.removeprefix(f"{stream}: ") for f in findings)


def _truth_of_dump(path: str, run: Run, records: list[ReleaseRecord]) -> tuple[np.ndarray, list[str] | None]:
    """Every released slot's true histogram, counted from the dump the run replayed."""
    from ..producers.replay import MatrixFeed

    values = UserValues.load(path)
    d = run.releases.shape[1]
    if d != values.domain_size:
        raise UsageError(f"{path} holds values in {values.domain_size} bins, the releases have {d}: not the feed of "
                         f"this run")
    offset = 0  # stream slot s is the dump's slot s - offset
    if values.slot_seconds > 0 and run.slot_seconds > 0:  # both have clocks: align them
        if not math.isclose(values.slot_seconds, run.slot_seconds):
            raise UsageError(f"{path} has slots of {values.slot_seconds:g} s, the releases {run.slot_seconds:g} s: "
                             f"not the feed of this run")
        offset = records[0].slot - 1 - round((records[0].slot_start - values.start) / values.slot_seconds)
    monitor = TruthMonitor(run.stream, MatrixFeed(values), slot_offset=offset,
                           population=values.users if run.shares else None)
    rows = [monitor.truth(int(slot), d) for slot in run.slots]
    if all(row is None for row in rows):
        raise UsageError(f"{path} covers none of the released slots ({_span(run.slots)}): not the feed of this run")
    labels = [str(label) for label in values.labels] if len(values.labels) == values.domain_size else None
    return _rows(rows, d), labels


def _truth_of_log(path: str, run: Run, records: list[ReleaseRecord]) -> tuple[np.ndarray, None]:
    """Every released slot's true histogram, from a truth log of the same stream."""
    d = run.releases.shape[1]
    truth: dict[int, list] = {}
    for where, _, value in _objects(path):
        if value.get("record") != TRUTH_RECORD:
            raise UsageError(f"{where}: neither a dump nor a truth log (`wevent run --truth-log` writes one)")
        if value.get("stream") != run.stream:
            raise UsageError(f"{where}: the truth of stream {value.get('stream')!r}, not of {run.stream!r}")
        counts, slot = value.get("truth"), value.get("slot")
        if not (isinstance(slot, int) and not isinstance(slot, bool) and isinstance(counts, list) and len(counts) == d
                and all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in counts)):
            raise UsageError(f"{where}: not a slot's truth over the releases' {d} bins")
        truth[slot] = counts
    rows = [truth.get(int(slot)) for slot in run.slots]
    if all(row is None for row in rows):
        raise UsageError(f"{path} holds the truth of none of the released slots ({_span(run.slots)})")
    return _rows(rows, d), None


def _rows(rows: list, d: int) -> np.ndarray:
    return np.array([np.full(d, np.nan) if row is None else row for row in rows], dtype=float)


def _span(slots: np.ndarray) -> str:
    return f"slots {slots[0]}..{slots[-1]}"


# --- drawing --------------------------------------------------------------------------------------

def draw_run(run: Run, bins: list[int], path: Path | str) -> None:
    """Draw ``run``'s picture, its releases in ``bins``, into the PNG ``path``."""
    # a release of absurd size (1e308 in a hand-made log) overflows to infinity, which is not drawn: no warnings
    with warnings.catch_warnings(), np.errstate(over="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        _draw(run, bins, path)


def _draw(run: Run, bins: list[int], path: Path | str) -> None:
    plt = pyplot()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    data_panels = ([] if run.shares else [None]) + list(bins)  # None: the total over the bins
    strategies = [s for s in Strategy if s.value in run.strategies]
    heights = [1.6] * len(data_panels) + [0.35 + 0.22 * len(strategies), 1.8]
    fig, axes = plt.subplots(len(heights), 1, figsize=(10, sum(heights) + 1.4), sharex=True, layout="constrained",
                             gridspec_kw={"height_ratios": heights})
    style = method_style(run.mechanism)
    published = run.slots[[s == Strategy.PUBLISH.value for s in run.strategies]]
    for ax, panel in zip(axes, data_panels):
        _data_panel(ax, run, panel, style, published)
    if run.truth is not None:
        cells = np.isfinite(run.truth)
        error = np.abs(run.releases - run.truth)[cells].mean()
        axes[0].set_title(f"releases against the truth: mean absolute error {error:.4g} per bin and slot "
                          f"(over {int(cells.all(axis=1).sum())} slots)", fontsize=9, loc="left")
    else:
        axes[0].set_title("releases (no truth given: --truth draws it)", fontsize=9, loc="left")
    _strategy_panel(axes[-2], run, strategies)
    _spend_panel(axes[-1], run, style)
    axes[-1].set_xlabel(_slot_axis(run))
    axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    handles: list[Artist] = [Line2D([], [], label=f"release ({method_label(run.mechanism)}), marked where fresh", markersize=4,
                      **style)]
    if run.truth is not None:
        handles.append(Line2D([], [], color="black", linewidth=1.0, label="truth"))
    handles += [Patch(color=style["color"], alpha=0.12, label="published slot"),
                Line2D([], [], color=style["color"], linewidth=2.2, label="window spend"),
                Line2D([], [], color="black", linestyle="--", label=_bound_name(run))]
    if run.charged is not None:
        handles.append(Patch(color="#bbbbbb", label="charged at the slot (eps1 + eps2)"))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 4), fontsize=8)
    fig.suptitle(_title(run), fontsize=10)
    save(fig, path)


def _data_panel(ax, run: Run, panel: int | None, style: dict, published: np.ndarray) -> None:
    """One bin's releases (or their total, ``panel`` None) against its truth."""
    released = run.releases.sum(axis=1) if panel is None else run.releases[:, panel]
    for slot in published:
        ax.axvspan(slot - 0.5, slot + 0.5, color=style["color"], alpha=0.12, linewidth=0)
    if run.truth is not None:
        truth = run.truth.sum(axis=1) if panel is None else run.truth[:, panel]
        ax.plot(run.slots, truth, color="black", linewidth=1.0, zorder=3)
    fresh = np.isin(run.slots, published)  # a marker where the release is new, the line repeats it elsewhere
    ax.plot(run.slots, released, markersize=4, linewidth=1.1, drawstyle="steps-mid", zorder=4, markevery=list(fresh),
            **style)
    unit = "share of users" if run.shares else "users"
    ax.set_ylabel(f"{_panel_name(run, panel)}\n({unit})", fontsize=8)
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=7)


def _strategy_panel(ax, run: Run, strategies: list[Strategy]) -> None:
    """A row per strategy, a mark at every slot released that way."""
    for row, strategy in enumerate(strategies):
        marker, colour = STRATEGY_MARKS[strategy]
        slots = run.slots[[s == strategy.value for s in run.strategies]]
        ax.scatter(slots, np.full(len(slots), row), marker=marker, color=colour, s=14, linewidths=1.0)
    ax.set_yticks(range(len(strategies)),
                  [f"{s.value.replace('_', ' ')} ({run.strategies.count(s.value)})" for s in strategies], fontsize=7)
    ax.set_ylim(-0.6, len(strategies) - 0.4)
    ax.invert_yaxis()
    ax.set_ylabel("strategy", fontsize=8)
    ax.grid(alpha=0.3, axis="x")
    ax.tick_params(labelsize=7)


def _spend_panel(ax, run: Run, style: dict) -> None:
    """The window spend at every slot against its bound; a central slot's own charge as a bar."""
    if run.charged is not None:
        ax.bar(run.slots, run.charged, width=0.8, color="#bbbbbb", zorder=2)
    # the spend thick under the bound's thin dashes: both show where the spend reaches its bound
    ax.plot(run.slots, run.spend, color=style["color"], drawstyle="steps-mid", linewidth=2.2, zorder=3)
    ax.plot(run.slots, run.bound, color="black", linestyle="--", linewidth=1.0, drawstyle="steps-mid", zorder=3)
    ax.set_ylim(bottom=0)
    personalized = run.model == "personalized" and run.bound.max() == 1
    ax.set_ylabel("spend / own epsilon" if personalized else "epsilon", fontsize=8)
    title = ("window spend: the most charged requirement type's, over its own window and epsilon" if personalized
             else f"window spend: the most any user paid in the w = {run.window} slots ending at each slot")
    if run.audit:
        title += f"\naudit {run.audit}"
    ax.set_title(title, fontsize=8, loc="left")
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=7)


def _bound_name(run: Run) -> str:
    return "own epsilon" if run.model == "personalized" and run.bound.max() == 1 else "epsilon"


def _title(run: Run) -> str:
    budget = ("each user's own (w, epsilon)" if run.model == "personalized"
              else f"epsilon = {run.epsilon:g} per window of w = {run.window} slots")
    return (f"stream {run.stream!r}: {method_label(run.mechanism)}, {budget}; {len(run.slots)} releases, "
            f"{_span(run.slots)}")


def _slot_axis(run: Run) -> str:
    """The slot axis's label, with the slots' length and first start where the releases have a clock."""
    if run.slot_seconds <= 0:
        return "slot"
    if run.first_start <= 0:  # a feed without a calendar (synthetic streams start at 0)
        return f"slot ({run.slot_seconds:g} s each)"
    start = dt.datetime.fromtimestamp(run.first_start, dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
    return f"slot ({run.slot_seconds:g} s each; slot {run.slots[0]} starts {start} UTC)"


def _panel_name(run: Run, panel: int | None, width: int = 18) -> str:
    """``total``, or the bin's number and, when it has one, its label (cut to ``width`` characters)."""
    if panel is None:
        return "total"
    label = run.labels[panel] if run.labels else str(panel)
    name = f"bin {panel}" if label == str(panel) else f"bin {panel}: {label}"
    return name if len(name) <= width else name[: width - 1] + "…"
