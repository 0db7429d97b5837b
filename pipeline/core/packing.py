"""The codec of every stored state (mechanisms, table values, device ledgers): plain dicts of
scalars, lists and numpy arrays, packed to bytes or JSON and back.

Two encodings of the same dict:

* ``pack``/``unpack``: compact bytes (a JSON header followed by the raw array buffers), what a
  Faust table stores; a population ledger of a million users stays a few MB.
* ``to_json``/``from_json``: a JSON text with base64 arrays, for humans and audits.

Both round-trip floats exactly (JSON uses Python's shortest round-trip repr).

``pack_split``/``unpack_split`` store a state as a small head plus *parts*: every bytes value of
at least ``threshold`` bytes (a population ledger's slot sets) moves to a part keyed by its
BLAKE2b digest, and the head refers to it by that key. A store that keeps parts by key writes a
part once and never rewrites it while it is unchanged; a part no head refers to can be dropped.

>>> head, parts = pack_split({"slot": 3, "sets": [b"x" * 5000, b"y"]}, threshold=4096)
>>> len(parts), len(head) < 200, unpack_split(head, parts)["sets"][0] == b"x" * 5000
(1, True, True)
>>> references(head) == set(parts)
True

>>> state = {"slot": 3, "last": np.array([1.5, -2.0]), "flags": {"shift": False}, "blob": b"ab"}
>>> back = unpack(pack(state))
>>> back["slot"], back["last"].tolist(), back["flags"], back["blob"]
(3, [1.5, -2.0], {'shift': False}, b'ab')
>>> from_json(to_json(state))["last"].dtype
dtype('float64')
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from typing import Any

import numpy as np

__all__ = ["pack", "unpack", "pack_split", "unpack_split", "references", "to_json", "from_json", "StateError",
           "LayoutError"]

PART_THRESHOLD = 4096  # bytes values this long go to parts

_MAGIC = b"WEVS1"
_ARRAY = "__ndarray__"
_PART = "__part__"


class StateError(ValueError):
    """The bytes or text are not a mechanism state this version can read."""


class LayoutError(StateError):
    """A state (or message) of an older layout: one without fields this version writes.

    A version reads the layout it writes and no other; a stream stored in an older one is drained
    (every slot it holds released) and a new one started.

    >>> str(LayoutError("a BA state", ["noise"]))
    'a BA state of an older layout (without noise): this version reads only its own; drain the stream and start a new one'
    """

    def __init__(self, what: str, missing) -> None:
        super().__init__(f"{what} of an older layout (without {', '.join(missing)}): this version reads only its own; "
                         "drain the stream and start a new one")


def _encode(value: Any, buffers: list[bytes] | None):
    if isinstance(value, (bytes, bytearray, np.ndarray)):
        if isinstance(value, np.ndarray):
            array = np.ascontiguousarray(value)
            meta: dict[str, Any] = {"dtype": array.dtype.str, "shape": list(array.shape)}
            raw = array.tobytes()
        else:  # kept as they are: a packed population set is not copied again
            meta, raw = {"dtype": "|u1", "shape": [len(value)], "bytes": True}, bytes(value)
        if buffers is None:
            meta["data"] = base64.b64encode(raw).decode("ascii")
        else:
            meta["index"] = len(buffers)
            buffers.append(raw)
        return {_ARRAY: meta}
    if isinstance(value, dict):
        return {str(k): _encode(v, buffers) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v, buffers) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _decode(value: Any, buffers: list[memoryview] | None):
    if isinstance(value, dict):
        meta = value.get(_ARRAY)
        if meta is not None and len(value) == 1:
            raw = base64.b64decode(meta["data"]) if buffers is None else buffers[meta["index"]]
            if meta.get("bytes"):
                return bytes(raw)
            return np.frombuffer(raw, dtype=np.dtype(meta["dtype"])).reshape(meta["shape"]).copy()
        return {k: _decode(v, buffers) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v, buffers) for v in value]
    return value


def pack(state: dict) -> bytes:
    buffers: list[bytes] = []
    header = json.dumps(_encode(state, buffers), separators=(",", ":")).encode()
    sizes = struct.pack(f"<{len(buffers)}Q", *(len(b) for b in buffers))
    return b"".join([_MAGIC, struct.pack("<II", len(header), len(buffers)), header, sizes, *buffers])


def unpack(data: bytes) -> dict:
    view = memoryview(data)
    if bytes(view[: len(_MAGIC)]) != _MAGIC:
        raise StateError("not a wevent state (bad magic bytes)")
    try:
        offset = len(_MAGIC)
        header_len, count = struct.unpack_from("<II", view, offset)
        offset += 8
        header = json.loads(bytes(view[offset : offset + header_len]))
        offset += header_len
        sizes = struct.unpack_from(f"<{count}Q", view, offset)
        offset += 8 * count
        buffers = []
        for size in sizes:
            buffers.append(view[offset : offset + size])
            offset += size
        if offset != len(view):
            raise StateError("trailing or missing bytes in state")
        return _decode(header, buffers)
    except (struct.error, json.JSONDecodeError, KeyError, IndexError) as exc:
        raise StateError(f"corrupt wevent state: {exc}") from exc


def pack_split(state: dict, threshold: int = PART_THRESHOLD) -> tuple[bytes, dict[str, bytes]]:
    """The packed head of ``state`` and its parts by key (bytes values of ``threshold`` bytes or more)."""
    parts: dict[str, bytes] = {}

    def lift(value):
        if isinstance(value, (bytes, bytearray)) and len(value) >= threshold:
            key = hashlib.blake2b(value, digest_size=16).hexdigest()
            parts[key] = bytes(value)
            return {_PART: key}
        if isinstance(value, dict):
            return {k: lift(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [lift(v) for v in value]
        return value

    return pack(lift(state)), parts


def unpack_split(head: bytes, parts) -> dict:
    """Inverse of :func:`pack_split`; ``parts`` maps keys to bytes (any mapping holding the head's parts)."""

    def sink(value):
        if isinstance(value, dict):
            if len(value) == 1 and _PART in value:
                try:
                    return bytes(parts[value[_PART]])
                except KeyError:
                    raise StateError(f"state part {value[_PART]} is missing") from None
            return {k: sink(v) for k, v in value.items()}
        if isinstance(value, list):
            return [sink(v) for v in value]
        return value

    return sink(unpack(head))


def references(head: bytes) -> set[str]:
    """The keys of the parts a head refers to (what a store must keep for it)."""
    found: set[str] = set()

    def walk(value):
        if isinstance(value, dict):
            if len(value) == 1 and _PART in value:
                found.add(value[_PART])
            else:
                for v in value.values():
                    walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(unpack(head))
    return found


def to_json(state: dict) -> str:
    return json.dumps(_encode(state, None), separators=(",", ":"))


def from_json(text: str) -> dict:
    try:
        return _decode(json.loads(text), None)
    except (json.JSONDecodeError, KeyError, ValueError) as exc:
        raise StateError(f"corrupt wevent state JSON: {exc}") from exc
