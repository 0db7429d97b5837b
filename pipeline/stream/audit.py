"""Offline re-verification of the w-event guarantee from audit records or release logs.

Per stream, the slots audited must be contiguous and start at the stream's first slot, 1 (a
missing slot cannot be verified, and a ledger whose first slots are gone would hide the windows
they hold), unless a range is named (``first``/``last``): then exactly that range is audited,
and a window reaching before its first slot is checked on the slots from there on. Every record
must declare the stream's budget and window, and every charge must be a finite number >= 0: a
NaN would compare false against any budget and hide an overspend, and a negative charge would
pay one back. Two records of one slot must agree (identical re-emissions are fine): two audit
copies, two release copies, or a release record and the audit record of its slot, on the fields
both carry (mechanism, window, eps1 and eps2, per-type charges, and epsilon where nothing is
reserved). Then:

* central: ``eps1 + eps2`` summed over every window of ``w`` slots, plus the share ``reserved``
  of every window taken by a query index, is at most epsilon;
* personalized: for every requirement type k, its charges over every window of ``w_k`` slots are
  at most ``eps_k``;
* local: every user's window spend, over every window of ``w`` slots, is at most epsilon. A
  phase charges its budget to every user (``users`` None) or to the users it lists; a user's
  window spend adds both kinds, whichever slots they fall in.

The three are one check (:class:`~wevent.core.accounting.ChargeMatrix`): the records become a
charge matrix of groups (one; one per type; the phases that ask everyone) plus, in the local
model, the charges of listed users, and every window of every group or user is summed against its
bound exactly: the recorded floats are exact rationals, summed as such, with no tolerance.

The audit
---------

**The audit.** Every slot's ledger entry goes to `audit`: slot budgets (central), per-type
charges (personalized), the users asked in each phase (local). `wevent audit` re-checks every
window, per requirement type or per user, and exits non-zero naming the offending window. It
also checks release logs of central streams. The comparison is exact: the recorded budgets are
floats, floats are exact rationals, and a window passes when the exact sum of its charges is at
most its bound, with no tolerance (an overspend of one ulp fails). A local-model slot charges
each phase's budget either to every user or to the users it lists, and a user's window adds
both kinds, in whichever slots they fall; the audit goes through the slots once, keeping how
many times each user paid each budget in the current window, so a day of 200,000 users still
verifies in well under a second. A ledger it cannot trust fails too: one that does not start
at the stream's first slot or misses a slot (unless `--from-slot`/`--to-slot` name the range
audited, which the output repeats), two records of one slot that disagree (audit copies,
release copies, or a release against the audit record of its slot, named by slot and field), a
charge or budget that is NaN, infinite or negative, records that disagree on the budget or
window, or a slot whose record does not say who paid. It reads
message versions like every other reader: a record of a version it does not know is refused in
one line (exit 2) rather than verified under today's reading, and a record without a version is
version 1, so a slot re-emitted by a worker restarted on a newer release is the same record as
its first copy; copies whose charges differ still fail.

**Release records of personalized and local streams do not list who was charged.** `wevent
audit` verifies those streams from audit records (the `audit` topic, or `wevent run --audit-log`).
"""

from __future__ import annotations

import functools
import json
import numbers
from dataclasses import dataclass
from typing import Iterable, TypeGuard

import numpy as np

from ..core.accounting import ChargeMatrix, WindowSpend
from ..core.local.user_sets import UserSetError, users_from_text
from ..core.registry import mechanisms
from .wire.format import DecodeError, check_version

__all__ = ["Finding", "MalformedRecord", "read_jsonl", "read_lines", "verify"]

FIRST_SLOT = 1  # every stream's slots count from 1

# What a release record and the audit record of its slot both say, with the same meaning.
_SHARED_FIELDS = ("mechanism", "window", "eps1", "eps2")


@dataclass(frozen=True)
class Finding:
    stream: str
    ok: bool
    message: str


class MalformedRecord(ValueError):
    """A record that is not a release or audit record: a missing field, or a field of the wrong type."""


