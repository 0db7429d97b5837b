"""SASL/OAUTHBEARER tokens for Faust's Kafka clients, from an OIDC provider, by client credentials.

librdkafka fetches its own tokens (``sasl.oauthbearer.method=oidc``); aiokafka asks a token
provider, which :class:`ClientCredentialsTokens` is: it asks the provider's token endpoint for an
access token with the client-credentials grant (RFC 6749, Section 4.4), as librdkafka and Kafka's
Java client do, and keeps it until most of its lifetime has passed. The commands fetch one token
before they first connect (:meth:`ClientCredentialsTokens.check`), so that an endpoint that refuses
the client's credentials is one line, not a client retrying in the background.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import urllib.error
import urllib.parse
import urllib.request

from aiokafka.abc import AbstractTokenProvider

from ...errors import UsageError
from ..kafka_properties import KafkaCredentials

__all__ = ["ClientCredentialsTokens", "TokenError", "REFRESH_AT"]

REFRESH_AT = 0.8  # the share of a token's lifetime after which a new one is fetched, as librdkafka does
TIMEOUT_SECONDS = 10.0


class TokenError(UsageError):
    """The token endpoint could not be reached, or refused the client's credentials."""


class ClientCredentialsTokens(AbstractTokenProvider):
    """Access tokens of one OIDC client, for aiokafka's SASL/OAUTHBEARER.

    Parameters
    ----------
    endpoint : str
        The provider's token endpoint (``sasl.oauthbearer.token.endpoint.url``).
    client_id, client_secret : str
        The client's credentials, sent as HTTP Basic authentication (RFC 6749, Section 2.3.1:
        each form-encoded first).
    scope : str or None
        The scope to ask for (``sasl.oauthbearer.scope``).
    extensions : str or None
        SASL extensions sent with the token, ``key=value,...`` (``sasl.oauthbearer.extensions``).
    clock : callable
        Monotonic seconds (tests pass their own).
    """

    def __init__(self, endpoint: str, client_id: str, client_secret: str, scope: str | None = None,
                 extensions: str | None = None, clock=time.monotonic) -> None:
        self.endpoint = endpoint
        self.client_id = client_id
        self._secret = client_secret
        self.scope = scope
        self._extensions = dict(item.split("=", 1) for item in (extensions or "").split(",") if "=" in item)
        self.clock = clock
        self._token: str | None = None
        self._refresh_at = 0.0

    @classmethod
    def of(cls, credentials: KafkaCredentials) -> "ClientCredentialsTokens":
        """The token source of ``credentials`` (whose mechanism is OAUTHBEARER)."""
        p = credentials.properties
        return cls(p["sasl.oauthbearer.token.endpoint.url"], p["sasl.oauthbearer.client.id"],
                   p["sasl.oauthbearer.client.secret"], p.get("sasl.oauthbearer.scope"),
                   p.get("sasl.oauthbearer.extensions"))

    def fetch(self) -> tuple[str, float]:
        """A new access token and its lifetime in seconds; :class:`TokenError` in one line."""
        quote = urllib.parse.quote_plus
        basic = base64.b64encode(f"{quote(self.client_id)}:{quote(self._secret)}".encode()).decode()
        form = {"grant_type": "client_credentials", **({"scope": self.scope} if self.scope else {})}
        request = urllib.request.Request(self.endpoint, data=urllib.parse.urlencode(form).encode(), method="POST",
                                         headers={"Authorization": f"Basic {basic}", "Accept": "application/json",
                                                  "Content-Type": "application/x-www-form-urlencoded"})
        where = f"the OAUTHBEARER token endpoint {self.endpoint}"
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
                body = response.read(1 << 20)
        except urllib.error.HTTPError as exc:
            detail = _error_of(exc.read(4096))
            raise TokenError(f"{where} refused client {self.client_id!r}: HTTP {exc.code}"
                             f"{f' ({detail})' if detail else ''}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise TokenError(f"cannot reach {where}: {getattr(reason, 'strerror', None) or reason}") from None
        try:
            answer = json.loads(body)
            token = answer["access_token"]
            lifetime = float(answer.get("expires_in") or _expiry(token) - time.time())
        except (ValueError, KeyError, TypeError):
            raise TokenError(f"{where} answered without an access token and its lifetime") from None
        if not isinstance(token, str) or not token or lifetime <= 0:
            raise TokenError(f"{where} answered with an empty or expired token")
        return token, lifetime

    def current(self) -> str:
        """The token in hand, or a new one when most of its lifetime has passed."""
        now = self.clock()
        if self._token is None or now >= self._refresh_at:
            token, lifetime = self.fetch()
            self._token, self._refresh_at = token, now + REFRESH_AT * lifetime
        return self._token

    def check(self) -> None:
        """Fetch a token now: an endpoint that refuses is one line before any client connects."""
        self.current()

    async def token(self) -> str:
        """aiokafka's call, at each connection: the blocking request runs in a thread."""
        return await asyncio.get_running_loop().run_in_executor(None, self.current)

    def extensions(self) -> dict[str, str]:
        return dict(self._extensions)


def _error_of(body: bytes) -> str:
    """An OAuth error answer in a few words (``invalid_client: bad secret``), or ""."""
    try:
        answer = json.loads(body)
    except ValueError:
        return ""
    if not isinstance(answer, dict):
        return ""
    return ": ".join(str(answer[k])[:200] for k in ("error", "error_description") if answer.get(k))


def _expiry(token: str) -> float:
    """The ``exp`` claim of a JWT (epoch seconds), read without checking its signature: the broker checks it."""
    payload = token.split(".")[1]
    return float(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["exp"])
