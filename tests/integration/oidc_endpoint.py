"""A local OIDC token endpoint for tests: the client-credentials grant, answered with Kafka's
unsecured JWS tokens.

No identity provider is reachable from the tests. This endpoint stands in for one faithfully
where the clients are concerned: they POST ``grant_type=client_credentials`` with the client id
and secret in HTTP Basic authentication, and get a JSON answer with ``access_token``,
``token_type`` and ``expires_in``, or HTTP 401 ``invalid_client`` for a wrong secret, as from a
real provider. Only the token differs: a JWS with ``"alg": "none"`` and no signature, which a
broker with Kafka's ``OAuthBearerUnsecuredValidatorCallbackHandler`` accepts (it checks the
header, ``sub`` and ``exp``, as the secured validator does after checking the signature).
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def unsecured_jws(subject: str, lifetime: float, scope: str | None = None) -> str:
    """A JWS of ``alg`` ``none`` for principal ``subject``, expiring in ``lifetime`` seconds."""
    now = time.time()
    claims = {"sub": subject, "iat": int(now), "exp": int(now + lifetime), **({"scope": scope} if scope else {})}
    return f"{_b64({'alg': 'none'})}.{_b64(claims)}."


class TokenEndpoint:
    """``http://127.0.0.1:<free port>/token``, issuing tokens to the ``clients`` (id -> secret).

    ``requests`` counts the grants asked for, by client id (refused ones included).
    """

    def __init__(self, clients: dict[str, str], lifetime: float = 3600.0) -> None:
        self.clients = clients
        self.lifetime = lifetime
        self.requests: dict[str, int] = {}
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                form = urllib.parse.parse_qs(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode())
                client, secret = endpoint._basic(self.headers.get("Authorization", ""))
                endpoint.requests[client] = endpoint.requests.get(client, 0) + 1
                if form.get("grant_type") != ["client_credentials"]:
                    self._answer(400, {"error": "unsupported_grant_type"})
                elif endpoint.clients.get(client) != secret or not client:
                    self._answer(401, {"error": "invalid_client", "error_description": "bad client credentials"})
                else:
                    scope = form.get("scope", [None])[0]
                    self._answer(200, {"access_token": unsecured_jws(client, endpoint.lifetime, scope),
                                       "token_type": "Bearer", "expires_in": int(endpoint.lifetime)})

            def _answer(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True, name="token-endpoint")

    @staticmethod
    def _basic(header: str) -> tuple[str, str]:
        """(client id, secret) of an HTTP Basic header, each form-decoded (RFC 6749, Section 2.3.1)."""
        try:
            decoded = base64.b64decode(header.removeprefix("Basic ")).decode()
        except ValueError:
            return "", ""
        client, _, secret = decoded.partition(":")
        return urllib.parse.unquote_plus(client), urllib.parse.unquote_plus(secret)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/token"

    def __enter__(self) -> "TokenEndpoint":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