def verify(records: Iterable[dict], streams: Iterable[str] | None = None, *, first: int | None = None,
           last: int | None = None) -> list[Finding]:
    """One finding per stream (only ``streams`` if given), over slots ``first..last`` (default:
    from the stream's first slot to its last record)."""
    wanted = set(streams) if streams is not None else None
    by_stream: dict[str, dict[int, dict[str, dict]]] = {}
    conflicts: dict[str, dict[int, str]] = {}
    for number, record in enumerate(records, start=1):
        if not isinstance(record, dict):
            raise MalformedRecord(f"record {number} is not a JSON object")
        try:  # a newer writer may have changed what a charge means: it is not verified as today's
            check_version(record)
        except DecodeError as exc:
            raise MalformedRecord(f"record {number}: {exc}") from None
        # A record without a version is version 1: a slot re-emitted by an upgraded worker is the same record.
        record = {key: value for key, value in record.items() if key != "version"}
        stream, slot = record.get("stream"), record.get("slot")
        if not isinstance(stream, str) or not _is_integer(slot):
            raise MalformedRecord(f"record {number} has no stream name and whole slot number")
        if wanted is not None and stream not in wanted:
            continue
        kind = "audit" if record.get("record") == "audit" else "release"
        copies = by_stream.setdefault(stream, {}).setdefault(int(slot), {})
        if kind not in copies:
            copies[kind] = record
        elif copies[kind] != record:
            field = _first_difference(copies[kind], record, sorted(set(copies[kind]) | set(record)))
            conflicts.setdefault(stream, {}).setdefault(int(slot), f"two {kind} records disagree on {field}")
    findings = []
    for stream, slots in sorted(by_stream.items()):
        for slot, copies in slots.items():
            if slot not in conflicts.get(stream, {}):
                disagreement = _release_against_audit(copies.get("release"), copies.get("audit"))
                if disagreement:
                    conflicts.setdefault(stream, {})[slot] = disagreement
        if stream in conflicts:
            slot = min(conflicts[stream])
            findings.append(Finding(stream, False, f"{stream}: slot {slot}: {conflicts[stream][slot]}"))
            continue
        # an audit record says more than a release record: who was charged, and the reserved share
        findings.append(_verify_stream(stream, {s: c["audit"] if "audit" in c else c["release"]
                                                for s, c in slots.items()},
                                       first, last))
    return findings


def _first_difference(one: dict, other: dict, fields) -> str:
    """The first of ``fields`` on which two records differ, with both values."""
    for field in fields:
        if one.get(field, _MISSING) != other.get(field, _MISSING):
            return f"{field} ({_shown(one.get(field, _MISSING))} against {_shown(other.get(field, _MISSING))})"
    return "nothing"


_MISSING = object()


def _shown(value) -> str:
    text = "nothing" if value is _MISSING else json.dumps(value) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _release_against_audit(release: dict | None, audit: dict | None) -> str | None:
    """Where a release record disagrees with the audit record of its slot (None: nowhere, or not both).

    Both carry the mechanism, the window and the slot's ``eps1`` and ``eps2``; a personalized
    release carries every type's two charges, whose sums the audit record holds. A release's
    epsilon is the mechanism's, the total less what a query index reserves: compared where the
    audit record reserves nothing.
    """
    if release is None or audit is None:
        return None
    fields = [*_SHARED_FIELDS, *(("epsilon",) if not audit.get("reserved") else ())]
    if any(release.get(f, _MISSING) != audit.get(f, _MISSING) for f in fields):
        return f"the release and the audit record disagree on {_first_difference(release, audit, fields)}"
    extras = release.get("extras")
    if not isinstance(extras, dict):
        extras = {}
    parts, charges = (extras.get("type_eps1"), extras.get("type_eps2")), audit.get("charges")
    if all(isinstance(p, list) for p in parts) and isinstance(charges, list):
        try:
            sums = (np.asarray(parts[0], dtype=float) + np.asarray(parts[1], dtype=float)).tolist()
        except (TypeError, ValueError):
            sums = None
        if sums != charges:
            return (f"the release and the audit record disagree on charges ({_shown(sums)} from type_eps1 + "
                    f"type_eps2 against {_shown(charges)})")
    return None


