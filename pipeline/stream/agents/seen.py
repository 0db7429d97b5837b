"""The users a slot or a round has counted: a sorted array of ids while few, a bitset once smaller.

The assembler and the collector rewrite such a set after every message, so its size is the
changelog's cost per message.
"""

from __future__ import annotations

import numpy as np

__all__ = ["seen_contains", "seen_add"]


def seen_contains(seen: np.ndarray, users: np.ndarray) -> np.ndarray:
    """Which ``users`` a slot has already counted. ``seen`` is a sorted int64 array of user ids
    while few users reported, and a bitset (uint8, one bit per user) once that is smaller: the
    assembler rewrites it after every message, so its size is the changelog's cost per message."""
    if seen.dtype == np.uint8:
        return (seen[users >> 3] & (128 >> (users & 7))) != 0
    if seen.size == 0:
        return np.zeros(users.size, dtype=bool)
    return seen[np.minimum(np.searchsorted(seen, users), seen.size - 1)] == users


def seen_add(seen: np.ndarray, users: np.ndarray, population: int) -> np.ndarray:
    if seen.dtype != np.uint8 and (seen.size + users.size) * 8 > population // 8:
        bits = np.zeros((population + 7) // 8, dtype=np.uint8)  # denser than a bitset: switch for good
        seen = seen_add(bits, seen, population)
    if seen.dtype == np.uint8:  # through one bit per byte: several users may share a byte
        bits = np.unpackbits(seen)
        bits[users] = 1
        return np.packbits(bits)
    # a merge, not np.union1d: its hashing unique costs more than sorting two sorted runs
    merged = np.sort(np.concatenate([seen, users]), kind="stable")
    first = np.ones(merged.size, dtype=bool)
    first[1:] = merged[1:] != merged[:-1]
    return merged[first]
