"""Users' privacy requirements ``(w_i, eps_i)``: validation, grouping into types, a CSV format, generation.

A *type* is one distinct pair ``(w, eps)``. Every PWSM decision is global (one dissimilarity, one
publish-or-skip per slot), so users of one type are charged the same budget at every slot: the
mechanisms keep their bookkeeping per type, O(m) per slot for m types, and
a slot's input is the ``(m, d)`` matrix ``counts[k, j]`` = number of users of type k holding value j.
:meth:`Requirements.type_counts` builds it from per-user values with one ``bincount``.

File format (:meth:`Requirements.load_csv`): one line per user, ``user,w,epsilon``; an optional
header line ``user,w,epsilon``; blank lines and lines starting with ``#`` are ignored. ``user`` is
the user's id as the data names it (a synthetic stream names its users ``0 .. N-1``).

Generation follows the paper's experiments (Section 5.2, Table 3, and the authors' configuration): every user gets
``eps_i`` in ``{eps, eps+0.2, ..., 1.0}`` and ``w_i`` in ``{40, 80, ..., w}``, so the static pair
``(w, eps)`` is at least as strict as anyone's; users are split in id order into 10 contiguous
groups that each draw one ``eps`` and, independently, one ``w`` uniformly (:func:`grouped`;
``per_user=True`` draws per user instead). :func:`two_type` is the two-type study of Section 5.5.

>>> r = Requirements([4, 2, 4, 3], [1.0, 0.5, 1.0, 2.0])
>>> r.types.windows.tolist(), r.types.epsilons.tolist(), r.types.sizes.tolist()
([2, 3, 4], [0.5, 2.0, 1.0], [1, 1, 2])
>>> r.user_types.tolist()
[2, 0, 2, 1]
>>> r.type_counts(np.array([1, 0, 1, 1]), domain_size=2).tolist()
[[1, 0], [0, 1], [0, 2]]
>>> r.strictest
(4, 0.5)
"""

from __future__ import annotations

import csv
import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
from numpy.typing import ArrayLike

from ..data import ABSENT
from ..exact import divide, grid
from ..validation import MIN_EPSILON, ParameterError, check_epsilon, check_positive_int

__all__ = [
    "RequirementTypes",
    "Requirements",
    "type_histogram",
    "epsilon_candidates",
    "window_candidates",
    "grouped",
    "two_type",
    "REQUIREMENT_MIXES",
    "generate",
]

CSV_HEADER = ("user", "w", "epsilon")
_VALUES_PER_CHUNK = 4_000_000  # user values whose type cells are counted at once
_FEW_VALUES = 8  # domains up to this size are counted by matrix products, one per value
# Entropy tag of the requirement draw: [seed, 3] is distinct from the synthetic streams' [seed, 0..2].
_SEED_TAG = 3


def _checked(values, what: str, whole: bool, labels: Sequence[str] | None = None) -> np.ndarray:
    """A non-empty list of whole numbers >= 1 (``whole``) or of budgets, finite numbers >= :data:`MIN_EPSILON`;
    names the first bad one."""
    array = np.asarray(values)
    if array.ndim != 1 or array.size == 0:
        raise ParameterError(f"{what} must be a non-empty list, got shape {array.shape}")
    if array.dtype.kind not in "iuf":
        raise ParameterError(f"{what} must be numbers, got {array.dtype}")
    numbers = array.astype(float)
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(numbers) | ((numbers < 1) | (numbers != np.floor(numbers)) if whole
                                       else (numbers < MIN_EPSILON))
    if bad.any():
        i = int(np.argmax(bad))
        who = f"user {labels[i]!r}" if labels is not None else f"entry {i}"
        rule = "whole numbers >= 1" if whole else f"finite numbers >= {MIN_EPSILON:g}"
        raise ParameterError(f"{what} must be {rule}; {who} has {numbers[i]:g}")
    return numbers.astype(np.int64) if whole else numbers


