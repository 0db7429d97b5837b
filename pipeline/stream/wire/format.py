"""What every message of the system shares: its format version, and the error of bytes that are none.

Every message a writer sends carries ``version`` (:data:`FORMAT_VERSION`); a reader takes a
message without one as version 1, refuses a version it does not know (a change of meaning bumps
it), and ignores fields it does not know (adding a field does not). The JSON Schemas of the public
messages ship in :mod:`wevent.stream.wire.schemas`.

The internal messages and the workers' states (their tables' values, the mechanisms' states) are
read in the one layout this version writes: one without a field it writes is of an older layout,
refused with :class:`~wevent.core.packing.LayoutError` (one line; the stream dead-letters the
input). A stream is moved to a new layout by draining it and starting a new one.
"""

from __future__ import annotations

__all__ = ["DecodeError", "FORMAT_VERSION", "check_version"]


class DecodeError(ValueError):
    """Bytes that are not a message of the expected kind (counted and dead-lettered)."""


FORMAT_VERSION = 1  # what writers emit in ``version``; a message without one is version 1


def check_version(message: dict) -> None:
    """Refuses a message of a version this reader does not know."""
    version = message.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= FORMAT_VERSION:
        raise DecodeError(f"message version {version!r}; this reader reads versions 1 to {FORMAT_VERSION}")
