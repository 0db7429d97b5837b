"""Offline re-verification of the w-event guarantee from audit records or release logs.

Per stream, slots must be contiguous from the first one seen (a missing slot cannot be verified)
and each slot recorded once (identical re-emissions are fine). Then:

* central: ``eps1 + eps2`` summed over every window of ``w`` slots is at most epsilon;
* personalized: for every requirement type k, its charges over every window of ``w_k`` slots are
  at most ``eps_k``;
* local: for every user, the budgets of the reports they were asked for (every user when a phase
  asked everyone) over every window of ``w`` slots are at most epsilon.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from ..core.ledger import window_sums

TOLERANCE = 1e-9


@dataclass(frozen=True)
class Finding:
    stream: str
    ok: bool
    message: str


def _window(worst_end: int, w: int, slots: np.ndarray) -> str:
    return f"slots {slots[max(0, worst_end - w + 1)]}..{slots[worst_end]}"


def verify(records: Iterable[dict]) -> list[Finding]:
    by_stream: dict[str, dict[int, dict]] = {}
    findings: list[Finding] = []
    conflicts: set[str] = set()
    for record in records:
        stream, slot = record["stream"], int(record["slot"])
        slots = by_stream.setdefault(stream, {})
        if slot in slots and slots[slot] != record:
            if slots[slot].get("record") == record.get("record"):
                conflicts.add(f"{stream}: two different records for slot {slot}")
            elif record.get("record") == "audit":
                slots[slot] = record  # an audit record says more than a release record
            continue
        slots[slot] = record
    findings += [Finding(c.split(":")[0], False, c) for c in sorted(conflicts)]
    for stream, slots in sorted(by_stream.items()):
        findings.append(_verify_stream(stream, slots))
    return findings


def _verify_stream(stream: str, records: dict[int, dict]) -> Finding:
    slots = np.array(sorted(records))
    gaps = np.flatnonzero(np.diff(slots) != 1)
    if gaps.size:
        return Finding(stream, False, f"{stream}: slot {slots[gaps[0]] + 1} is missing (cannot verify its windows)")
    ordered = [records[s] for s in slots]
    first = ordered[0]
    epsilon, w = float(first["epsilon"]), int(first["window"])
    if first.get("record") != "audit" and not _central(first["mechanism"]):
        return Finding(stream, False, f"{stream}: {first['mechanism']} releases do not say who was charged what (users "
                                      f"asked, requirement types): verify its audit records instead (the audit topic, "
                                      f"or `wevent run --audit-log FILE`)")
    if first.get("types"):
        return _verify_types(stream, ordered, slots)
    if first.get("phases") is not None and any(p.get("users") is not None for r in ordered for p in r["phases"]):
        return _verify_users(stream, ordered, slots, epsilon, w)
    totals = np.array([float(r["eps1"]) + float(r["eps2"]) for r in ordered])
    spend = window_sums(totals, w) + float(first.get("reserved", 0.0))  # a query index's share of every window
    end = int(np.argmax(spend))
    if spend[end] > epsilon + TOLERANCE:
        return Finding(stream, False, f"{stream}: {_window(end, w, slots)} spend {spend[end]:.12g} > epsilon {epsilon:g}")
    return Finding(stream, True, f"{stream}: {len(slots)} slots ({slots[0]}..{slots[-1]}), "
                                 f"max window spend {spend[end]:.6g} <= epsilon {epsilon:g} (w = {w})")


def _central(mechanism: str) -> bool:
    """Whether a central mechanism (a release record's eps1/eps2 are then what every user paid)."""
    from ..core.central import CentralMechanism
    from ..core.personalized import PersonalizedMechanism
    from ..core.registry import mechanisms

    cls = mechanisms().get(mechanism)
    return cls is not None and issubclass(cls, CentralMechanism) and not issubclass(cls, PersonalizedMechanism)


def _verify_types(stream, ordered, slots) -> Finding:
    types = ordered[0]["types"]  # [[w_k, eps_k, users], ...]
    charges = np.array([r["charges"] for r in ordered], dtype=float)
    worst_ratio = 0.0
    for k, (w_k, eps_k, _users) in enumerate(types):
        spend = window_sums(charges[:, k], int(w_k))
        end = int(np.argmax(spend))
        if spend[end] > eps_k + TOLERANCE:
            return Finding(stream, False, f"{stream}: users of type {k} (w = {w_k}, epsilon = {eps_k:g}): "
                                          f"{_window(end, int(w_k), slots)} spend {spend[end]:.12g} > {eps_k:g}")
        worst_ratio = max(worst_ratio, spend[end] / eps_k)
    return Finding(stream, True, f"{stream}: {len(slots)} slots, {len(types)} requirement types, "
                                 f"max per-user window spend ratio {worst_ratio:.6g} <= 1")


def _verify_users(stream, ordered, slots, epsilon, w) -> Finding:
    """Per-user window sums over sparse (user, slot, epsilon) report events, vectorised."""
    everyone = np.zeros(len(ordered))  # budget charged to every user at each slot
    users, at, eps = [], [], []
    for i, r in enumerate(ordered):
        for phase in r["phases"]:
            if phase["users"] is None:
                everyone[i] += float(phase["epsilon"])
            else:
                asked = np.asarray(phase["users"], dtype=np.int64)
                users.append(asked)
                at.append(np.full(asked.size, i))
                eps.append(np.full(asked.size, float(phase["epsilon"])))
    base = window_sums(everyone, w)
    if not users:
        users, at, eps = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0)]
    users, at, eps = np.concatenate(users), np.concatenate(at), np.concatenate(eps)
    order = np.lexsort((at, users))
    users, at, eps = users[order], at[order], eps[order]
    key = users * (len(ordered) + w + 1) + at
    cumulative = np.concatenate([[0.0], np.cumsum(eps)])
    start = np.searchsorted(key, key - (w - 1), side="left")  # same user, slots within the window
    spend = cumulative[np.arange(key.size) + 1] - cumulative[start] + base[at]
    worst = int(np.argmax(spend)) if spend.size else None
    if worst is not None and spend[worst] > epsilon + TOLERANCE:
        return Finding(stream, False, f"{stream}: user {users[worst]} spends {spend[worst]:.12g} > epsilon {epsilon:g} "
                                      f"in {_window(int(at[worst]), w, slots)}")
    top = max(float(spend.max()) if spend.size else 0.0, float(base.max()))
    return Finding(stream, True, f"{stream}: {len(slots)} slots, {np.unique(users).size} users asked, "
                                 f"max per-user window spend {top:.6g} <= epsilon {epsilon:g} (w = {w})")


def read_jsonl(path: str) -> list[dict]:
    out = []
    with open(path) as fh:
        for line_no, line in enumerate(fh, start=1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}, line {line_no}: not JSON ({exc.msg})") from None
    return out