@dataclass(frozen=True, eq=False)
class RequirementTypes:
    """The distinct requirement pairs of a population and how many users hold each.

    ``sizes`` are the registered users per type. They are public, like the requirements, and
    OBS weighs its candidate thresholds with them, so which users report in a slot cannot
    influence the selected threshold.
    """

    windows: np.ndarray
    epsilons: np.ndarray
    sizes: np.ndarray

    def __post_init__(self) -> None:
        windows = _checked(self.windows, "type windows w", whole=True)
        epsilons = _checked(self.epsilons, "type epsilons", whole=False)
        sizes = _checked(self.sizes, "type sizes (users per type)", whole=True)
        if not windows.size == epsilons.size == sizes.size:
            raise ParameterError(f"windows, epsilons and sizes differ in length: {windows.size}, {epsilons.size}, {sizes.size}")
        for name, value in (("windows", windows), ("epsilons", epsilons), ("sizes", sizes)):
            value.flags.writeable = False
            object.__setattr__(self, name, value)

    @property
    def count(self) -> int:
        return int(self.windows.size)

    @functools.cached_property
    def grids(self) -> np.ndarray:
        """Every type's grid: every budget charged to a type is a multiple of it
        (:func:`~wevent.core.exact.grid` of ``eps_k``), so its sums within ``eps_k`` are exact."""
        return _frozen(grid(self.epsilons))

    @functools.cached_property
    def dissimilarity_budgets(self) -> np.ndarray:
        """``e1_k = eps_k / (2 w_k)``, rounded down onto the type's grid: what DC charges every slot
        (Alg. 4-5, line 2)."""
        return _frozen(divide(self.epsilons, 2 * self.windows))

    @functools.cached_property
    def publication_pools(self) -> np.ndarray:
        """What every window leaves for publications: ``eps_k / 2`` (``w_k e1_k`` is at most the
        other half).

        Computed as BD/BA compute theirs so that identical users reproduce them bit for bit.
        """
        return _frozen(divide(self.epsilons, 2))

    @property
    def strictest(self) -> tuple[int, float]:
        """``(max w, min eps)``: the one pair BD/BA must use to satisfy every user."""
        return int(self.windows.max()), float(self.epsilons.min())


def _frozen(values: np.ndarray) -> np.ndarray:
    """A budget array computed once per type table and shared: read-only."""
    values.flags.writeable = False
    return values


