"""The users' side: perturb the values of the users a :class:`Request` asks, block by block.

Randomness comes from the **devices'** key, never the server's: users are grouped in blocks of
``block_size`` consecutive indices, and the reports of the requested users of block ``b`` are
drawn in ascending user order from the keystream of :func:`answer_keystream`, bound to the
request they answer: its key is a keyed hash of the request's digest under the first bytes of
``DerivedRandomness(device_key, stream).keystream(slot, phase, block=b)``. A fleet process
holding whole blocks (:func:`block_reports`) therefore produces exactly the reports the
simulation produces, a retried request gets the identical reports, and two different requests
never share random bytes, even for the same ``(slot, phase)``: answers to a request for the
same users at another budget are independent draws, not the same draws read at other odds.

Two simulation modes, feeding the same estimator:

* ``report``: every report is drawn (what the devices do); the collector's support is their sum.
* ``sufficient``: the support is drawn directly from the requested users' value counts, exact in
  distribution, its cost independent of the number of reports (GRR, OUE; HM has no cheaper
  statistic than its reports). It uses the generator at block ``-1`` (simulation only: no
  device draws from it). Given an
  :class:`~.exchangeable.ExchangeableBinarySlot` instead of values, the counts are drawn too.

Examples
--------
>>> from wevent.core.randomness import Phase
>>> devices = Devices.from_seed(1, block_size=4)
>>> request = Request(slot=1, phase=Phase.PUBLICATION, epsilon=1.0, oracle="grr", domain_size=3,
...                   population=10, users=np.array([0, 5, 6, 9]))
>>> values = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0])
>>> reports = devices.reports(request, values)
>>> support, n = devices.collect(request, values)
>>> bool((request.make_oracle().support(reports) == support).all()), n
(True, 4)
>>> again = block_reports(devices.randomness, request, 1, values[[5, 6]])  # users 5, 6 of block 1
>>> bool((again == reports[1:3]).all())
True
>>> other = Request.from_dict({**request.to_dict(), "epsilon": 2.0})  # same (slot, phase), another request
>>> first, second = (answer_keystream(devices.randomness, r, 0).words(2) for r in (request, other))
>>> bool((first == answer_keystream(devices.randomness, request, 0).words(2)).all()), bool((first == second).any())
(True, False)
"""

from __future__ import annotations

import hashlib
from typing import Iterator

import numpy as np

from ..randomness import DerivedRandomness, KeyStream, SecretKey
from ..validation import ParameterError, check_positive_int
from .exchangeable import ExchangeableBinarySlot
from .oracle import FrequencyOracle, LocalOracle
from .protocol import Request

__all__ = ["Devices", "answer_keystream", "block_reports", "MODES", "DEFAULT_BLOCK_SIZE"]

MODES = ("report", "sufficient")
DEFAULT_BLOCK_SIZE = 65536
_SUFFICIENT_BLOCK = -1


def answer_keystream(randomness: DerivedRandomness, request: Request, block: int) -> KeyStream:
    """The keystream block ``block`` answers ``request`` from: keyed by a BLAKE2b of the request's
    digest under the first 32 bytes of the block's keystream at the request's ``(slot, phase)``, so
    its bytes are a function of the devices' key, the block and every field of the request."""
    coordinates = randomness.keystream(request.slot, request.phase, block=block)
    key = hashlib.blake2b(request.digest, key=coordinates.words(4).tobytes(), digest_size=32,
                          person=b"wevent-answer-v1")
    return KeyStream(key.digest())


def block_reports(randomness: DerivedRandomness, request: Request, block: int, values,
                  oracle: LocalOracle | None = None) -> np.ndarray:
    """The reports of the requested users of ``block``, given their values in ascending user order."""
    oracle = oracle if oracle is not None else request.make_oracle()
    return oracle.perturb(values, answer_keystream(randomness, request, block))


class Devices:
    """Every user's device at once, for simulation (and the core of a device fleet)."""

    def __init__(self, randomness: DerivedRandomness, *, block_size: int = DEFAULT_BLOCK_SIZE, mode: str = "report") -> None:
        if mode not in MODES:
            raise ParameterError(f"simulation mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.randomness = randomness
        self.block_size = check_positive_int(block_size, "block size")
        self.mode = mode

    @classmethod
    def from_seed(cls, seed: int, stream: str = "default", **options) -> "Devices":
        """Devices whose key is derived from ``seed`` (separately from the server's key)."""
        return cls(DerivedRandomness(SecretKey.from_seed(seed, purpose="devices"), stream), **options)

    def blocks(self, request: Request) -> Iterator[tuple[int, slice | np.ndarray]]:
        """``(block, users)`` for every block holding requested users; users as a slice or an index array."""
        size = self.block_size
        if request.users is None:
            for block in range(-(-request.population // size)):
                yield block, slice(block * size, min(request.population, (block + 1) * size))
            return
        users = request.users
        if users.size == 0:
            return
        first, last = int(users[0]) // size, int(users[-1]) // size
        bounds = np.searchsorted(users, np.arange(first, last + 2) * size)
        for block, (start, stop) in enumerate(zip(bounds[:-1], bounds[1:]), start=first):
            if stop > start:
                yield block, users[start:stop]

    def reports(self, request: Request, values) -> np.ndarray:
        """Every requested user's report, in ascending user order (per-report mode's draws)."""
        oracle = request.make_oracle()
        parts = [block_reports(self.randomness, request, block, values[users], oracle) for block, users in self.blocks(request)]
        if not parts:  # nobody asked: an empty batch in the wire format
            return block_reports(self.randomness, request, 0, np.zeros(0, dtype=np.int64), oracle)
        return np.concatenate(parts)

    def collect(self, request: Request, values) -> tuple[np.ndarray, int]:
        """What the collector would hold once every requested user answered: ``(support, n)``."""
        oracle = request.make_oracle()
        if isinstance(values, ExchangeableBinarySlot):  # only the asked users' counts are known, not their values
            if self.mode != "sufficient" or not isinstance(oracle, FrequencyOracle):
                raise ParameterError("an exchangeable slot has no values to perturb: simulate it in sufficient "
                                     "mode with a frequency oracle")
            rng = self.randomness.transient_generator(request.slot, request.phase, block=_SUFFICIENT_BLOCK)
            return oracle.sample_support_of_counts(values.counts(request.users, rng), rng), request.size
        if self.mode == "sufficient":
            asked = values if request.users is None else values[request.users]
            rng = self.randomness.transient_generator(request.slot, request.phase, block=_SUFFICIENT_BLOCK)
            return oracle.sample_support(asked, rng), request.size
        blocks = list(self.blocks(request))
        asked = values if request.users is None else values[request.users]
        streams = [answer_keystream(self.randomness, request, block) for block, _ in blocks]
        sizes = [users.stop - users.start if isinstance(users, slice) else users.size for _, users in blocks]
        return oracle.batches_support(asked, streams, sizes), request.size
