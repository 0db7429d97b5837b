"""Seals: the MAC or signature that makes a message one a worker or a device may act on.

Anyone who can write to the broker can write to any topic, so the messages a worker or a device
acts on are sealed (:func:`seal`), one tag per message whatever the number of reports in it,
bound to the message's topic and stream:

* ``slots`` and ``dissimilarity`` carry a MAC (keyed BLAKE2b) under a sub-key of the server's
  secret: only workers write them and only workers act on them.
* ``releases`` and ``audit`` carry an Ed25519 signature by the server (:func:`release_seal`), one
  more JSON field, ``signature``: anyone holding the release public key checks them, subscribers
  and M1 alike (M1 learns the last release from ``releases``), so a forged release reaches no
  reader that verifies. The bytes signed are :func:`signing_input` of the record without its
  ``signature`` field.
* ``ldp.requests`` carry an Ed25519 signature by the server (:func:`request_seal`), which the
  devices check with the public key alone. Ed25519 signatures are deterministic, so a re-emitted
  request or release is byte-identical.
* ``ldp.reports`` carry an Ed25519 signature by the devices (:func:`report_seal`), which the
  server checks with the devices' public key.

Authenticated topics
--------------------

**Authenticated topics.** Anyone who can write to the broker can write to any topic, so
workers and devices act only on sealed messages, and readers believe only signed releases.
`slots` and `dissimilarity` carry a MAC (keyed BLAKE2b) under a sub-key of the server's secret,
bound to the topic and stream. The server signs `releases` and `audit` with Ed25519 under
another sub-key (one last JSON field, `signature`: see "Message formats for other languages" below),
and everyone checks them with its public key alone: M1, which learns the last release from
`releases`, and every subscriber. One signature serves both, so `releases` carries no MAC: a
MAC can be checked by the workers only, and a subscriber, which keeps the first copy of a slot,
would show a forged release written before the real one and hide the real one.
`wevent subscribe` and `wevent audit` verify by default against `WEVENT_RELEASE_PUBLIC_KEY` (or
`--release-key HEX`); they drop whatever does not verify (unsigned, a byte changed, signed under
another key), say on stderr how many they dropped, and still show the genuine release that
follows a forgery. Without a key they refuse to start, unless `--no-verify` says to take
whatever the topic holds. The server signs `ldp.requests` with Ed25519 and the devices check
them with its public key only; the devices sign their report batches with a key derived from
theirs, and the workers check them with its public key. A message without a valid seal, or an
authentic-looking one no worker could have sent (a release of a slot not yet measured, a
negative slot), is counted in `wevent_forged_messages_total{topic,reason}`, dead-lettered
(`unauthenticated`, `out_of_range`) and changes nothing. `wevent keys` prints the three public
keys (`WEVENT_REQUEST_PUBLIC_KEY` for the devices, `WEVENT_DEVICE_PUBLIC_KEY` for the workers,
`WEVENT_RELEASE_PUBLIC_KEY` for every reader), and on stderr the release key's fingerprint (the
first 16 hex characters of the SHA-256 of its 32 bytes), which subscribers print too. A worker
given a `WEVENT_RELEASE_PUBLIC_KEY` that is not its own stops at start, before subscribers given
it drop every release. `wevent run` passes the keys itself, and prints the release public key.

### Message formats for other languages

`pipeline/stream/wire/schemas/*.schema.json` (JSON Schema 2020-12, installed with the package) describe
`releases`, `audit`, the JSON form of `reports` (a report or a watermark), `deadletter`, and the JSON
header of the signed binary `ldp.requests`/`ldp.reports` messages, whose layout and Ed25519
signature each schema's description spells out. `WRB1.md` beside them specifies the binary form
of `reports` byte by byte, with test vectors a test decodes and encodes. Every message carries
`version` (absent means 1); a reader refuses versions it does not know and ignores fields it does
not know, and new fields do not change the version. A test has Kafka's own console producer
write reports from the schema and its console consumer read `releases` and `audit`, every line
valid.

A consumer of `releases` or `audit` in another language verifies every message before it keeps
it (Ed25519, RFC 8032: in Java 15+ `Signature.getInstance("Ed25519")`, in Go `crypto/ed25519`):

1. The message ends with `,"signature":"`, 128 hex characters and `"}`: the signature, always
   the last field. A message that does not end so is unsigned: drop it.
2. B is the message without that field: its bytes up to the comma before `"signature"`, then
   `}`. These are the bytes the server wrote; never re-serialise the JSON.
3. C is a u16 little-endian byte length and the UTF-8 topic name (`releases`, or `audit` for a
   record with `"record":"audit"`), then a u16 little-endian byte length and the UTF-8 stream
   name (the record's `stream`). The signed bytes are C || B.
4. Verify the signature over C || B with the 32-byte release public key
   (`WEVENT_RELEASE_PUBLIC_KEY`, from `wevent keys`); drop the message if it does not verify,
   and only then keep the first copy of each (stream, slot).

A test vector (in `release.schema.json` too, with its private key and its signing input in hex,
and one for an audit record in `audit.schema.json`; a test checks them against the signer):

```
public key  b46f0d8af41f520f6b2423dfef57e382f810365291167394f9a3834310796913
message     {"dissimilarity":2.5,"eps1":0.025,"eps2":0.4875,"epsilon":1.0,"extras":{},"mechanism":"ba","parameters":{"domain":2,"fingerprint":"0123456789abcdef","noise":"discrete","options":"fedcba9876543210","users":10},"release":[3.0,7.0],"slot":1,"slot_end":1201910700.0,"slot_start":1201910400.0,"strategy":"publish","stream":"taxi","threshold":40.0,"version":1,"window":20,"window_spend":0.5125,"signature":"68a85bc9b4ee9c9628519c79534584a51ed485f7f1a679e0f88b57823445082a02013aaa50e04711d474fd1979f57aac9b335b0f1b91f7652392dc3016323306"}
signature   68a85bc9b4ee9c9628519c79534584a51ed485f7f1a679e0f88b57823445082a02013aaa50e04711d474fd1979f57aac9b335b0f1b91f7652392dc3016323306
```
"""

