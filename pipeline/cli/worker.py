"""``wevent worker``: run the Faust worker (all agents of every configured stream)."""

from __future__ import annotations

import sys

from ..stream.settings import LOOPBACK, Settings
from . import COMMANDS
from ._help import add_command
from ._common import (LIMITS, bind_address, bootstrap_servers, check_listen, directory, kafka_properties_option, port,
                      readable_file, real, wait_for_kafka)


def register(sub, settings: Settings) -> None:
    p = add_command(sub, "worker", summary=COMMANDS["worker"], examples=[
        ("a worker for the streams of a config, against a Kafka", "wevent worker -c wevent.yaml -b localhost:9092"),
        ("its web server on another port, for a second worker on this machine",
         "wevent worker -c wevent.yaml -b localhost:9092 --web-port 6067")],
                       description="Run a stream worker against a Kafka cluster, until SIGTERM or SIGINT. Started "
                       "while Kafka is down, it waits for it (alive, not ready). Exit status: 0 stopped by SIGTERM or "
                       "SIGINT; 1 internal error; 2 bad input (config, arguments: starting again will not help); 3 "
                       "the broker lost this worker's data (start again from scratch); 75 Kafka went away again "
                       "while the worker created its topics (start again).")
    p.add_argument("--config", "-c", required=True, type=readable_file,
                   help="stream config file (.toml, .yaml or .json)")
    p.add_argument("--bootstrap", "-b", type=bootstrap_servers,
                   help="Kafka bootstrap servers (default: $WEVENT_BOOTSTRAP)")
    kafka_properties_option(p)
    p.add_argument("--web-port", type=port, default=settings.web_port,
                   help="port of the worker's web server: /metrics, /livez, /readyz and /query (default: 6066)")
    p.add_argument("--web-host", type=bind_address, default=settings.web_host,
                   help=f"address the web server listens on (default: {LOOPBACK}, this machine only; 0.0.0.0 "
                   "for every interface, e.g. in a container scraped by Prometheus)")
    p.add_argument("--tansu-compat", action="store_true", default=settings.tansu_compat,
                   help="the broker is tansu: one record per batch, short rebalance timeouts")
    p.add_argument("--datadir", type=directory, help="directory for the worker's local data (default: ./<app>-data)")
    p.add_argument("--stall-seconds", type=real(above=0, maximum=LIMITS["seconds"]),
                   default=settings.stall_seconds,
                   help="/readyz answers 503 when input has waited this long without progress (default: 120)")
    p.add_argument("--session-seconds", type=real(minimum=1, maximum=LIMITS["seconds"]),
                   default=settings.session_seconds,
                   help="the consumer group's session timeout: how long a dead worker's partitions wait for "
                   "another (default: Faust's; 10 with --tansu-compat)")
    p.add_argument("--export-report-counts", action="store_true",
                   help="also serve on /metrics the exact numbers of reports each stream accepted and rejected "
                   "(wevent_reports_accepted_total, wevent_reports_rejected_total): functions of the raw data, "
                   "which anyone who can scrape the port then sees; by default only messages are counted")
    p.add_argument("--loglevel", default="warn", choices=["crit", "error", "warn", "info", "debug"])
    p.set_defaults(handler=handle)


def handle(args) -> int:
    from ..stream.config import load_config
    from ..stream.runtime.health import StartingProbes
    from ..stream.runtime.kafka import faust_options
    from ..stream.runtime.local_run import Signals, Stopped
    from ..stream.runtime.worker import processing_guarantee

    settings = args.settings
    config = load_config(args.config)
    settings.noise_key(config)  # fail now, not in the middle of a slot, if no key is configured
    check_listen(args.web_host, args.web_port)
    credentials = settings.kafka_credentials(config)
    # a property Faust's clients cannot honour, or exactly-once on tansu: one line before anything connects
    faust_options(credentials, processing_guarantee(config, args.tansu_compat) == "exactly_once", args.tansu_compat)
    signals = Signals().install()  # until the app runs and handles them itself
    try:
        with StartingProbes(args.web_host, args.web_port, [s.name for s in config.streams]) as probes:
            bootstrap = wait_for_kafka(args.bootstrap, settings, "wevent worker", probes.unreachable, config=config)
            probes.reached()
            app = start_app(config, bootstrap, args)
    except Stopped as stop:
        print(f"wevent worker: {stop}: stopping", file=sys.stderr)
        return 0
    finally:
        signals.restore()
    from ..stream.runtime.worker import run_worker

    print(startup_line(config, bootstrap, args), file=sys.stderr, flush=True)
    run_worker(app, args.loglevel)
    return 0


def start_app(config, bootstrap: str, args):
    """The worker's app, once its topics and its tables' changelogs exist."""
    from wevent.topologies.app import build_app

    from ..stream.runtime.broker import create_topics
    from ..stream.runtime.worker import changelog_partitions

    credentials = args.settings.kafka_credentials(config)
    create_topics(bootstrap, config.topics(), replication=config.replication_factor, credentials=credentials)
    app = build_app(config, bootstrap, args.settings, web_port=args.web_port, web_bind=args.web_host,
                    tansu_compat=args.tansu_compat, datadir=args.datadir, stall_seconds=args.stall_seconds,
                    session_seconds=args.session_seconds, report_counts=args.export_report_counts)
    create_topics(bootstrap, changelog_partitions(app), replication=config.replication_factor,
                  settings={"cleanup.policy": "compact"}, credentials=credentials)
    return app


def startup_line(config, bootstrap: str, args) -> str:
    """The worker's one line at start: its streams, its Kafka, its web port."""
    streams = ", ".join(f"{s.name} ({s.model} {s.mechanism})" for s in config.streams)
    counts = "; reports counted (--export-report-counts)" if args.export_report_counts else ""
    return (f"wevent worker: app {config.app}, streams {streams}; Kafka at {bootstrap}"
            f"{' (tansu)' if args.tansu_compat else ''}; web http://{args.web_host}:{args.web_port} (/metrics, "
            f"/livez, /readyz, /query){counts}; stops on SIGTERM")
