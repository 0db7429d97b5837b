"""Derived randomness: every random draw is a pure function of a secret key and its coordinates.

A mechanism never shares one generator across slots: each draw is addressed by
(stream, slot, phase[, block]). Re-processing a slot after a crash therefore reproduces the very
same noise instead of drawing a second, independent release; averaging two independent releases
would halve the noise and leak.

All server-side noise (continuous and discrete Laplace, scalar and vector) comes from
:class:`NoiseKeystream`: AES-128 under a per-stream sub-key of the server's secret, applied to
counter blocks that spell (slot, phase, what the word is for, index). That is counter mode with
structured counters: a cryptographic generator (no release helps predict another's noise, where
a PCG64 state can be recovered from its output), one encryptor per stream, and no hashing or
generator state per draw. Numpy generators (:meth:`DerivedRandomness.generator`) remain for the
server's random choices that are not noise values: which users to ask (published anyway), the
personalized sample's coins (never published; each slot's generator is seeded on its own by a
keyed hash, so no output of one helps predict another), groupings of public releases, and the
simulations' shortcuts.

The same holds on devices: a retried local report is identical to the first one, because the
device-side perturbation of block ``b`` of users at ``(stream, slot, phase)`` has its own
:class:`KeyStream` (users are grouped in blocks so that a vectorised fleet needs one keystream per
block, not one per user). Device randomness is AES-128 in counter mode too: the server sees
reports that depend on these bytes, so no report may help predict the others. It is also the
fastest source here: AES-NI fills a buffer at about 10 GB/s, where PCG64 gives about 5 GB/s.

Examples
--------
>>> key = SecretKey.from_seed(7)
>>> rng = DerivedRandomness(key, stream="taxi")
>>> a = rng.laplace(slot=3, phase=Phase.PUBLICATION, scale=1.0, size=4)
>>> b = DerivedRandomness(key, stream="taxi").laplace(3, Phase.PUBLICATION, 1.0, 4)
>>> bool((a == b).all())
True
>>> c = rng.laplace(slot=4, phase=Phase.PUBLICATION, scale=1.0, size=4)
>>> bool((a == c).any())
False
>>> bool(rng.discrete_laplace(3, Phase.DISSIMILARITY, 0.5) == rng.discrete_laplace(3, Phase.DISSIMILARITY, 0.5, 1)[0])
True

Derived randomness
------------------

**Derived randomness.** Every draw is a pure function of a secret key and its coordinates
(`pipeline/core/randomness.py`). All server-side noise is AES-128, under a per-stream sub-key of
the server's secret (a keyed BLAKE2b), of counter blocks that spell (slot, phase, what the word
is for, index): counter mode whose counters carry their coordinates, one encryptor per stream
and no hash per draw. A device block answers a request from the devices' AES-128-CTR keystream
of (stream, slot, phase, device block) keyed the same way, and bound to the request: its key is a
keyed BLAKE2b of the request's digest, so a repeated request gets the same reports and two
different requests (another budget for the same slot and phase) never share a byte. Both are
cryptographic generators: the server publishes releases
made from its noise and sees reports made from the devices' bytes, and a PCG64 state can be
recovered from enough of its output. PCG64 generators, seeded with a keyed BLAKE2b hash of
(stream, slot, phase), remain for the server's random choices that are not noise values (which
users to ask, published anyway; the personalized sample's coins, never published, each slot's
from its own seed) and for simulation shortcuts. Re-processing a slot after a crash reproduces
the very same release, instead of a second independent one (averaging two would halve the
noise). Retried device reports are identical too.

**Per-user randomness comes in blocks.** A device's randomness is per (stream, slot, phase,
block of 65,536 users), not per user. A fleet that holds whole blocks reproduces the
simulation's reports exactly, and a retried report is identical.

**Device randomness and server noise are AES-128, not PCG64.** The server never sees the
devices' random bytes, but it sees reports made from them, and anyone sees releases made from
the server's noise; PCG64 is not a cryptographic generator. AES under a key derived from the
right secret is, and with AES-NI it fills buffers about twice as fast as PCG64 here. It adds one
dependency, `cryptography` (OpenSSL). Numpy's generators remain for GRR's and HM's draws (seeded
from the keystream), the server's choices of whom to ask, and simulation shortcuts.
"""

from __future__ import annotations

