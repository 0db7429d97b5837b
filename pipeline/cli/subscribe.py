"""``wevent subscribe``: print the releases of any cluster, one per (stream, slot)."""

from __future__ import annotations

from ..stream.settings import Settings
from ._common import LIMITS, bootstrap_servers, integer, kafka_properties_option, reachable_kafka, real


def register(sub, settings: Settings) -> None:
    p = sub.add_parser("subscribe", help="print releases from the releases topic")
    p.add_argument("--bootstrap", "-b", type=bootstrap_servers,
                   help="Kafka bootstrap servers (default: $WEVENT_BOOTSTRAP)")
    kafka_properties_option(p)
    p.add_argument("--stream", "-s", action="append", help="only these streams (repeatable)")
    p.add_argument("--json", action="store_true", help="one JSON release per line")
    p.add_argument("--limit", type=integer(1, 2**31), help="stop after this many releases")
    p.add_argument("--timeout", type=real(minimum=0, maximum=LIMITS["seconds"]),
                   help="stop after this many seconds without a new release")
    p.set_defaults(handler=handle)


def handle(args) -> int:
    from ..stream.runtime.subscription import Releases, format_release

    bootstrap = reachable_kafka(args.bootstrap, args.settings)
    shown = 0
    with Releases(bootstrap, streams=args.stream, credentials=args.settings.kafka_credentials()) as releases:
        for record in releases.follow(idle_timeout=args.timeout):
            print(record.to_json() if args.json else format_release(record), flush=True)
            shown += 1
            if args.limit and shown >= args.limit:
                break
    return 0 if shown or not args.limit else 1
