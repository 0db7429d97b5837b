"""``wevent worker``: run the Faust worker (all agents of every configured stream)."""

from __future__ import annotations

from ..stream.settings import LOOPBACK, Settings
from ._common import (LIMITS, bind_address, bootstrap_servers, check_listen, directory, kafka_properties_option, port,
                      reachable_kafka, readable_file, real)


def register(sub, settings: Settings) -> None:
    p = sub.add_parser("worker", help="run a stream worker against a Kafka cluster")
    p.add_argument("--config", "-c", required=True, type=readable_file,
                   help="stream config file (.toml, .yaml or .json)")
    p.add_argument("--bootstrap", "-b", type=bootstrap_servers,
                   help="Kafka bootstrap servers (default: $WEVENT_BOOTSTRAP)")
    kafka_properties_option(p)
    p.add_argument("--web-port", type=port, default=settings.web_port,
                   help="port of the worker's web server: /metrics, /healthz and /query (default: 6066)")
    p.add_argument("--web-host", type=bind_address, default=settings.web_host,
                   help=f"address the web server listens on (default: {LOOPBACK}, this machine only; 0.0.0.0 "
                   "for every interface, e.g. in a container scraped by Prometheus)")
    p.add_argument("--tansu-compat", action="store_true", default=settings.tansu_compat,
                   help="the broker is tansu: one record per batch, short rebalance timeouts")
    p.add_argument("--datadir", type=directory, help="directory for the worker's local data (default: ./<app>-data)")
    p.add_argument("--stall-seconds", type=real(above=0, maximum=LIMITS["seconds"]),
                   default=settings.stall_seconds,
                   help="/healthz answers 503 when input has waited this long without progress (default: 120)")
    p.add_argument("--session-seconds", type=real(minimum=1, maximum=LIMITS["seconds"]),
                   default=settings.session_seconds,
                   help="the consumer group's session timeout: how long a dead worker's partitions wait for "
                   "another (default: Faust's; 10 with --tansu-compat)")
    p.add_argument("--loglevel", default="warn", choices=["crit", "error", "warn", "info", "debug"])
    p.set_defaults(handler=handle)


def handle(args) -> int:
    from ..stream.runtime.broker import create_topics
    from ..stream.config import load_config
    from ..stream.runtime.kafka import faust_options
    from ..stream.runtime.worker import processing_guarantee

    settings = args.settings
    config = load_config(args.config)
    settings.noise_key(config)  # fail now, not in the middle of a slot, if no key is configured
    check_listen(args.web_host, args.web_port)
    credentials = settings.kafka_credentials(config)
    # a property Faust's clients cannot honour, or exactly-once on tansu: one line before anything connects
    faust_options(credentials, processing_guarantee(config, args.tansu_compat) == "exactly_once", args.tansu_compat)
    bootstrap = reachable_kafka(args.bootstrap, settings, config=config)
    create_topics(bootstrap, config.topics(), replication=config.replication_factor, credentials=credentials)
    from wevent.topologies.app import build_app

    from ..stream.runtime.worker import changelog_partitions, run_worker

    app = build_app(config, bootstrap, settings, web_port=args.web_port, web_bind=args.web_host,
                    tansu_compat=args.tansu_compat, datadir=args.datadir, stall_seconds=args.stall_seconds,
                    session_seconds=args.session_seconds)
    create_topics(bootstrap, changelog_partitions(app), replication=config.replication_factor,
                  settings={"cleanup.policy": "compact"}, credentials=credentials)
    run_worker(app, args.loglevel)
    return 0