import enum
import hashlib
import math
import os
import struct
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from .noise import continuous_laplace, two_sided_geometric

__all__ = ["Phase", "SecretKey", "DerivedRandomness", "NoiseKeystream", "KeyStream", "ZeroNoise"]

_COORDINATES = struct.Struct("<qqq")  # slot, phase, block
_COUNTER = struct.Struct("<qQ")  # a noise counter block: slot, then phase | code | index
_WORDS = struct.Struct("<QQ")
_TWO_TO_MINUS_53 = 2.0**-53
_LOW53 = 2**53 - 1
# what a noise word is for (the counter block's code): a discrete value's word, a continuous
# value's word, or (code 2 + m) the words of uniform m of one discrete value
_DISCRETE, _CONTINUOUS, _UNIFORM = 0, 1, 2


class Phase(enum.IntEnum):
    """What a generator is used for inside one slot; each phase has an independent stream."""

    SETUP = 0  # one-off draws at start-up (e.g. LPU's partition of users into groups)
    DISSIMILARITY = 1  # M1: dissimilarity noise (central) or dissimilarity reports (local)
    PUBLICATION = 2  # M2: publication noise (central) or publication reports (local)
    SAMPLE_DISSIMILARITY = 3  # server-side choice of the users asked in M1
    SAMPLE_PUBLICATION = 4  # server-side choice of the users asked in M2


class SecretKey(bytes):
    """A 32-byte secret from which all noise is derived. Keep it out of logs and topics."""

    SIZE = 32

    def __new__(cls, value: bytes) -> "SecretKey":
        if len(value) != cls.SIZE:
            raise ValueError(f"a secret key has {cls.SIZE} bytes, got {len(value)}")
        return super().__new__(cls, value)

    @classmethod
    def from_seed(cls, seed: int, purpose: str = "server") -> "SecretKey":
        """A reproducible key for experiments: the same seed always gives the same noise.

        ``purpose`` separates the server's key from the devices' key derived from one seed.
        """
        material = f"wevent-seed:{purpose}:{int(seed)}".encode()
        return cls(hashlib.blake2b(material, digest_size=cls.SIZE).digest())

    @classmethod
    def from_hex(cls, text: str) -> "SecretKey":
        try:
            raw = bytes.fromhex(text.strip())
        except ValueError as exc:
            raise ValueError("a secret key must be 64 hexadecimal characters") from exc
        return cls(raw)

    @classmethod
    def generate(cls) -> "SecretKey":
        """A fresh key from the operating system's entropy (production)."""
        return cls(os.urandom(cls.SIZE))

    def derive(self, purpose: str) -> bytes:
        """A 32-byte sub-key for ``purpose`` (a keyed BLAKE2b of the label): the secret itself keys
        nothing but noise, and knowing one sub-key reveals neither the secret nor another sub-key.

        >>> key = SecretKey.from_seed(7)
        >>> key.derive("internal-mac") == key.derive("internal-mac") != key.derive("request-signing")
        True
        """
        return hashlib.blake2b(purpose.encode(), key=self, digest_size=self.SIZE, person=b"wevent-kdf-v1").digest()

    def __repr__(self) -> str:  # never print the secret itself
        return "SecretKey(<hidden>)"