def type_histogram(values: np.ndarray, user_types: np.ndarray, type_count: int, domain_size: int) -> np.ndarray:
    """``counts[..., k, j]`` = users of type k holding value j, for one slot's values (users,) or many
    slots' (slots, users), a chunk of slots at a time (ABSENT users skipped).

    With few values each value's counts are one matrix product of its indicator with the users'
    type membership (BLAS sums of zeros and ones, exact in floating point below 2^24 users, several
    times faster than counting); with many values, one ``bincount`` of (slot, type, value) cells.
    """
    values = np.asarray(values)
    users = user_types.size
    if values.shape[-1:] != user_types.shape:
        raise ParameterError(f"got values of {values.shape[-1] if values.ndim else 0} users, "
                             f"the requirements cover {users}")
    if values.dtype.kind not in "iu":
        raise ParameterError("user values must be integers")
    rows = values.reshape(-1, users)
    counts = np.zeros((rows.shape[0], type_count, domain_size), dtype=np.int64)
    few_values = domain_size <= _FEW_VALUES
    if few_values:
        exact = np.float32 if users < 2**24 else np.float64
        membership = np.zeros((users, type_count), dtype=exact)
        membership[np.arange(users), user_types] = 1
        sizes = np.bincount(user_types, minlength=type_count)
    step = max(1, _VALUES_PER_CHUNK // max(1, users))
    for start in range(0, rows.shape[0] if values.size else 0, step):  # chunks bound the temporaries
        chunk = rows[start : start + step]
        lowest, highest = chunk.min(), chunk.max()
        if highest >= domain_size or lowest < ABSENT:
            raise ParameterError(f"user values must lie in 0..{domain_size - 1} (or {ABSENT} for absent)")
        if few_values:
            rest = lowest > ABSENT  # no absent user: value 0 is what the other values leave of every type
            for value in range(1 if rest else 0, domain_size):
                counts[start : start + len(chunk), :, value] = (chunk == value).astype(exact) @ membership
            if rest:
                counts[start : start + len(chunk), :, 0] = sizes - counts[start : start + len(chunk), :, 1:].sum(axis=2)
            continue
        cells = type_count * domain_size
        flat = (user_types * domain_size + chunk) + (np.arange(len(chunk)) * cells)[:, None]
        if lowest == ABSENT:
            flat = flat[chunk != ABSENT]
        counts[start : start + len(chunk)] = np.bincount(flat.ravel(), minlength=len(chunk) * cells).reshape(
            -1, type_count, domain_size)
    return counts.reshape(*values.shape[:-1], type_count, domain_size)


class Requirements:
    """Every user's ``(w_i, eps_i)``, in user order, with the users' ids."""

    def __init__(self, windows: ArrayLike, epsilons: ArrayLike, user_ids: Sequence[str] | None = None) -> None:
        count = np.asarray(windows).size
        ids = [str(u) for u in user_ids] if user_ids is not None else [str(i) for i in range(count)]
        if len(ids) != count:
            raise ParameterError(f"{len(ids)} user ids for {count} requirements")
        if len(set(ids)) != len(ids):
            raise ParameterError("user ids must be unique")
        self.windows = _checked(windows, "requirement windows w_i", whole=True, labels=ids)
        self.epsilons = _checked(epsilons, "requirement epsilons eps_i", whole=False, labels=ids)
        if self.windows.size != self.epsilons.size:
            raise ParameterError(f"{self.windows.size} windows but {self.epsilons.size} epsilons")
        self.user_ids = ids
        pairs = np.stack([self.windows.astype(float), self.epsilons], axis=1)
        distinct, self.user_types = np.unique(pairs, axis=0, return_inverse=True)
        self.user_types = self.user_types.reshape(-1).astype(np.int64)
        self.types = RequirementTypes(distinct[:, 0], distinct[:, 1], np.bincount(self.user_types))

    @property
    def users(self) -> int:
        return int(self.windows.size)

    @property
    def strictest(self) -> tuple[int, float]:
        return self.types.strictest

    def type_counts(self, values: np.ndarray, domain_size: int) -> np.ndarray:
        """The ``(types, d)`` count matrix of a slot from every user's value (in user order), or the
        ``(slots, types, d)`` matrices of a ``(slots, users)`` matrix."""
        return type_histogram(values, self.user_types, self.types.count, domain_size)

    def for_users(self, user_ids: Sequence[str]) -> "Requirements":
        """The requirements of exactly these users, in this order; every one must have a requirement."""
        position = {u: i for i, u in enumerate(self.user_ids)}
        wanted = [str(u) for u in user_ids]
        missing = [u for u in wanted if u not in position]
        if missing:
            shown = ", ".join(repr(u) for u in missing[:3]) + (", ..." if len(missing) > 3 else "")
            raise ParameterError(f"{len(missing)} reporting user(s) have no privacy requirement: {shown}")
        index = np.array([position[u] for u in wanted], dtype=np.int64)
        return Requirements(self.windows[index], self.epsilons[index], wanted)

    # --- file format -------------------------------------------------------------------------
    def save_csv(self, path: str | Path) -> None:
        with open(path, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(CSV_HEADER)
            for user, w, eps in zip(self.user_ids, self.windows.tolist(), self.epsilons.tolist()):
                writer.writerow([user, w, repr(eps)])

    @classmethod
    def load_csv(cls, path: str | Path) -> "Requirements":
        """Read ``user,w,epsilon`` lines; every problem is one error naming the line."""
        try:
            handle = open(path, newline="")
        except OSError as exc:  # FileNotFoundError included: "No such file or directory"
            raise ParameterError(f"cannot read requirements file {path}: {exc.strerror}") from None
        users: list[str] = []
        windows: list[int] = []
        epsilons: list[float] = []
        seen: dict[str, int] = {}
        with handle:
            for line_no, row in enumerate(csv.reader(handle), start=1):
                cells = [cell.strip() for cell in row]
                if not cells or cells == [""] or cells[0].startswith("#"):
                    continue
                if not users and tuple(c.lower() for c in cells) == CSV_HEADER:
                    continue
                where = f"{path}, line {line_no}"
                if len(cells) != 3:
                    raise ParameterError(f"{where}: expected 3 columns user,w,epsilon, got {len(cells)}")
                user, w_text, eps_text = cells
                if not user:
                    raise ParameterError(f"{where}: empty user id")
                if user in seen:
                    raise ParameterError(f"{where}: user {user!r} already has a requirement (line {seen[user]})")
                try:
                    w = check_positive_int(_number(w_text), f"w of user {user!r}")
                    eps = check_epsilon(_number(eps_text), f"epsilon of user {user!r}")
                except ParameterError as exc:
                    raise ParameterError(f"{where}: {exc}") from None
                seen[user] = line_no
                users.append(user)
                windows.append(w)
                epsilons.append(eps)
        if not users:
            raise ParameterError(f"{path} holds no requirements (expected lines user,w,epsilon)")
        return cls(windows, epsilons, users)

    def __repr__(self) -> str:
        return f"Requirements({self.users} users, {self.types.count} types, strictest (w, eps) = {self.strictest})"


def _number(text: str):
    try:
        return float(text)
    except ValueError:
        return text  # the check_* helpers reject it, naming the bad value


# --- generation (Section 5.2) ----------------------------------------------------------------
def epsilon_candidates(epsilon: float, top: float = 1.0, step: float = 0.2) -> np.ndarray:
    """``{eps, eps + step, ..., top}`` (just ``{eps}`` when ``eps >= top``), rounded to 12 decimals."""
    epsilon = check_epsilon(epsilon, "strictest epsilon")
    count = max(0, int(math.floor((top - epsilon) / step + 1e-9))) + 1
    return np.round(epsilon + step * np.arange(count), 12)


def window_candidates(window: int, step: int = 40) -> np.ndarray:
    """``{step, 2 step, ..., <= w}`` (just ``{w}`` when ``w < step``)."""
    window = check_positive_int(window, "strictest window w")
    candidates = np.arange(step, window + 1, step, dtype=np.int64)
    return candidates if candidates.size else np.array([window], dtype=np.int64)


def grouped(users: int, epsilon: float = 0.6, window: int = 120, *, groups: int = 10, seed: int = 0,
            per_user: bool = False) -> Requirements:
    """The paper's personalized requirements tied to the static pair ``(w, eps)`` (Section 5.2).

    Users are split in id order into ``groups`` contiguous, near-equal groups (as the authors' code does); each group
    draws ``eps_i`` uniformly from :func:`epsilon_candidates` and, independently, ``w_i`` from
    :func:`window_candidates`. ``per_user=True`` makes every user draw on their own.

    >>> r = grouped(1000, 0.6, 120, seed=1)
    >>> r.users, r.types.count <= 10, set(r.windows.tolist()) <= {40, 80, 120}
    (1000, True, True)
    """
    users = check_positive_int(users, "users")
    groups = check_positive_int(groups, "groups")
    eps_choices, w_choices = epsilon_candidates(epsilon), window_candidates(window)
    rng = np.random.default_rng([int(seed), _SEED_TAG])
    draws = users if per_user else min(groups, users)
    eps = rng.choice(eps_choices, draws)
    w = rng.choice(w_choices, draws)
    if not per_user:
        sizes = [len(part) for part in np.array_split(np.arange(users), draws)]
        eps, w = np.repeat(eps, sizes), np.repeat(w, sizes)
    return Requirements(w, eps)


def two_type(users: int, share: float, vary: str = "epsilon", *, strict_epsilon: float = 0.6, strict_window: int = 120,
             relaxed_epsilon: float = 1.0, relaxed_window: int = 40) -> Requirements:
    """The two-type study (Section 5.5): the first ``round(share n)`` users (id order) are relaxed.

    ``vary="epsilon"``: they have ``relaxed_epsilon``, the rest ``strict_epsilon``, all ``strict_window``.
    ``vary="window"``: they have ``relaxed_window``, the rest ``strict_window``, all ``strict_epsilon``.

    >>> r = two_type(10, 0.3, "window")
    >>> r.windows.tolist(), sorted(set(r.epsilons.tolist()))
    ([40, 40, 40, 120, 120, 120, 120, 120, 120, 120], [0.6])
    """
    users = check_positive_int(users, "users")
    strict_epsilon = check_epsilon(strict_epsilon, "strictest epsilon")
    relaxed_epsilon = check_epsilon(relaxed_epsilon, "relaxed epsilon")
    if not 0.0 <= share <= 1.0:
        raise ParameterError(f"the share of relaxed users must lie in [0, 1], got {share!r}")
    relaxed = np.arange(users) < round(share * users)
    if vary == "epsilon":
        return Requirements(np.full(users, strict_window), np.where(relaxed, relaxed_epsilon, strict_epsilon))
    if vary == "window":
        return Requirements(np.where(relaxed, relaxed_window, strict_window), np.full(users, strict_epsilon))
    raise ParameterError(f"vary must be 'epsilon' or 'window', got {vary!r}")


REQUIREMENT_MIXES = ("groups", "per-user", "two-type-epsilon", "two-type-window")


def generate(mix: str, users: int, epsilon: float = 0.6, window: int = 120, *, groups: int = 10, share: float = 0.5,
             seed: int = 0) -> Requirements:
    """One of :data:`REQUIREMENT_MIXES` for ``users`` users, tied to the strictest pair ``(window, epsilon)``.

    The two-type mixes relax to eps = 1.0 or w = 40 (Section 5.5, Table 3), whatever the strictest pair.
    """
    if mix in ("groups", "per-user"):
        return grouped(users, epsilon, window, groups=groups, seed=seed, per_user=mix == "per-user")
    if mix in ("two-type-epsilon", "two-type-window"):
        return two_type(users, share, mix.rsplit("-", 1)[1], strict_epsilon=epsilon, strict_window=window)
    raise ParameterError(f"unknown requirement mix {mix!r}; choose one of {', '.join(REQUIREMENT_MIXES)}")