from __future__ import annotations

import hashlib
import hmac
import re
import struct

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ...core.randomness import SecretKey
from .format import DecodeError

__all__ = ["AuthenticationError", "MacSeal", "SignatureSeal", "internal_seal", "release_seal", "request_seal",
           "report_seal", "signing_input", "seal", "unseal", "check_seal"]


_TRAILER = struct.Struct("<H4s")  # tag length, magic: after the tag at the end of a binary message
_TRAILER_MAGIC = b"WSL1"
_JSON_TAG = re.compile(rb',"signature":"([0-9a-f]{2,256})"\}$')


class AuthenticationError(DecodeError):
    """A message without a valid MAC or signature of its topic (counted and dead-lettered)."""


def signing_input(topic: str, stream: str, body: bytes) -> bytes:
    """The bytes a tag is made of: ``C || body``, where the context C (u16 little-endian length,
    UTF-8 topic name, u16 length, UTF-8 stream name) binds the tag to its place, so that a tag made
    for one (topic, stream) fails on every other.

    >>> signing_input("releases", "s", b"{}").hex()
    '080072656c65617365730100737b7d'
    """
    return _context(topic, stream) + body


def _context(topic: str, stream: str) -> bytes:
    t, s = topic.encode(), str(stream).encode()
    return struct.pack("<H", len(t)) + t + struct.pack("<H", len(s)) + s


class MacSeal:
    """A keyed BLAKE2b-256 MAC of a message's bytes bound to its topic and stream.

    Examples
    --------
    >>> mac = internal_seal(SecretKey.from_seed(1))
    >>> tag = mac.tag("slots", "taxi", b"body")
    >>> mac.valid("slots", "taxi", b"body", tag), mac.valid("dissimilarity", "taxi", b"body", tag)
    (True, False)
    """

    def __init__(self, key: bytes) -> None:
        self._mac = hashlib.blake2b(key=key, digest_size=32, person=b"wevent-mac-v1")

    def tag(self, topic: str, stream: str, body: bytes) -> bytes:
        h = self._mac.copy()
        h.update(_context(topic, stream))
        h.update(body)  # the signing input, without copying a large body
        return h.digest()

    def valid(self, topic: str, stream: str, body: bytes, tag: bytes) -> bool:
        return hmac.compare_digest(self.tag(topic, stream, body), tag)


