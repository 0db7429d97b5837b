"""``wevent subscribe``: print the releases of any cluster, one per (stream, slot), verified.

Anyone who can write to the broker can write to ``releases``. By default a release shows only when
its signature verifies under the server's release public key (``--release-key``, else
``WEVENT_RELEASE_PUBLIC_KEY``; ``wevent keys`` prints it); the others are dropped and counted, and
the genuine release of a slot still shows when a forgery came first. Without a key the command
refuses to start, unless ``--no-verify`` says to show whatever is on the topic.
"""

from __future__ import annotations

import sys

from ..errors import UsageError

from ..stream.settings import Settings
from . import COMMANDS
from ._common import (LIMITS, add_release_display, add_verification, bootstrap_servers, integer,
                      kafka_properties_option, reachable_kafka, readable_file, real, release_display, release_key)
from ._help import add_command


def register(sub, settings: Settings) -> None:
    p = add_command(
        sub, "subscribe", summary=COMMANDS["subscribe"],
        description="Print the releases of any cluster, one line per (stream, slot), each shown only when its "
        "signature verifies under the server's release public key (`wevent keys` prints it). A legend line comes "
        "first: what publish, approximate and nullified mean, why the first slots may show zeros, and the slot and "
        "window spend against epsilon.\n\n"
        "Bins are named by the stream config's labels (--config: a grid's cells, a feed's countries or "
        "categories), else shown as [i]. --clip-negative and --round post-process what is shown: post-processing a "
        "differentially private release costs no privacy. --json prints the releases as published.",
        examples=[("follow every stream, verified with the release key `wevent keys` derives from $WEVENT_NOISE_KEY",
                   "export $(wevent keys) && wevent subscribe -b localhost:9092"),
                  ("one stream's last releases, bins named by its config, shown as non-negative whole counts",
                   "wevent subscribe -b localhost:9092 --no-verify -s taxi -c wevent.yaml --clip-negative --round "
                   "--timeout 5"),
                  ("500 releases as published, for `wevent plot`",
                   "wevent subscribe -b localhost:9092 --no-verify --json --limit 500")])
    kafka = p.add_argument_group("Kafka")
    kafka.add_argument("--bootstrap", "-b", type=bootstrap_servers,
                       help="Kafka bootstrap servers (default: $WEVENT_BOOTSTRAP)")
    kafka_properties_option(kafka)
    add_verification(kafka, "releases")
    which = p.add_argument_group("which releases")
    which.add_argument("--stream", "-s", action="append", help="only these streams (repeatable)")
    which.add_argument("--limit", type=integer(1, 2**31), help="stop after this many releases")
    which.add_argument("--timeout", type=real(minimum=0, maximum=LIMITS["seconds"]),
                       help="stop after this many seconds without a new release")
    output = p.add_argument_group("output")
    output.add_argument("--json", action="store_true",
                        help="one JSON release per line, as published (with its signature)")
    output.add_argument("--config", "-c", type=readable_file, metavar="FILE", help="the stream config, whose "
                        "labels name the bins (default: bins shown as [i])")
    add_release_display(output)
    p.set_defaults(handler=handle)


def handle(args) -> int:
    from ..stream.runtime.subscription import RELEASE_LEGEND, Releases

    key = release_key(args, "releases")
    if args.json and args.config:
        raise UsageError("--config names the bins of the release lines shown: it does not go with --json")
    display = release_display(args, _bin_names(args.config), "--json" if args.json else None)
    bootstrap = reachable_kafka(args.bootstrap, args.settings)
    shown = 0
    if not args.json:
        print(RELEASE_LEGEND, file=sys.stderr)
    with Releases(bootstrap, streams=args.stream, credentials=args.settings.kafka_credentials(), key=key) as releases:
        try:
            for record, message in releases.follow_published(idle_timeout=args.timeout):
                print(message.decode() if key is not None and args.json else record.to_json() if args.json
                      else display.line(record), flush=True)
                shown += 1
                if args.limit and shown >= args.limit:
                    break
        finally:
            if key is not None:
                print(f"wevent subscribe: {shown} releases shown, verified under release key {key.fingerprint}; "
                      f"{releases.published.summary()}", file=sys.stderr)
    return 0 if shown or not args.limit else 1


def _bin_names(path: str | None) -> dict[str, tuple[str, ...]]:
    """Every stream's bin names in the config at ``path`` (none without one)."""
    if path is None:
        return {}
    from ..stream.config import load_config

    return {stream.name: tuple(stream.labels) for stream in load_config(path).streams}
