"""``wevent replay tdrive|foursquare|synthetic``: preprocess a feed and replay it slot by slot.

Each feed has named profiles (the papers' settings); every profile setting is also an option that
overrides it. The replay loop (:func:`wevent.producers.replay.replay`) hands every slot's batch to a sink:
``--dump FILE`` writes the (slot x user) matrix as a ``.npz`` that ``wevent simulate --input FILE``
reads. Into Kafka, the replay is one producer of the stream, named by ``--producer-id``
(:func:`~wevent.producers.replay.default_producer_id` by default).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Callable, Mapping

from wevent.producers import foursquare, synthetic, tdrive
from wevent.producers.preprocess import Preprocessed, parse_grid
from wevent.producers.profiles import resolve, settings_of
from wevent.producers.replay import DumpSink, Feed, MatrixFeed, check_dump_path, default_producer_id, replay

from ..errors import EXIT_LOST_STATE, EXIT_UNAVAILABLE, LostState
from ..stream.settings import Settings
from ..stream.wire.format import DecodeError
from ..stream.wire.reports import check_producer_id
from . import COMMANDS
from ._help import add_command
from ._common import (LIMITS, OneLineParser, UsageError, bootstrap_servers, kafka_properties_option, listen_port,
                      progress, reachable_kafka, readable_file, real, seed, serve_metrics, slot_count, user_count,
                      writable_file)

if TYPE_CHECKING:  # the stream layer is imported when a command sends to Kafka
    from ..stream.config import AppConfig, StreamConfig
    from ..stream.runtime.kafka import KafkaReportSink

__all__ = ["register"]


@dataclass(frozen=True)
class FeedCommand:
    """One ``wevent replay FEED``: its profiles, its input arguments and how to load it."""

    name: str
    help: str
    profiles: Mapping
    add_inputs: Callable
    load: Callable  # (args, profile) -> (Feed, Preprocessed | None)
    examples: tuple[tuple[str, str], ...]


def _tdrive_inputs(parser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="taxi files, or directories searched for *.txt "
                        "(e.g. release/taxi_log_2008_by_id)")


def _load_tdrive(args, profile) -> tuple[Feed, Preprocessed]:
    data = tdrive.read_tdrive(args.paths, profile)
    return MatrixFeed(data.values), data


def _foursquare_inputs(parser) -> None:
    parser.add_argument("path", metavar="PATH", help="tist2015: the check-in file or its directory; "
                        "tsmc2014: the file (dataset_TSMC2014_NYC.txt or _TKY.txt)")
    parser.add_argument("--pois", metavar="FILE", help="tist2015: the POI file (default: dataset_TIST2015_POIs.txt "
                        "beside the check-ins)")


def _load_foursquare(args, profile) -> tuple[Feed, Preprocessed]:
    data = foursquare.read_foursquare(args.path, profile, pois=args.pois)
    return MatrixFeed(data.values), data


def _load_synthetic(args, profile) -> tuple[synthetic.SyntheticFeed, None]:
    return synthetic.synthetic_feed(profile), None


FEEDS = (
    FeedCommand("tdrive", "T-Drive taxi trajectories (one file per taxi)", tdrive.PROFILES, _tdrive_inputs,
                _load_tdrive,
                (("the taxis of a directory on a 4x4 grid, dumped for `wevent run --feed`",
                  "wevent replay tdrive release/taxi_log_2008_by_id --grid 4x4 --dump taxi.npz"),
                 ("into a stream's reports, twice real time",
                  "wevent replay tdrive release/taxi_log_2008_by_id -c wevent.yaml -b localhost:9092 --speed 2"))),
    FeedCommand("foursquare", "Foursquare check-ins (TIST2015 global, TSMC2014 NYC/Tokyo)", foursquare.PROFILES,
                _foursquare_inputs, _load_foursquare,
                (("TIST2015's check-ins by country, dumped", "wevent replay foursquare dataset_TIST2015 --dump fs.npz"),
                 ("TSMC2014 New York by venue category, into a stream's reports", "wevent replay foursquare "
                  "dataset_TSMC2014_NYC.txt --profile tsmc2014 -c wevent.yaml -b localhost:9092"))),
    FeedCommand("synthetic", "LNS / Sin / Log binary streams", synthetic.PROFILES, lambda parser: None,
                _load_synthetic,
                (("an LNS stream, dumped for `wevent simulate --input`",
                  "wevent replay synthetic --model lns --users 2000 --slots 200 --dump lns.npz"),
                 ("a smaller Sin stream", "wevent replay synthetic --model sin --users 1000 --slots 100 "
                  "--dump sin.npz"))),
)


def _profile_class(command: FeedCommand) -> type:
    return type(next(iter(command.profiles.values())))


def register(sub, settings: Settings) -> None:
    p = add_command(sub, "replay", summary=COMMANDS["replay"], examples=[
        ("a synthetic feed dumped for `wevent simulate --input` and `wevent run --feed`",
         "wevent replay synthetic --model lns --users 2000 --slots 200 --dump lns.npz"),
        ("what each feed takes", "wevent replay tdrive --help")],
                       description="Preprocess a feed with a named profile (the papers' settings; any setting "
                       "can be overridden) and replay it slot by slot, in event-time order. --dump FILE writes "
                       "the (slot x user) matrix for `wevent simulate --input FILE`.")
    feeds = p.add_subparsers(dest="feed", required=True, metavar="FEED", parser_class=OneLineParser)
    for command in FEEDS:
        profiles = "; ".join(f"{name}: {profile.description}" for name, profile in command.profiles.items())
        fp = add_command(feeds, command.name, summary=command.help, examples=command.examples,
                         description=f"{command.help}: preprocess it with a named profile and replay it slot by slot, "
                         f"into a dump (--dump) or a stream's reports topic.\n\nProfiles - {profiles}.")
        command.add_inputs(fp)
        default = next(iter(command.profiles))
        fp.add_argument("--profile", default=default, choices=list(command.profiles),
                        help=f"named settings (default: {default})")
        group = fp.add_argument_group("profile settings (override the profile's value)")
        for setting in settings_of(_profile_class(command)):
            meta = setting.metadata
            group.add_argument(f"--{setting.name.replace('_', '-')}", dest=f"set_{setting.name}",
                               type=_setting_type(setting), metavar=meta["metavar"], choices=meta["choices"],
                               default=None, help=meta["help"])
        _add_replay_options(fp, settings)
        fp.set_defaults(handler=handle, feed_command=command)


def _typed(parse: Callable[[str], object]) -> Callable[[str], object]:
    """``parse`` for argparse: its ValueError message becomes the one-line usage error."""
    def read(text: str):
        try:
            return parse(text)
        except (ValueError, OverflowError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return read


def _grid(text: str) -> tuple[int, int]:
    rows, cols = parse_grid(text)
    if rows * cols > LIMITS["domain"]:
        raise argparse.ArgumentTypeError(f"must have at most {LIMITS['domain']:,} cells, got {text!r}")
    return rows, cols


# Ranges checked on top of a profile's own parsing of a setting.
SETTING_RANGES = {
    "slot_seconds": real(above=0, maximum=LIMITS["seconds"]),
    "max_slots": slot_count,
    "users": user_count,
    "slots": slot_count,
    "seed": seed,
    "start": real(),
    "grid": _grid,
}


def _setting_type(setting) -> Callable[[str], object]:
    """A setting's argparse type: the profile's parser (and its message), then the range, if any."""
    parse, check = _typed(setting.metadata["parse"]), SETTING_RANGES.get(setting.name)
    if check is None:
        return parse

    def read(text: str):
        parse(text)
        return check(text)

    return read


def _add_replay_options(parser, settings: Settings) -> None:
    parser.add_argument("--dump", metavar="FILE", type=writable_file,
                        help="write the preprocessed (slot x user) matrix to FILE (.npz) "
                        "instead of sending it")
    kafka = parser.add_argument_group("sending to Kafka (without --dump)")
    kafka.add_argument("--config", "-c", metavar="FILE", type=readable_file,
                       help="stream config the feed is replayed into")
    kafka.add_argument("--stream", "-s", metavar="NAME", help="stream of the config (default: the first)")
    kafka.add_argument("--bootstrap", "-b", type=bootstrap_servers,
                       help="Kafka bootstrap servers (default: $WEVENT_BOOTSTRAP)")
    kafka_properties_option(kafka)
    kafka.add_argument("--tansu-compat", action="store_true", default=settings.tansu_compat,
                       help="the broker is tansu: one record per batch")
    kafka.add_argument("--delivery-timeout", type=real(above=0, maximum=LIMITS["seconds"]), default=60.0,
                       metavar="SECONDS", help="a message the broker has not confirmed within SECONDS is not "
                       "delivered, and the replay fails (default: 60)")
    kafka.add_argument("--producer-id", type=_producer_id, metavar="ID", help="the producer this replay is, named in "
                       "its watermarks: 1 to 64 letters, digits, '.', '_' or '-' (default: replay- and a digest of the "
                       "feed's name and user ids, the same for a restarted replay of the same feed)")
    kafka.add_argument("--truth-port", type=listen_port, metavar="PORT", help="also follow the stream's releases and "
                       "serve their mean absolute error against this feed's truth on http://127.0.0.1:PORT/metrics, "
                       "until stopped (Ctrl-C); only ever on this machine's loopback: the truth is a function of raw "
                       "data")
    parser.add_argument("--from-slot", type=slot_count, default=1, metavar="N",
                        help="resume: start at slot N (default: 1)")
    parser.add_argument("--speed", type=real(minimum=0), default=0.0, metavar="X",
                        help="X times real time; 0 = as fast as "
                        "possible (default: 0)")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.add_argument("--progress", dest="progress", action="store_true", default=None,
                        help="always show a progress bar")
    parser.add_argument("--no-progress", dest="progress", action="store_false", help="never show a progress bar")


def _producer_id(text: str) -> str:
    try:
        return check_producer_id(text)
    except DecodeError as exc:
        raise argparse.ArgumentTypeError(f"{exc}, got {text!r}") from None


def _sink_factory(args) -> Callable[[Feed], DumpSink | KafkaReportSink]:
    """How to open the sink once the feed is loaded; checks the options first, before a long read."""
    if args.dump:
        check_dump_path(args.dump)
        return lambda feed: DumpSink(args.dump, feed, args.from_slot)
    from ..stream.config import load_config
    from ..stream.runtime.kafka import check_feed_fits, sink_for

    if not args.config:
        raise UsageError("give --dump FILE, or --config FILE (and --bootstrap) to send the feed to Kafka")
    config = load_config(args.config)
    stream = _config_stream(args, config)
    bootstrap = reachable_kafka(args.bootstrap, args.settings, config=config)

    def open_kafka(feed: Feed) -> KafkaReportSink:
        check_feed_fits(feed, stream)
        return sink_for(bootstrap, stream, config.report_partitions, args.tansu_compat, args.delivery_timeout,
                        args.settings.kafka_credentials(config), args.producer_id or default_producer_id(feed))

    return open_kafka


def _config_stream(args, config: AppConfig) -> StreamConfig:
    """The stream ``--stream`` names, by default the config's first."""
    stream = config.stream(args.stream) if args.stream else config.streams[0]
    if stream is None:
        raise UsageError(f"the config has no stream {args.stream!r}")
    return stream