class DerivedRandomness:
    """Counter-based randomness for one stream: noise, numpy generators and the devices' keystreams.

    ``laplace`` and ``discrete_laplace`` draw the noise of ``(slot, phase)`` from the stream's
    :class:`NoiseKeystream`: continuous Laplace (the papers' floating-point sampler, inverse CDF
    of 53-bit uniforms) or exact two-sided geometric noise (:func:`.noise.two_sided_geometric`).
    ``generator(slot, phase, block)`` returns a numpy generator whose PCG64 state is a keyed
    BLAKE2b hash of the coordinates, for server-side choices that are not noise values (which
    users to ask, the personalized sample's coins: see the module text) and simulation shortcuts;
    never for noise, whose values are published, because a PCG64 state can be recovered from its
    output. ``keystream(slot, phase, block)`` is the
    devices' AES-CTR keystream, keyed by another such hash. Every draw depends on its coordinates
    only, never on call order or process. Not thread-safe: one object per thread.
    """

    def __init__(self, key: SecretKey, stream: str = "default") -> None:
        self.key = SecretKey(bytes(key))
        self.stream = str(stream)
        prefix = struct.pack("<q", len(self.stream.encode())) + self.stream.encode()
        self._hasher = hashlib.blake2b(prefix, key=self.key, digest_size=32, person=b"wevent-rng-v1")
        self._keystreams = hashlib.blake2b(prefix, key=self.key, digest_size=32, person=b"wevent-aes-v1")
        self._noise = NoiseKeystream(hashlib.blake2b(prefix, key=self.key, digest_size=16,
                                                     person=b"wevent-noise-v1").digest())
        self._bits = np.random.PCG64(0)
        self._scratch = np.random.Generator(self._bits)
        # (code, phase, epsilon or scale, scalar) -> (slot -> row, rows of values): noise drawn ahead (prefetch)
        self._prefetched: dict[tuple[int, int, float, bool], tuple[dict[int, int], np.ndarray]] = {}

    def _state(self, slot: int, phase: int, block: int) -> Any:
        h = self._hasher.copy()  # the keyed, personalised prefix is hashed once per stream
        h.update(_COORDINATES.pack(slot, phase, block))
        return _pcg64_state(h.digest())

    def generator(self, slot: int, phase: int, block: int = 0) -> np.random.Generator:
        """An independent numpy generator for these coordinates (safe to keep and pass around).

        For choices that are not noise and for simulation shortcuts only: noise comes from
        :meth:`laplace` and :meth:`discrete_laplace`.
        """
        bits = np.random.PCG64(0)
        bits.state = self._state(slot, phase, block)
        return np.random.Generator(bits)

    def transient_generator(self, slot: int, phase: int, block: int = 0) -> np.random.Generator:
        """:meth:`generator`'s draws from one reused generator: valid only until the next draw from this
        object (do not keep it). Building a generator costs about 50 µs, more than the draws of a
        slot's sampling or sufficient statistic; the hot paths that draw at once use this one.
        Not for noise either."""
        self._bits.state = self._state(slot, phase, block)
        return self._scratch

    def keystream(self, slot: int, phase: int, block: int = 0) -> "KeyStream":
        """The devices' keystream of block ``block`` at ``(slot, phase)`` (independent of :meth:`generator`)."""
        h = self._keystreams.copy()
        h.update(_COORDINATES.pack(slot, phase, block))
        return KeyStream(h.digest())

    def laplace(self, slot: int, phase: int, scale: float, size: int | None = None):
        """Continuous Laplace(0, scale) noise at (slot, phase): a float when ``size`` is None, else an array.

        Value ``i`` is :func:`.noise.continuous_laplace` of the stream's continuous word ``i``; a
        scalar (or a vector of one) computes value 0 with Python's ``math.log``, which may round
        its last bit otherwise than numpy's. Floating-point noise: its low-order
        bits leak (see :mod:`.noise`), which is why a stream must call it ``laplace-fp-unsafe``.
        """
        if self._prefetched:
            values = self._ahead(_CONTINUOUS, slot, phase, scale, size is None or size == 1, size)
            if values is not None:
                return values
        if size is None or size == 1:  # numpy's in-place arithmetic is slowest on one element: value 0 in Python
            value = _scalar_laplace(int(self._noise.values(slot, phase, _CONTINUOUS, 1)[0]), scale)
            return value if size is None else np.array([value])
        return continuous_laplace(self._noise.values(slot, phase, _CONTINUOUS, size), scale)

    def discrete_laplace(self, slot: int, phase: int, epsilon: float, size: int | None = None):
        """Exact two-sided geometric noise at (slot, phase): ``P(x) ∝ exp(-epsilon |x|)`` on the integers.

        An int when ``size`` is None (value 0 of the vector), else an int64 array
        (:func:`.noise.two_sided_geometric` on the stream's discrete words), so the same key and
        coordinates always give the same noise. Added to an integer query of sensitivity 1 it is
        exactly ``epsilon``-DP, with no floating-point artefact.
        """
        if self._prefetched:
            values = self._ahead(_DISCRETE, slot, phase, epsilon, True, size)
            if values is not None:
                return values
        return two_sided_geometric(_NoiseWords(self._noise, slot, phase), epsilon, size)

    def prefetch(self, slots, phase: int, size: int | None = None, *, epsilon: float | None = None,
                 scale: float | None = None) -> None:
        """Draw now, in one batch, the noise that :meth:`discrete_laplace` at ``epsilon`` or :meth:`laplace`
        at ``scale`` will be asked for at ``phase`` of each of ``slots``: vectors of up to ``size``
        values, or scalars when ``size`` is None.

        Every value is the one the draw itself gives: a pure function of the key and its
        coordinates, read from the same words (a continuous scalar with the same ``math.log``). A
        vector of ``k <= size`` values is the first ``k``: value ``i`` reads word ``i`` whatever the
        length. Kept until :meth:`forget`.
        """
        slots = np.asarray(slots, dtype=np.int64)
        width = 1 if size is None else int(size)
        if epsilon is not None:
            key = (_DISCRETE, phase, epsilon, True)
            values = two_sided_geometric(_NoiseRows(self._noise, slots, phase, width), epsilon, slots.size * width)
        elif scale is not None:
            key = (_CONTINUOUS, phase, scale, size is None or size == 1)
            words = self._noise.rows(slots, phase, _CONTINUOUS, width)
            values = (np.array([_scalar_laplace(word, scale) for word in words[:, 0].tolist()]) if key[3]
                      else continuous_laplace(words.reshape(-1), scale))
        else:
            raise ValueError("prefetch needs an epsilon (discrete noise) or a scale (Laplace noise)")
        values = values.reshape(slots.size, width)
        values.flags.writeable = False
        self._prefetched[key] = ({slot: row for row, slot in enumerate(slots.tolist())}, values)

    def forget(self) -> None:
        """Drop what :meth:`prefetch` drew."""
        self._prefetched.clear()

    def _ahead(self, code: int, slot: int, phase: int, parameter: float, scalar: bool, size: int | None):
        """The prefetched draw of (slot, phase), or None when it was not drawn ahead."""
        batch = self._prefetched.get((code, phase, parameter, scalar))
        if batch is None:
            return None
        row = batch[0].get(slot)
        values = batch[1]
        if row is None or (size or 1) > values.shape[1]:
            return None
        if size is None:
            return int(values[row, 0]) if code == _DISCRETE else float(values[row, 0])
        return values[row, :size]

    def for_stream(self, stream: str) -> "DerivedRandomness":
        return type(self)(self.key, stream)


