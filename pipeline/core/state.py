"""(De)serialisation of mechanism state: plain dicts of scalars, lists and numpy arrays.

Two encodings of the same dict:

* ``pack``/``unpack``: compact bytes (a JSON header followed by the raw array buffers), what a
  Faust table stores; a population ledger of a million users stays a few MB.
* ``to_json``/``from_json``: a JSON text with base64 arrays, for humans and audits.

Both round-trip floats exactly (JSON uses Python's shortest round-trip repr).

>>> state = {"slot": 3, "last": np.array([1.5, -2.0]), "flags": {"shift": False}, "blob": b"ab"}
>>> back = unpack(pack(state))
>>> back["slot"], back["last"].tolist(), back["flags"], back["blob"]
(3, [1.5, -2.0], {'shift': False}, b'ab')
>>> from_json(to_json(state))["last"].dtype
dtype('float64')
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import numpy as np

__all__ = ["pack", "unpack", "to_json", "from_json", "StateError"]

_MAGIC = b"WEVS1"
_ARRAY = "__ndarray__"


class StateError(ValueError):
    """The bytes or text are not a mechanism state this version can read."""


def _encode(value: Any, buffers: list[bytes] | None):
    if isinstance(value, (bytes, bytearray, np.ndarray)):
        is_bytes = not isinstance(value, np.ndarray)
        array = np.frombuffer(bytes(value), dtype=np.uint8) if is_bytes else np.ascontiguousarray(value)
        meta = {"dtype": array.dtype.str, "shape": list(array.shape)}
        if is_bytes:
            meta["bytes"] = True
        if buffers is None:
            meta["data"] = base64.b64encode(array.tobytes()).decode("ascii")
        else:
            meta["index"] = len(buffers)
            buffers.append(array.tobytes())
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


def to_json(state: dict) -> str:
    return json.dumps(_encode(state, None), separators=(",", ":"))


def from_json(text: str) -> dict:
    try:
        return _decode(json.loads(text), None)
    except (json.JSONDecodeError, KeyError, ValueError) as exc:
        raise StateError(f"corrupt wevent state JSON: {exc}") from exc
