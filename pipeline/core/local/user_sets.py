"""Compact bytes for a set of user ids out of a population of ``N``.

A set of ``k`` users is stored as whichever is shorter: a bitset of ``N`` bits (``N / 8`` bytes,
125 KB for a million users) or the gaps between its sorted ids as LEB128 varints (about one byte
per user when ``k >= N / 128``). So a set never takes more than ``N / 8 + 1`` bytes, and a
small set takes a few bytes per user. Encoding and decoding are vectorised: ``O(k)`` for gaps,
``O(N / 8)`` for a bitset.

>>> blob = pack_users(np.array([3, 5, 900]), population=1000)
>>> len(blob), unpack_users(blob, 1000).tolist(), count_users(blob)
(5, [3, 5, 900], 3)
>>> len(pack_users(np.arange(0, 1000, 2), population=1000))  # half the users: a bitset
126
>>> users_to_text(np.array([3, 5, 900]), 1000), users_from_text("RwMC/wY=").tolist()
('RwMC/wY=', [3, 5, 900])
"""

from __future__ import annotations

import base64
import binascii

import numpy as np

__all__ = ["pack_users", "unpack_users", "count_users", "users_to_text", "users_from_text", "UserSetError"]

_BITSET, _GAPS = b"B", b"G"
_SHIFTS = np.arange(0, 64, 7, dtype=np.uint64)  # a varint of an int64 takes at most 10 bytes


class UserSetError(ValueError):
    """The bytes are not a set of users of this population."""


def pack_users(users: np.ndarray, population: int) -> bytes:
    """The distinct, sorted ids ``users`` (each in ``0..population-1``) as bytes."""
    users = np.asarray(users, dtype=np.int64)
    bitset_size = -(-population // 8)
    if users.size < bitset_size:  # else gaps of a byte or more each cannot be shorter
        gaps = np.diff(users, prepend=0).astype(np.uint64)  # the first gap is the first id
        lengths = np.ones(gaps.size, dtype=np.int64)
        for shift in _SHIFTS[1:]:
            lengths += gaps >= (np.uint64(1) << shift)
        if int(lengths.sum()) < bitset_size:
            return _GAPS + _varints(gaps, lengths)
    mask = np.zeros(population, dtype=bool)
    mask[users] = True
    return _BITSET + np.packbits(mask).tobytes()


def _varints(gaps: np.ndarray, lengths: np.ndarray) -> bytes:
    """LEB128: seven bits per byte, least significant first, the high bit set on all but the last."""
    owner = np.repeat(np.arange(gaps.size), lengths)
    index = np.arange(owner.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)  # byte j of its varint
    more = index < lengths[owner] - 1
    digits = (gaps[owner] >> _SHIFTS[index]) & np.uint64(0x7F)
    return (digits | (more.astype(np.uint64) << np.uint64(7))).astype(np.uint8).tobytes()


def unpack_users(blob: bytes, population: int) -> np.ndarray:
    """Inverse of :func:`pack_users`: the sorted ids (int64)."""
    kind = bytes(blob[:1])
    if kind not in (_BITSET, _GAPS):
        raise UserSetError("not a user set (unknown kind)")
    body = np.frombuffer(blob, dtype=np.uint8, offset=1)
    if kind == _BITSET:
        padding = body[-1:] & np.uint8((1 << (-population % 8)) - 1)  # the bits past user N - 1
        if body.size != -(-population // 8) or padding.any():
            raise UserSetError(f"a bitset of {body.size} bytes is not one of {population} users")
        return np.flatnonzero(np.unpackbits(body, count=population)).astype(np.int64)
    if body.size == 0:
        return np.zeros(0, dtype=np.int64)
    last = body < 0x80
    if not last[-1]:
        raise UserSetError("a user set ends inside a varint")
    owner: np.ndarray = np.cumsum(last) - last
    starts = np.flatnonzero(np.concatenate([[True], last[:-1]]))
    index = np.arange(body.size) - starts[owner]
    if index.max() >= _SHIFTS.size:
        raise UserSetError("a varint of a user set is too long")
    digits = (body & 0x7F).astype(np.uint64) << _SHIFTS[index]
    users = np.cumsum(np.add.reduceat(digits, starts)).astype(np.int64)
    if users[-1] >= population or (users.size > 1 and np.any(np.diff(users) <= 0)):
        raise UserSetError(f"a user set holds ids out of order or outside 0..{population - 1}")
    return users


def count_users(blob: bytes) -> int:
    """How many users :func:`pack_users` packed in ``blob``, without unpacking them."""
    body = np.frombuffer(blob, dtype=np.uint8, offset=1)
    if bytes(blob[:1]) == _BITSET:
        return int(np.bitwise_count(body).sum())
    return int(np.count_nonzero(body < 0x80))  # one last byte per varint


def users_to_text(users: np.ndarray, population: int) -> str:
    """:func:`pack_users` in base64, for JSON records (an audit line)."""
    return base64.b64encode(pack_users(users, population)).decode("ascii")


def users_from_text(text: str) -> np.ndarray:
    """Inverse of :func:`users_to_text`; a bitset's length bounds the population it was packed for."""
    try:
        blob = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise UserSetError("a user set in text must be base64") from None
    bound = 8 * (len(blob) - 1) if bytes(blob[:1]) == _BITSET else 2**63 - 1
    return unpack_users(blob, bound)