class NoiseKeystream:
    """The server's noise words of one stream: AES-128 of counter blocks that say what each word is for.

    Block ``(slot, phase, code, index)`` is two little-endian 64-bit words: the slot (two's
    complement), then ``phase << 56 | code << 48 | index`` (phase and code below 256, index below
    2^48); its encryption is two words of noise. Code 0 holds the discrete values' words and
    code 1 the continuous values' (word ``i`` in block ``i // 2``), code ``2 + m`` the words of
    uniform ``m`` of discrete value ``lane`` (``index = lane << 8 | step``, two words per step).
    This is counter mode whose counters carry their coordinates: one encryptor for the stream,
    any word readable without the others, distinct coordinates giving independent words.

    >>> stream = NoiseKeystream(bytes(16))
    >>> first = stream.values(slot=5, phase=2, code=0, size=3).copy()
    >>> bool((stream.values(5, 2, 0, 1) == first[:1]).all()), bool((stream.values(6, 2, 0, 3) == first).any())
    (True, False)
    >>> stream.block(5, 2, 0, 1)[0] == int(first[2])   # word 2 is the first half of block 1
    True
    """

    _CACHED = 32  # counter templates kept: one per (phase, code, vector length) in use

    def __init__(self, key: bytes) -> None:
        self._cipher = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
        self._templates: dict[tuple[int, int, int], tuple[np.ndarray, memoryview, memoryview, np.ndarray]] = {}

    def values(self, slot: int, phase: int, code: int, size: int) -> np.ndarray:
        """Words ``0 .. size - 1`` of ``(slot, phase, code)``: a buffer that the next call overwrites."""
        template = self._templates.get((phase, code, size))
        if template is None:
            template = self._template(phase, code, size)
        slots, plain, cipher, words = template
        slots.fill(slot)  # an int64 view: a slot beyond 64 bits raises
        self._cipher.update_into(plain, cipher)
        return words

    def _template(self, phase: int, code: int, size: int):
        blocks = (size + 1) // 2
        if not (0 <= phase < 256 and 0 <= code < 256 and 0 <= size < 2**49):
            raise ValueError(f"no noise words at phase {phase}, code {code}, size {size}")
        if len(self._templates) >= self._CACHED:
            self._templates.clear()
        plain = np.empty((blocks, 2), np.uint64)
        plain[:, 1] = np.arange(blocks, dtype=np.uint64) | np.uint64(phase << 56 | code << 48)
        out = np.empty(2 * blocks + 2, np.uint64)  # ECB's update_into wants a block of room beyond the input
        template = (plain.view(np.int64)[:, 0], plain.reshape(-1).view(np.uint8).data, out.view(np.uint8).data,
                    out[:size])
        self._templates[(phase, code, size)] = template
        return template

    def rows(self, slots: np.ndarray, phase: int, code: int, size: int) -> np.ndarray:
        """Words ``0 .. size - 1`` of ``(slot, phase, code)`` for each of ``slots``: one row each, one
        encryption for all (:meth:`values` of every slot)."""
        blocks = (size + 1) // 2
        if not (0 <= phase < 256 and 0 <= code < 256 and 0 <= size < 2**49):
            raise ValueError(f"no noise words at phase {phase}, code {code}, size {size}")
        plain = np.empty((slots.size, blocks, 2), np.uint64)
        plain.view(np.int64)[:, :, 0] = slots[:, None]
        plain[:, :, 1] = np.arange(blocks, dtype=np.uint64) | np.uint64(phase << 56 | code << 48)
        out = np.empty(plain.size + 2, np.uint64)
        self._cipher.update_into(plain.reshape(-1).view(np.uint8).data, out.view(np.uint8).data)
        return out[:plain.size].reshape(slots.size, 2 * blocks)[:, :size]

    def lanes(self, slot, phase: int, code: int, lanes: np.ndarray, step: int = 0) -> np.ndarray:
        """The first word of block ``(slot, phase, code, lane << 8 | step)`` for each lane (``slot``:
        one slot, or one per lane)."""
        if lanes.size and int(lanes.max()) >= 2**40:
            raise ValueError("noise words address at most 2^40 values per draw")
        plain = np.empty((lanes.size, 2), np.uint64)
        plain.view(np.int64)[:, 0] = slot
        plain[:, 1] = (lanes.astype(np.uint64) << np.uint64(8)) | np.uint64(phase << 56 | code << 48 | step)
        out = np.empty(2 * lanes.size + 2, np.uint64)
        self._cipher.update_into(plain.reshape(-1).view(np.uint8).data, out.view(np.uint8).data)
        return out[:2 * lanes.size:2]

    def block(self, slot: int, phase: int, code: int, index: int) -> tuple[int, int]:
        """The two words of one block, as Python ints."""
        return _WORDS.unpack(self._cipher.update(_COUNTER.pack(slot, phase << 56 | code << 48 | index)))


