"""Java's ``.properties`` text form, as managed Kafka providers hand out client settings.

:func:`parse_properties` follows ``java.util.Properties.load``: ``key=value``, ``key: value`` or
``key value``; ``#`` and ``!`` comment lines; a line ending in an odd number of backslashes goes
on in the next; ``\\t``-style and ``\\uXXXX`` escapes in keys and values; a later key wins.
"""

from __future__ import annotations

import re

__all__ = ["parse_properties"]

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        char = text[i]
        if char != "\\" or i + 1 == len(text):
            out.append(char)
            i += 1
            continue
        following = text[i + 1]
        if following == "u":
            digits = text[i + 2:i + 6]
            if not re.fullmatch(r"[0-9A-Fa-f]{4}", digits):
                raise ValueError(f"malformed \\u escape {text[i:i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(following, following))
            i += 2
    return "".join(out)


def _logical_lines(text: str):
    """The logical lines of a properties text: comments and blank lines dropped, a line ending in
    an odd number of backslashes joined with the next (whose leading whitespace is dropped)."""
    pending = None
    for line in re.split(r"\r\n|\r|\n", text):
        line = line.lstrip(" \t\f") if pending is not None else line
        if pending is None and (not line.strip(" \t\f") or line.lstrip(" \t\f")[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        joined = (pending or "") + (line[:-1] if trailing % 2 else line)
        if trailing % 2:
            pending = joined
        else:
            pending = None
            yield joined.lstrip(" \t\f")
    if pending is not None:
        yield pending.lstrip(" \t\f")


def parse_properties(text: str) -> dict[str, str]:
    """The properties of ``text`` in Java's ``.properties`` form: ``key=value``, ``key: value`` or
    ``key value``, ``#``/``!`` comments, ``\\`` continuations and escapes; a later key wins.

    >>> parse_properties('''# Confluent Cloud
    ... bootstrap.servers=pkc-1.example.com:9092
    ... sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\\
    ...     username='KEY' password='SECRET';
    ... session.timeout.ms : 45000''')  # doctest: +NORMALIZE_WHITESPACE
    {'bootstrap.servers': 'pkc-1.example.com:9092',
     'sasl.jaas.config': "org.apache.kafka.common.security.plain.PlainLoginModule required username='KEY'
                          password='SECRET';",
     'session.timeout.ms': '45000'}
    """
    out = {}
    for line in _logical_lines(text):
        found = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:]?\s*(.*)\Z", line, re.DOTALL)
        assert found is not None  # every part of the pattern is optional: it matches every line
        key, value = found.group(1), found.group(2)
        out[_unescape(key)] = _unescape(value)
    return out