def _verify_stream(stream: str, records: dict[int, dict], first: int | None, last: int | None) -> Finding:
    start = FIRST_SLOT if first is None else first
    slots = np.array(sorted(s for s in records if s >= start and (last is None or s <= last)), dtype=np.int64)
    named = "" if first is None and last is None else f" (slots {start}..{'' if last is None else last} as asked)"
    if not slots.size:
        return Finding(stream, False, f"{stream}: no records in slots {start}..{'' if last is None else last}")
    if slots[0] != start:
        how = ("the stream's first slot: its windows cannot be verified without it; name the slots to audit "
               "with --from-slot" if first is None else "the first slot asked for")
        return Finding(stream, False, f"{stream}: the records start at slot {slots[0]}, not at slot {start}, {how}")
    gaps = np.flatnonzero(np.diff(slots) != 1)
    if gaps.size:
        return Finding(stream, False, f"{stream}: slot {slots[gaps[0]] + 1} is missing (cannot verify its windows)")
    if last is not None and slots[-1] != last:
        return Finding(stream, False, f"{stream}: slot {slots[-1] + 1} is missing (the records end before slot {last})")
    ordered = [records[s] for s in slots]
    kind = _kind(ordered[0])
    if kind == "release":
        return Finding(stream, False, f"{stream}: {ordered[0].get('mechanism')} releases do not say who was charged "
                                      f"what (users asked, requirement types): verify its audit records instead (the "
                                      f"audit topic, or `wevent run --audit-log FILE`)")
    try:
        epsilon, w, reserved = _declared(ordered, slots)
        _same_kind(ordered, slots, kind)
        eps1, eps2 = _slot_charges(ordered, slots)  # checked in every kind of record: what the slot says it spent
        charges, describe = {"central": _central_charges, "types": _type_charges, "phases": _user_charges}[kind](
            ordered, slots, (eps1, eps2), epsilon, w, reserved)
        over = charges.first_overspend()
        if over is not None:
            raise _Violation(describe(over))
        tightest = charges.tightest()
        if first is not None and first > FIRST_SLOT:
            named += f"; windows reaching before slot {start} are checked on their slots from {start} on"
        return Finding(stream, True, f"{stream}: {describe(tightest)}{named}")
    except _Violation as exc:
        return Finding(stream, False, f"{stream}: {exc}{named}")


class _Violation(Exception):
    """What makes a stream's records fail the audit (an overspend, or a ledger that cannot be checked)."""


def _kind(record: dict) -> str:
    """What a record says about who paid: per requirement type, per phase, the same for everyone,
    or nothing a per-user check can use (a release of a non-central mechanism)."""
    if record.get("types") is not None:
        return "types"
    if record.get("phases") is not None:
        return "phases"
    mechanism = record.get("mechanism")
    if record.get("record") == "audit" or (isinstance(mechanism, str) and _central(mechanism)):
        return "central"
    return "release"


@functools.lru_cache(maxsize=None)
def _central(mechanism: str) -> bool:
    """Whether a central mechanism (a release record's eps1/eps2 are then what every user paid)."""
    cls = mechanisms().get(mechanism)
    return cls is not None and cls.model == "central"


def _declared(ordered: list[dict], slots: np.ndarray) -> tuple[float, int, float]:
    """The budget, window and reserved share every record declares alike."""
    epsilon = _column(ordered, slots, "epsilon")
    window = _column(ordered, slots, "window")
    reserved = _column(ordered, slots, "reserved", default=0.0)
    _check_charges(slots, "epsilon", epsilon, budget=True)
    _check_charges(slots, "reserved", reserved)
    bad = np.flatnonzero(~_whole(window))
    if bad.size:
        raise _Violation(f"slot {slots[bad[0]]}: window {window[bad[0]]:g} is not a whole number of slots >= 1")
    for name, values in (("epsilon", epsilon), ("window", window), ("reserved", reserved)):
        differs = np.flatnonzero(values != values[0])
        if differs.size:
            row = differs[0]
            raise _Violation(f"slot {slots[row]} declares {name} {values[row]:g}, slot {slots[0]} {values[0]:g}: "
                             f"the records disagree on the stream's budget")
    return float(epsilon[0]), int(window[0]), float(reserved[0])


def _same_kind(ordered: list[dict], slots: np.ndarray, kind: str) -> None:
    other = next((row for row, r in enumerate(ordered) if _kind(r) != kind), None)
    if other is not None:
        raise _Violation(f"slot {slots[other]}'s record does not say who was charged the way slot {slots[0]}'s does "
                         f"({_kind(ordered[other])} against {kind})")


def _slot_charges(ordered, slots) -> tuple[np.ndarray, np.ndarray]:
    """``eps1`` and ``eps2`` of every slot, each finite and >= 0 (two parts of its charge, added exactly)."""
    eps1, eps2 = _column(ordered, slots, "eps1"), _column(ordered, slots, "eps2")
    _check_charges(slots, "eps1", eps1)
    _check_charges(slots, "eps2", eps2)
    return eps1, eps2