class _NoiseWords:
    """The :class:`.noise.WordSource` of the discrete noise at one ``(slot, phase)``."""

    __slots__ = ("_stream", "_slot", "_phase")

    def __init__(self, stream: NoiseKeystream, slot: int, phase: int) -> None:
        self._stream, self._slot, self._phase = stream, slot, phase

    def values(self, size: int) -> np.ndarray:
        return self._stream.values(self._slot, self._phase, _DISCRETE, size)

    def first(self, uniform: int, lanes: np.ndarray) -> np.ndarray:
        return self._stream.lanes(self._slot, self._phase, _UNIFORM + uniform, lanes)

    def words(self, uniform: int, lane: int) -> Iterator[int]:
        for step in range(256):
            yield from self._stream.block(self._slot, self._phase, _UNIFORM + uniform, lane << 8 | step)


class _NoiseRows:
    """The :class:`.noise.WordSource` of the discrete noise of many slots at one phase, ``size`` values
    each: value ``r * size + i`` is value ``i`` of ``slots[r]``, with that value's own uniforms."""

    __slots__ = ("_stream", "_slots", "_phase", "_size")

    def __init__(self, stream: NoiseKeystream, slots: np.ndarray, phase: int, size: int) -> None:
        self._stream, self._slots, self._phase, self._size = stream, slots, phase, size

    def values(self, size: int) -> np.ndarray:
        return self._stream.rows(self._slots, self._phase, _DISCRETE, self._size).reshape(-1)[:size]

    def first(self, uniform: int, lanes: np.ndarray) -> np.ndarray:
        rows, lanes = np.divmod(lanes, self._size)
        return self._stream.lanes(self._slots[rows], self._phase, _UNIFORM + uniform, lanes)

    def words(self, uniform: int, lane: int) -> Iterator[int]:
        row, lane = divmod(lane, self._size)
        return _NoiseWords(self._stream, int(self._slots[row]), self._phase).words(uniform, lane)


