"""What the server and the devices exchange in one slot, and what a slot yields.

A slot of an LDP stream is a request/response round per phase (M1 dissimilarity, M2 publication).
The server sends a :class:`Request` (who is asked, with which budget and oracle); devices answer
with perturbed reports; the collector sums them into the oracle's additive support and counts the
``n`` users who answered. :class:`LocalDissimilarity` is M1's output, :class:`LocalStepResult`
the slot's outcome with what every user spent (the users asked in each phase).

>>> r = Request(slot=3, phase=Phase.PUBLICATION, epsilon=1.0, oracle="grr", domain_size=4,
...             population=10, users=np.array([2, 5, 7]))
>>> r.size, r.make_oracle().name
(3, 'grr')
>>> Request.from_dict(r.to_dict()).users.tolist()
[2, 5, 7]
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..base import StepResult
from ..packing import LayoutError
from ..randomness import Phase
from .oracle import LocalOracle
from .oracles import make_oracle
from .user_sets import pack_users, unpack_users

__all__ = ["Request", "LocalDissimilarity", "LocalStepResult", "DIGEST_BYTES"]

DIGEST_BYTES = 32


@dataclass(frozen=True, eq=False)
class Request:
    """The server asks ``users`` (sorted indices in ``0..population-1``; None = everyone) for one
    report each at ``(slot, phase)``, perturbed with ``oracle`` at budget ``epsilon``.

    ``epsilon`` is what one report costs the user who sends it: a device's own ledger adds it to
    the user's window spend (budget division asks every user twice in a publishing slot of LBD/LBA).
    """

    slot: int
    phase: Phase
    epsilon: float
    oracle: str  # resolved: "grr", "oue" or "hm" (Ada decided per request)
    domain_size: int
    population: int
    users: np.ndarray | None = None
    bound: float | None = None  # B of mean estimation (oracle "hm")

    @property
    def size(self) -> int:
        """How many users are asked."""
        return self.population if self.users is None else int(self.users.size)

    @cached_property
    def digest(self) -> bytes:
        """BLAKE2b of the request's canonical encoding: equal exactly when every field of two requests is.

        The scalar fields go in a sorted-key JSON header (floats as their exact hex form), the asked
        users after it as little-endian int64, so an int32 copy of the same users digests the same.
        A device ledger charges a request by it, and a device's randomness is bound to it.
        """
        fields = self.to_dict()
        del fields["users"]  # packed on the wire: the ids go in below
        users = self.users
        # Every field of the wire form is in, so a field added to requests later is covered too.
        header = {**fields, "slot": int(fields["slot"]), "phase": int(fields["phase"]), "oracle": str(fields["oracle"]),
                  "domain_size": int(fields["domain_size"]), "population": int(fields["population"]),
                  "epsilon": float(fields["epsilon"]).hex(),
                  "bound": None if fields["bound"] is None else float(fields["bound"]).hex(),
                  "users": None if users is None else int(np.size(users))}
        digest = hashlib.blake2b(json.dumps(header, sort_keys=True).encode(), digest_size=DIGEST_BYTES,
                                 person=b"wevent-request")
        if users is not None:
            digest.update(np.ascontiguousarray(users, dtype="<i8").tobytes())
        return digest.digest()

    def make_oracle(self, var_mode: str = "exact_avg") -> LocalOracle:
        return make_oracle(self.oracle, self.epsilon, self.domain_size, bound=self.bound, var_mode=var_mode)

    def asks(self, users) -> np.ndarray:
        """Whether each of ``users`` is asked (a device checks this before it answers)."""
        users = np.asarray(users, dtype=np.int64)
        if self.users is None:
            return (users >= 0) & (users < self.population)
        position = np.searchsorted(self.users, users)
        return (position < self.users.size) & (self.users[np.minimum(position, self.users.size - 1)] == users)

    def to_dict(self) -> dict:
        """The request as plain fields; ``users`` as compact bytes (at most ``population / 8 + 1``)."""
        users = None if self.users is None else pack_users(self.users, self.population)
        return {
            "slot": self.slot, "phase": int(self.phase), "epsilon": self.epsilon, "oracle": self.oracle,
            "domain_size": self.domain_size, "population": self.population, "users": users, "bound": self.bound,
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Request":
        """Inverse of :meth:`to_dict`; ``users`` may also be a sequence of ids."""
        users, population = data["users"], int(data["population"])
        if isinstance(users, (bytes, bytearray, memoryview)):
            users = unpack_users(bytes(users), population)
        return cls(
            slot=int(data["slot"]), phase=Phase(int(data["phase"])), epsilon=float(data["epsilon"]),
            oracle=str(data["oracle"]), domain_size=int(data["domain_size"]), population=population,
            users=None if users is None else np.asarray(users, dtype=np.int64),
            bound=None if data["bound"] is None else float(data["bound"]),
        )


@dataclass(frozen=True)
class LocalDissimilarity:
    """M1's output: ``dis = mean_k (c1[k] - r_l[k])^2 - V(eps_1, n_1)`` from ``reporters`` reports.

    >>> d = LocalDissimilarity(4, 0.25, 0.5, 120, 0.01)
    >>> LocalDissimilarity.from_dict(d.to_dict()) == d
    True
    """

    slot: int
    value: float
    epsilon: float
    reporters: int
    variance: float

    def to_dict(self) -> dict:
        return {"slot": self.slot, "value": self.value, "epsilon": self.epsilon, "reporters": self.reporters,
                "variance": self.variance}

    @classmethod
    def from_dict(cls, data: dict) -> "LocalDissimilarity":
        """Inverse of :meth:`to_dict`."""
        if not isinstance(data, dict):  # the five fields in a list: the layout before they were named
            raise LayoutError("a dissimilarity", ["its fields' names"])
        return cls(int(data["slot"]), float(data["value"]), float(data["epsilon"]), int(data["reporters"]),
                   float(data["variance"]))


@dataclass(frozen=True, eq=False)
class LocalStepResult(StepResult):
    """One slot of a local mechanism.

    ``eps1``/``eps2`` are the budgets of one report in M1/M2 (0 where the phase did not run);
    each user asked in a phase (``users1``/``users2``, None = every user) spent that much.
    ``n1``/``n2`` count the users who answered, ``reports = n1 + n2``, ``bits`` the
    communication of the slot (the accounting :mod:`._base` states), ``threshold`` is ``err`` (also as :attr:`err`).
    """

    n1: int = 0
    n2: int = 0
    reports: int = 0
    bits: int = 0
    users1: np.ndarray | None = field(default=None, repr=False)
    users2: np.ndarray | None = field(default=None, repr=False)
    oracle1: str | None = None
    oracle2: str | None = None

    @property
    def err(self) -> float | None:
        return self.threshold
