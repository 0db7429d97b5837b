"""``wevent subscribe``: print the releases of any cluster, one per (stream, slot), verified.

Anyone who can write to the broker can write to ``releases``. By default a release shows only when
its signature verifies under the server's release public key (``--release-key``, else
``WEVENT_RELEASE_PUBLIC_KEY``; ``wevent keys`` prints it); the others are dropped and counted, and
the genuine release of a slot still shows when a forgery came first. Without a key the command
refuses to start, unless ``--no-verify`` says to show whatever is on the topic.
"""

from __future__ import annotations

import sys

from ..stream.settings import Settings
from ._common import (LIMITS, add_verification, bootstrap_servers, integer, kafka_properties_option, reachable_kafka,
                      real, release_key)


def register(sub, settings: Settings) -> None:
    p = sub.add_parser("subscribe", help="print releases from the releases topic, each checked against the "
                       "server's release public key")
    p.add_argument("--bootstrap", "-b", type=bootstrap_servers,
                   help="Kafka bootstrap servers (default: $WEVENT_BOOTSTRAP)")
    kafka_properties_option(p)
    p.add_argument("--stream", "-s", action="append", help="only these streams (repeatable)")
    p.add_argument("--json", action="store_true", help="one JSON release per line, as published (with its signature)")
    p.add_argument("--limit", type=integer(1, 2**31), help="stop after this many releases")
    p.add_argument("--timeout", type=real(minimum=0, maximum=LIMITS["seconds"]),
                   help="stop after this many seconds without a new release")
    add_verification(p, "releases")
    p.set_defaults(handler=handle)


def handle(args) -> int:
    from ..stream.runtime.subscription import Releases, format_release

    key = release_key(args, "releases")
    bootstrap = reachable_kafka(args.bootstrap, args.settings)
    shown = 0
    with Releases(bootstrap, streams=args.stream, credentials=args.settings.kafka_credentials(), key=key) as releases:
        try:
            for record, message in releases.follow_published(idle_timeout=args.timeout):
                print(message.decode() if key is not None and args.json else record.to_json() if args.json
                      else format_release(record), flush=True)
                shown += 1
                if args.limit and shown >= args.limit:
                    break
        finally:
            if key is not None:
                print(f"wevent subscribe: {shown} releases shown, verified under release key {key.fingerprint}; "
                      f"{releases.published.summary()}", file=sys.stderr)
    return 0 if shown or not args.limit else 1