class KeyStream:
    """The AES-128-CTR keystream of 32 secret bytes (a 16-byte key, then the initial counter block).

    Reads continue where the last one stopped: :meth:`fill` writes the next bytes into a buffer
    (no allocation: the hot path of OUE), :meth:`words` returns the next 64-bit words, and
    :meth:`generator` seeds a numpy PCG64 from the next 32 bytes, for the draws numpy's
    distributions do best (GRR's other value, HM's piecewise output).

    Examples
    --------
    >>> a, b = KeyStream.from_seed(1), KeyStream.from_seed(1)
    >>> first = a.words(3)
    >>> bool((np.concatenate([first, a.words(2)]) == b.words(5)).all())  # one stream, however it is read
    True
    >>> buffer = np.empty(8, np.uint8)
    >>> bool((KeyStream.from_seed(1).fill(buffer).view(np.uint64) == first[:1]).all())
    True
    """

    _ZEROS = threading.local()  # the plaintext: counter-mode output over zeros is the keystream

    def __init__(self, secret: bytes) -> None:
        if len(secret) != 32:
            raise ValueError(f"a keystream needs 32 secret bytes, got {len(secret)}")
        self._cipher = Cipher(algorithms.AES(secret[:16]), modes.CTR(secret[16:])).encryptor()

    @classmethod
    def from_seed(cls, seed: int) -> "KeyStream":
        """A reproducible keystream for examples and tests."""
        return cls(hashlib.blake2b(f"wevent-keystream:{int(seed)}".encode(), digest_size=32).digest())

    def fill(self, out: np.ndarray) -> np.ndarray:
        """Write the next ``out.nbytes`` bytes of the stream into the C-contiguous ``out``; returns it."""
        if not out.flags.c_contiguous:
            raise ValueError("a keystream fills C-contiguous buffers only")
        size = out.nbytes
        zeros = getattr(self._ZEROS, "buffer", None)
        if zeros is None or zeros.size < size:
            zeros = self._ZEROS.buffer = np.zeros(max(size, 4096), np.uint8)
        written = self._cipher.update_into(zeros[:size].data, out.reshape(-1).view(np.uint8).data)
        assert written == size  # counter mode is a stream: every byte in gives one out
        return out

    def words(self, count: int) -> np.ndarray:
        """The next ``count`` 64-bit words of the stream."""
        return self.fill(np.empty(count, np.uint64))

    def generator(self) -> np.random.Generator:
        """A numpy generator (PCG64) whose state is the next 32 bytes of the stream."""
        bits = np.random.PCG64(0)
        bits.state = _pcg64_state(self.words(4).tobytes())
        return np.random.Generator(bits)


def _scalar_laplace(word: int, scale: float) -> float:
    """Value 0 of :func:`.noise.continuous_laplace` in Python floats (``math.log``)."""
    magnitude = -scale * math.log(((word & _LOW53) + 0.5) * _TWO_TO_MINUS_53)
    return -magnitude if word >> 63 else magnitude


def _pcg64_state(secret: bytes) -> Any:  # the dict PCG64.state accepts
    """The PCG64 state whose 128-bit state and increment are the two halves of 32 secret bytes."""
    return {
        "bit_generator": "PCG64",
        "state": {"state": int.from_bytes(secret[:16], "little"), "inc": int.from_bytes(secret[16:], "little") | 1},
        "has_uint32": 0,
        "uinteger": 0,
    }


class ZeroNoise(DerivedRandomness):
    """Test hook: Laplace and discrete Laplace noise are exactly zero; other draws stay random."""

    def laplace(self, slot: int, phase: int, scale: float, size: int | None = None):
        return 0.0 if size is None else np.zeros(size)

    def discrete_laplace(self, slot: int, phase: int, epsilon: float, size: int | None = None):
        return 0 if size is None else np.zeros(size, np.int64)

    def prefetch(self, slots, phase: int, size: int | None = None, *, epsilon: float | None = None,
                 scale: float | None = None) -> None:
        """Nothing to draw ahead: every draw is zero."""
