"""``wevent keys``: the public keys with which devices, workers and readers check each other's messages.

The workers sign ``ldp.requests`` with a key derived from the server's secret and the devices
check them with its public half (``WEVENT_REQUEST_PUBLIC_KEY``); the devices sign ``ldp.reports``
with a key derived from theirs and the workers check them with its public half
(``WEVENT_DEVICE_PUBLIC_KEY``); the workers sign ``releases`` and ``audit`` with another key
derived from the server's secret, and every reader (``wevent subscribe``, ``wevent audit``, a
consumer in any language) checks them with its public half (``WEVENT_RELEASE_PUBLIC_KEY``). This
prints them as ``NAME=HEX`` lines, for ``export``, from whichever secrets are at hand:
``WEVENT_NOISE_KEY``, ``WEVENT_DEVICE_KEY`` or a config's seed; and, on stderr, the release key's
fingerprint (the first 16 hexadecimal characters of the SHA-256 of its 32 bytes), to compare
with what a subscriber shows.
"""

from __future__ import annotations

import sys

from ..stream.settings import Settings
from ._common import UsageError
from . import COMMANDS
from ._help import add_command


def register(sub, settings: Settings) -> None:
    p = add_command(
        sub, "keys", summary=COMMANDS["keys"],
        description="Print the public keys with which devices, workers and readers check each other's messages, "
        "as NAME=HEX lines for `export`, from the secrets at hand ($WEVENT_NOISE_KEY, $WEVENT_DEVICE_KEY or a "
        "config's seed); on stderr, the release key's fingerprint, which `wevent subscribe` and `wevent run` show.",
        examples=[("the public keys of the server's secret, exported for `wevent subscribe` and `wevent audit`",
                   "export $(wevent keys)"),
                  ("the keys a config's seed stands for (experiments only)", "wevent keys -c wevent.yaml")])
    p.add_argument("--config", "-c", help="stream config file, whose seed stands in for a secret that is not set")
    p.set_defaults(handler=handle)


def handle(args) -> int:
    from wevent.stream.config import AppConfig, load_config
    from wevent.stream.settings import DEVICE_KEY_ENV, NOISE_KEY_ENV, RELEASE_KEY_ENV, REPORT_KEY_ENV, REQUEST_KEY_ENV
    from wevent.stream.wire.seals import release_seal, report_seal, request_seal

    settings = args.settings
    config = load_config(args.config) if args.config else AppConfig(streams=())
    server = settings.noise_key_hex or config.seed is not None
    keys = {}
    for public, given, derive, make in (
            (REQUEST_KEY_ENV, server, settings.noise_key, request_seal),
            (RELEASE_KEY_ENV, server, settings.noise_key, release_seal),
            (REPORT_KEY_ENV, settings.device_key_hex or config.seed is not None, settings.device_key, report_seal)):
        if given:
            keys[public] = make(derive(config))
    if not keys:
        raise UsageError(f"no secret to derive a public key from: set {NOISE_KEY_ENV} and/or {DEVICE_KEY_ENV}, "
                         "or pass a --config with a seed")
    print("\n".join(f"{name}={key.public_hex}" for name, key in keys.items()))
    if RELEASE_KEY_ENV in keys:
        print(f"release key fingerprint {keys[RELEASE_KEY_ENV].fingerprint}", file=sys.stderr)
    return 0