def _central_charges(ordered, slots, parts, epsilon, w, reserved):
    """Every user pays every slot's ``eps1 + eps2``: one group."""
    def describe(worst: WindowSpend) -> str:
        if worst.exceeds():
            return f"{_window(worst, slots)} spend {_number(worst.spend)} > epsilon {_number(epsilon)}"
        return (f"{len(slots)} slots ({slots[0]}..{slots[-1]}), max window spend {worst.spend:.6g} "
                f"<= epsilon {epsilon:g} (w = {w})")

    return ChargeMatrix(parts, [w], [epsilon], reserved=reserved), describe


def _type_charges(ordered, slots, parts, epsilon, w, reserved):
    """The users of requirement type k pay its charge: one group per type, of its own (w_k, eps_k)."""
    types = ordered[0]["types"]  # [[w_k, eps_k, users], ...]
    if not isinstance(types, list) or not all(isinstance(t, list) and len(t) == 3 for t in types):
        raise MalformedRecord(f"slot {slots[0]}: types must be a list of [w, epsilon, users] triples")
    differs = next((row for row, r in enumerate(ordered) if r["types"] != types), None)
    if differs is not None:
        raise _Violation(f"slot {slots[differs]} declares other requirement types than slot {slots[0]}: "
                         f"the records disagree on the users' budgets")
    windows, budgets = (np.array([[_as_number(t[i], f"slot {slots[0]}: types") for t in types]]) for i in (0, 1))
    _check_charges(slots[:1], "a type's epsilon", budgets, budget=True)
    if not np.all(_whole(windows)):
        raise _Violation(f"slot {slots[0]}: a type's window is not a whole number of slots >= 1")
    charges = np.array([_numbers(r.get("charges"), len(types), f"slot {slot}: charges")
                        for r, slot in zip(ordered, slots)])
    _check_charges(slots, "a charge", charges)

    def describe(worst: WindowSpend) -> str:
        if worst.exceeds():
            w_k = int(windows[0, worst.group])
            return (f"users of type {worst.group} (w = {w_k}, epsilon = {worst.bound:g}): "
                    f"{_window(worst, slots)} spend {_number(worst.spend)} > {_number(worst.bound)}")
        return (f"{len(slots)} slots ({slots[0]}..{slots[-1]}), {len(types)} requirement types, "
                f"max per-user window spend ratio {worst.ratio:.6g} <= 1")

    return ChargeMatrix(charges.reshape(len(slots), len(types)), windows[0].astype(np.int64), budgets[0],
                        reserved=reserved), describe


def _user_charges(ordered, slots, parts, epsilon, w, reserved):
    """Every user's spend: the phases that asked everyone (one group) plus those that listed them."""
    everyone, listed = _phase_charges(ordered, slots)
    listed, names = _positions(listed)
    charges = ChargeMatrix(tuple(everyone.T), [w], [epsilon], reserved=reserved, listed=listed,
                           population=names.size)

    def describe(worst: WindowSpend) -> str:
        if worst.exceeds():
            who = "every user" if worst.user is None else f"user {names[worst.user]}"
            return f"{who} spends {_number(worst.spend)} > epsilon {_number(epsilon)} in {_window(worst, slots)}"
        return (f"{len(slots)} slots ({slots[0]}..{slots[-1]}), {charges.listed_users} users asked, "
                f"max per-user window spend {worst.spend:.6g} <= epsilon {epsilon:g} (w = {w})")

    return charges, describe


def _phase_charges(ordered, slots) -> tuple[np.ndarray, list[list[tuple[np.ndarray, float]]]]:
    """The charges to everyone at each slot (``(slots, phases)``: the parts of one charge), and each
    slot's listed charges as (users, epsilon) pairs."""
    everyone: list[list[float]] = []
    listed = []
    for row, record in enumerate(ordered):
        phases = record["phases"]
        if not isinstance(phases, list) or not all(isinstance(p, dict) for p in phases):
            raise MalformedRecord(f"slot {slots[row]}: phases must be a list of objects")
        charges, shared = [], []
        for phase in phases:
            budget = _as_number(phase.get("epsilon"), f"slot {slots[row]}: a phase's epsilon")
            _check_charges(slots[row : row + 1], "a phase's epsilon", np.array([budget]))
            if phase.get("users") is None:
                shared.append(budget)
            else:
                charges.append((_user_indices(phase["users"], f"slot {slots[row]}"), budget))
        everyone.append(shared)
        listed.append(charges)
    parts = np.zeros((len(ordered), max(1, max(map(len, everyone), default=1))))
    for row, shared in enumerate(everyone):
        parts[row, : len(shared)] = shared
    return parts, listed