def handle(args) -> int:
    command: FeedCommand = args.feed_command
    overrides = {s.name: getattr(args, f"set_{s.name}") for s in settings_of(_profile_class(command))}
    profile = resolve(command.profiles, args.profile, **overrides)
    if args.truth_port and args.dump:
        raise UsageError("--truth-port follows releases in Kafka: it does not go with --dump")
    if args.producer_id and args.dump:
        raise UsageError("--producer-id names the producer of the watermarks sent to Kafka: it does not go with --dump")
    from ..stream.runtime.kafka import DeliveryError

    open_sink = _sink_factory(args)
    feed, data = command.load(args, profile)
    try:
        sink = open_sink(feed)
        if args.truth_port:
            _follow_truth(args, feed)
        stats = replay(feed, sink, args.from_slot, args.speed,
                       progress=lambda slots, total: progress(slots, args.progress, total=total, desc="replay"))
    except DeliveryError as exc:  # the broker is gone, refuses or lost data: what was sent is incomplete
        print(f"wevent replay: failed: {exc}", file=sys.stderr)
        return EXIT_LOST_STATE if isinstance(exc, LostState) else EXIT_UNAVAILABLE
    summary = {
        "feed": command.name, "profile": args.profile, "settings": asdict(profile), "name": feed.name,
        "users": feed.users, "slots": feed.slots, "domain_size": feed.domain_size,
        "slot_seconds": feed.slot_seconds, "start": feed.start,
        "lines": data.lines if data else None,
        "skipped": data.skipped.as_dict() if data else {}, "skipped_lines": data.skipped.total if data else 0,
        "first_slot": stats.first_slot, "last_slot": stats.last_slot, "reports": stats.reports, "dump": args.dump,
        "messages_delivered": None if isinstance(sink, DumpSink) else sink.delivered,
        "producer_id": None if isinstance(sink, DumpSink) else sink.producer_id,
    }
    if args.json:
        print(json.dumps(summary, default=str, sort_keys=True))
    else:
        _print_summary(summary, data, sys.stdout)
    if args.truth_port:
        threading.Event().wait()  # keep serving the error against truth until stopped
    return 0