class SignatureSeal:
    """An Ed25519 signature of a message's bytes bound to its topic and stream.

    Built from a secret it signs and checks; built from a public key (:meth:`from_public_hex`) it
    only checks. Ed25519 signatures are deterministic: the same message always gets the same tag.

    Examples
    --------
    >>> signer = request_seal(SecretKey.from_seed(1))
    >>> checker = SignatureSeal.from_public_hex(signer.public_hex)
    >>> tag = signer.tag("ldp.requests", "taxi", b"body")
    >>> tag == signer.tag("ldp.requests", "taxi", b"body"), checker.valid("ldp.requests", "taxi", b"body", tag)
    (True, True)
    >>> checker.valid("ldp.requests", "other", b"body", tag)
    False
    """

    def __init__(self, public: Ed25519PublicKey, private: Ed25519PrivateKey | None = None) -> None:
        self._public, self._private = public, private

    @classmethod
    def from_secret(cls, secret: bytes) -> "SignatureSeal":
        private = Ed25519PrivateKey.from_private_bytes(secret)
        return cls(private.public_key(), private)

    @classmethod
    def from_public_hex(cls, text: str) -> "SignatureSeal":
        """A checking-only seal from a public key of 64 hexadecimal characters (ValueError otherwise)."""
        try:
            raw = bytes.fromhex(text.strip())
        except ValueError:
            raw = b""
        if len(raw) != 32:
            raise ValueError("a public key must be 64 hexadecimal characters")
        return cls(Ed25519PublicKey.from_public_bytes(raw))

    @property
    def public_hex(self) -> str:
        return self._public.public_bytes(Encoding.Raw, PublicFormat.Raw).hex()

    @property
    def fingerprint(self) -> str:
        """The first 16 hexadecimal characters of the SHA-256 of the public key's 32 bytes: a short
        name of the key to compare by eye or read over the phone.

        >>> release_seal(SecretKey.from_seed(1)).fingerprint == release_seal(SecretKey.from_seed(1)).fingerprint
        True
        """
        return hashlib.sha256(bytes.fromhex(self.public_hex)).hexdigest()[:16]

    def public(self) -> "SignatureSeal":
        """The same key without its private half: what the other side holds."""
        return type(self)(self._public)

    def tag(self, topic: str, stream: str, body: bytes) -> bytes:
        if self._private is None:
            raise ValueError("a public key checks signatures; it cannot make one")
        return self._private.sign(signing_input(topic, stream, body))

    def valid(self, topic: str, stream: str, body: bytes, tag: bytes) -> bool:
        try:
            self._public.verify(tag, signing_input(topic, stream, body))
        except InvalidSignature:
            return False
        return True


def internal_seal(server_key: SecretKey) -> MacSeal:
    """The workers' MAC of ``slots`` and ``dissimilarity``."""
    return MacSeal(server_key.derive("internal-mac"))


def release_seal(server_key: SecretKey) -> SignatureSeal:
    """The server's signature of ``releases`` and ``audit`` (every worker derives the same key);
    its public half (``WEVENT_RELEASE_PUBLIC_KEY``, ``wevent keys``) lets anyone check them."""
    return SignatureSeal.from_secret(server_key.derive("release-signing"))


def request_seal(server_key: SecretKey) -> SignatureSeal:
    """The server's signature of ``ldp.requests`` (every worker derives the same key)."""
    return SignatureSeal.from_secret(server_key.derive("request-signing"))


def report_seal(device_key: SecretKey) -> SignatureSeal:
    """The devices' signature of ``ldp.reports``, from the devices' key (the server never has it)."""
    return SignatureSeal.from_secret(device_key.derive("report-signing"))


def seal(topic: str, stream: str, value: bytes, by: MacSeal | SignatureSeal) -> bytes:
    """``value`` with its tag: for JSON, a last field ``signature`` (the tag in hex) before the
    closing brace; else the tag and a 6-byte trailer appended to the binary message.

    >>> import json
    >>> signer = release_seal(SecretKey.from_seed(1))
    >>> sealed = seal("releases", "taxi", b'{"slot":3}', signer)
    >>> sealed[:23], json.loads(sealed)["slot"]
    (b'{"slot":3,"signature":"', 3)
    >>> check_seal(signer.public(), "releases", "taxi", *unseal(sealed))
    >>> check_seal(signer.public(), "releases", "other", *unseal(sealed))
    Traceback (most recent call last):
    ...
    wevent.stream.wire.seals.AuthenticationError: invalid MAC or signature for releases of stream 'other'
    """
    tag = by.tag(topic, stream, value)
    if value[:1] == b"{":
        return value[:-1] + b',"signature":"' + tag.hex().encode() + b'"}'
    return value + tag + _TRAILER.pack(len(tag), _TRAILER_MAGIC)


def unseal(value: bytes) -> tuple[bytes, bytes | None]:
    """(the message without its tag, the tag or None): see :func:`seal`."""
    if value[:1] == b"{":
        found = _JSON_TAG.search(value)
        if found is None:
            return value, None
        return value[:found.start()] + b"}", bytes.fromhex(found.group(1).decode())
    if len(value) < _TRAILER.size:
        return value, None
    size, magic = _TRAILER.unpack_from(value, len(value) - _TRAILER.size)
    end = len(value) - _TRAILER.size - size
    if magic != _TRAILER_MAGIC or end < 0:
        return value, None
    return value[:end], value[end:len(value) - _TRAILER.size]


def check_seal(by: MacSeal | SignatureSeal, topic: str, stream: str, body: bytes, tag: bytes | None) -> None:
    """Raises :class:`AuthenticationError` unless ``tag`` is ``by``'s tag of ``body`` on (topic, stream)."""
    if tag is None:
        raise AuthenticationError(f"no MAC or signature on a message of {topic} for stream {stream!r}")
    if not by.valid(topic, stream, body, tag):
        raise AuthenticationError(f"invalid MAC or signature for {topic} of stream {stream!r}")
