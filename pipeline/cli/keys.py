"""``wevent keys``: the public keys with which devices and workers check each other's messages.

The workers sign ``ldp.requests`` with a key derived from the server's secret and the devices
check them with its public half (``WEVENT_REQUEST_PUBLIC_KEY``); the devices sign ``ldp.reports``
with a key derived from theirs and the workers check them with its public half
(``WEVENT_DEVICE_PUBLIC_KEY``). This prints both as ``NAME=HEX`` lines, for ``export``, from
whichever secrets are at hand: ``WEVENT_NOISE_KEY``, ``WEVENT_DEVICE_KEY`` or a config's seed.
"""

from __future__ import annotations

from ..stream.settings import Settings
from ._common import UsageError


def register(sub, settings: Settings) -> None:
    p = sub.add_parser("keys", help="print the public keys of requests (for the devices) and reports (for the workers)")
    p.add_argument("--config", "-c", help="stream config file, whose seed stands in for a secret that is not set")
    p.set_defaults(handler=handle)


def handle(args) -> int:
    from wevent.stream.config import AppConfig, load_config
    from wevent.stream.settings import DEVICE_KEY_ENV, NOISE_KEY_ENV, REPORT_KEY_ENV, REQUEST_KEY_ENV
    from wevent.stream.wire.seals import report_seal, request_seal

    settings = args.settings
    config = load_config(args.config) if args.config else AppConfig(streams=())
    lines = []
    for public, given, derive, make in ((REQUEST_KEY_ENV, settings.noise_key_hex, settings.noise_key, request_seal),
                                        (REPORT_KEY_ENV, settings.device_key_hex, settings.device_key, report_seal)):
        if given or config.seed is not None:
            lines.append(f"{public}={make(derive(config)).public_hex}")
    if not lines:
        raise UsageError(f"no secret to derive a public key from: set {NOISE_KEY_ENV} and/or {DEVICE_KEY_ENV}, "
                         "or pass a --config with a seed")
    print("\n".join(lines))
    return 0