def _positions(listed):
    """The listed charges with each user as a position in a vector, and the user at each position.

    The vector spans the user indices up to the largest listed one; a few huge indices (in a
    hand-made ledger) get a vector over the listed users instead.
    """
    arrays = [users for row in listed for users, _ in row]
    every = np.concatenate(arrays) if arrays else np.zeros(0, np.int64)
    top = int(every.max()) + 1 if every.size else 0
    if top <= max(every.size, 1 << 20):
        return listed, np.arange(top)
    names = np.unique(every)
    return [[(np.searchsorted(names, users), budget) for users, budget in row] for row in listed], names


def _whole(windows: np.ndarray) -> np.ndarray:
    """Which windows are whole numbers of slots >= 1."""
    return np.isfinite(windows) & (windows >= 1) & (windows == np.floor(windows))


def _number(value: float) -> str:
    """A float as its shortest exact form (an overspend of one ulp shows), without a trailing .0."""
    return repr(float(value)).removesuffix(".0")


def _window(worst: WindowSpend, slots: np.ndarray) -> str:
    return f"slots {slots[worst.first]}..{slots[worst.last]}"


def _check_charges(slots: np.ndarray, name: str, values: np.ndarray, budget: bool = False) -> None:
    """Every value (one row per slot) is finite and >= 0 (> 0 for a budget): a NaN compares false
    against any bound and would hide an overspend; a negative charge would pay budget back."""
    bad = ~np.isfinite(values) | ((values <= 0) if budget else (values < 0))
    if bad.any():
        where = tuple(np.argwhere(bad)[0])
        rule = "budgets must be finite and > 0" if budget else "charges must be finite and >= 0"
        raise _Violation(f"slot {slots[where[0]]}: {name} is {values[where]:g} ({rule})")


def _column(ordered, slots, key: str, default: float | None = None) -> np.ndarray:
    """Field ``key`` of every record, as numbers."""
    out = np.empty(len(ordered))
    for row, record in enumerate(ordered):
        if key not in record and default is None:
            raise MalformedRecord(f"slot {slots[row]}: no field {key!r}")
        out[row] = _as_number(record.get(key, default), f"slot {slots[row]}: {key}")
    return out


def _numbers(values, count: int, where: str) -> list[float]:
    if not isinstance(values, list) or len(values) != count:
        raise MalformedRecord(f"{where} must list {count} numbers")
    return [_as_number(v, where) for v in values]


def _as_number(value, where: str) -> float:
    """A JSON number (NaN and infinities included: they fail the audit, they are not malformed)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise MalformedRecord(f"{where} must be a number, got {value!r}")
    return float(value)


def _is_integer(value) -> TypeGuard[numbers.Integral]:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _user_indices(users, where: str) -> np.ndarray:
    """A phase's listed users as indices (one conversion per phase, no loop per user): a list, or
    the packed text the pipeline writes (:func:`~wevent.core.local.user_sets.users_to_text`)."""
    if isinstance(users, str):
        try:
            return users_from_text(users)
        except UserSetError as exc:
            raise MalformedRecord(f"{where}: a phase's users: {exc}") from None
    try:
        asked = np.asarray(users) if isinstance(users, list) else None
    except (ValueError, OverflowError):
        asked = None
    integers = asked is not None and asked.dtype.kind in "iu" and np.can_cast(asked.dtype, np.int64)
    if asked is None or asked.ndim != 1 or (asked.size and (not integers or asked.min() < 0)):
        raise MalformedRecord(f"{where}: a phase's users must be a list of user indices >= 0 (or null: everyone)")
    return asked.astype(np.int64)


def read_jsonl(path: str) -> list:
    """The JSON values of a file's non-blank lines (ValueError names the first bad line)."""
    return [json.loads(line) for line in read_lines(path)]


def read_lines(path: str) -> list[bytes]:
    """The non-blank lines of a file of JSON lines, as bytes, each checked to be JSON (ValueError
    names the first bad line): the records as published, for their signatures to be checked."""
    out = []
    with open(path, "rb") as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                json.loads(line.decode("utf-8"))
            except UnicodeDecodeError:
                raise ValueError(f"{path}: not a text file of JSON lines (not UTF-8)") from None
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}, line {line_no}: not JSON ({exc.msg})") from None
            out.append(line.strip())
    return out
