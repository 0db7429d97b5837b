"""Reusable scratch arrays of the hot paths, one set per thread.

A fresh multi-megabyte array on every call makes the allocator map new pages, and the page
faults cost more than filling the array; a scratch array is allocated once, grown when a larger
one is asked for, and reused. What it holds is valid only until the next call with its name.

>>> a = scratch("example", 4, np.int32)
>>> b = scratch("example", 3, np.int32)
>>> bool(np.shares_memory(a, b)), b.size
(True, 3)
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["scratch"]

_BUFFERS = threading.local()


def scratch(name: str, size: int, dtype) -> np.ndarray:
    """A flat array of ``size`` elements of ``dtype``, this thread's buffer named ``name``."""
    buffer = getattr(_BUFFERS, name, None)
    if buffer is None or buffer.size < size or buffer.dtype != np.dtype(dtype):
        buffer = np.empty(size, dtype)
        setattr(_BUFFERS, name, buffer)
    return buffer[:size]