def _follow_truth(args, feed) -> None:
    """A thread that scores the stream's releases against the feed (served as Prometheus metrics)."""
    from ..stream.config import load_config
    from ..stream.runtime.prometheus import export_release_error
    from ..stream.runtime.subscription import Releases
    from ..stream.runtime.truth import TruthMonitor

    config = load_config(args.config)
    stream = _config_stream(args, config)
    monitor = TruthMonitor.for_stream(stream, feed)
    serve_metrics(args.truth_port)

    def follow() -> None:
        with Releases(args.settings.kafka_bootstrap(args.bootstrap), streams=[stream.name],
                      credentials=args.settings.kafka_credentials(config)) as releases:
            for record in releases.follow():
                export_release_error(stream.name, monitor.observe(record))

    threading.Thread(target=follow, daemon=True, name="truth").start()


def _print_summary(summary: dict, data: Preprocessed | None, out) -> None:
    start = datetime.fromtimestamp(summary["start"], timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    out.write(f"{summary['feed']}, profile {summary['profile']}: {summary['users']:,} users, {summary['slots']:,} "
              f"slots of {summary['slot_seconds']:g} s from {start}, domain size {summary['domain_size']}\n")
    if data is not None:
        out.write(f"read {data.lines:,} lines; {data.skipped.describe()}\n")
    target = (f"dumped to {summary['dump']}" if summary["dump"]
              else f"all {summary['messages_delivered']:,} messages delivered to Kafka")
    out.write(f"replayed slots {summary['first_slot']:,}..{summary['last_slot']:,}: {summary['reports']:,} reports, "
              f"{target}\n")
