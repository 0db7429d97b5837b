"""``wevent devices``: run the local model's device fleet for a shard of users."""

from __future__ import annotations

import logging
import sys

from ..errors import Unavailable
from ..stream.wire.topics import LDP_REPORTS, LDP_REQUESTS
from ..stream.settings import LOOPBACK, Settings
from . import COMMANDS
from ._help import add_command
from ._common import (UsageError, bind_address, bootstrap_servers, check_listen, integer, kafka_properties_option,
                      port, readable_file, serve_metrics, shard_spec, wait_for_kafka)

DEFAULT_LEDGER_DIR = "wevent-devices-ledger"

log = logging.getLogger("wevent.devices")


def register(sub, settings: Settings) -> None:
    p = add_command(sub, "devices", summary=COMMANDS["devices"], examples=[
        ("a device fleet for a local-model stream, its users' values from a dump (`wevent replay ... --dump`)",
         "wevent devices -c wevent.yaml --values lns.npz -b localhost:9092"),
        ("one of two fleet processes: users whose index mod 2 is 1",
         "wevent devices -c wevent.yaml --values lns.npz --shard 1/2 -b localhost:9092")],
                       description="The local model's devices: answer ldp.requests with perturbed reports until "
                       "SIGTERM, SIGINT or SIGHUP (exit status 0). Started while Kafka is down, the fleet waits for "
                       "it. Exit status 2: bad input (starting again will not help); 75: reports not delivered "
                       "within the producer's message timeout (start again: the request is answered again).")
    p.add_argument("--config", "-c", required=True, type=readable_file, help="stream config file")
    p.add_argument("--stream", "-s", action="append", help="local-model stream of the config (default: the "
                   "first); give it several times for one fleet serving several streams")
    p.add_argument("--values", required=True, action="append", type=readable_file, help="the users' true values: a "
                   "dump (wevent replay --dump); one for every --stream, in the same order, or one for all")
    p.add_argument("--shard", default="0/1", type=shard_spec, help="K/N: this process holds the device blocks b with "
                   "b mod N = K (default: 0/1, every user)")
    p.add_argument("--ledger-dir", default=DEFAULT_LEDGER_DIR,
                   help="directory of the users' ledgers (their spend in the current window), one file per stream "
                   "and shard, written before any report leaves and read back at start "
                   f"(default: ./{DEFAULT_LEDGER_DIR})")
    p.add_argument("--new-ledger", action="store_true",
                   help="this is the shard's first start: without a ledger in --ledger-dir, begin with an empty one "
                   "(written at once; an existing ledger is read all the same). Without it a missing ledger stops "
                   "the fleet, which would otherwise answer again for spend its users already have")
    p.add_argument("--max-slots-ahead", type=integer(1),
                   help="refuse a request more than this many slots past the newest charged one (default: 100 w)")
    p.add_argument("--bootstrap", "-b", type=bootstrap_servers,
                   help="Kafka bootstrap servers (default: $WEVENT_BOOTSTRAP)")
    kafka_properties_option(p)
    p.add_argument("--tansu-compat", action="store_true", default=settings.tansu_compat,
                   help="the broker is tansu: one record per batch")
    p.add_argument("--metrics-port", type=port, help="serve the fleet's counters on this port (/metrics)")
    p.add_argument("--request-key", default=settings.request_public_key_hex,
                   help="the server's public key (64 hex characters; `wevent keys` prints it), which requests must "
                   "be signed with (default: $WEVENT_REQUEST_PUBLIC_KEY; without it, derived from the server's key "
                   "where the devices run beside it: $WEVENT_NOISE_KEY or the config's seed)")
    p.add_argument("--metrics-host", type=bind_address, default=LOOPBACK,
                   help=f"address the metrics port listens on (default: {LOOPBACK}, this machine only; 0.0.0.0 "
                   "for every interface)")
    p.set_defaults(handler=handle)


def handle(args) -> int:
    import confluent_kafka  # noqa: F401 - first: without the stream extra, say so before anything else

    from wevent.core.data import UserValues
    from wevent.core.local.device_reports import Devices
    from wevent.core.randomness import DerivedRandomness
    from wevent.stream.wire.seals import report_seal
    from wevent.stream.config import load_config
    from wevent.stream.agents.local import device_block_size
    from wevent.producers.device_fleet import DeviceFleet, SignedRequests
    from wevent.stream.runtime.local_run import Signals, Stopped

    settings = args.settings
    config = load_config(args.config)
    names = args.stream or [config.streams[0].name]
    if len(set(names)) < len(names):
        raise UsageError("a --stream is given twice")
    if len(args.values) not in (1, len(names)):
        raise UsageError(f"give one --values for all streams or one per --stream: {len(args.values)} for "
                         f"{len(names)} streams")
    try:
        shard, shards = (int(x) for x in args.shard.split("/"))
    except ValueError:
        raise UsageError(f"--shard must be K/N, got {args.shard!r}") from None
    dumps = {path: UserValues.load(path) for path in args.values}
    server = server_public_key(args.request_key, config, settings)
    fleets, readers = {}, {}
    for name, path in zip(names, args.values * len(names) if len(args.values) == 1 else args.values):
        stream = config.stream(name)
        if stream is None or stream.model != "local":
            raise UsageError(f"{name!r} is not a local-model stream of the config")
        # The dump is checked against the stream, and the ledger read, before anything connects.
        fleets[name] = DeviceFleet(stream, dumps[path], Devices(DerivedRandomness(settings.device_key(config), name),
                                                                block_size=device_block_size(stream)),
                                   shard, shards, ledger_dir=args.ledger_dir, new_ledger=args.new_ledger,
                                   max_ahead=args.max_slots_ahead)
        readers[name] = SignedRequests(name, server)
    reports = report_seal(settings.device_key(config))
    if args.metrics_port:
        check_listen(args.metrics_host, args.metrics_port)
    signals = Signals().install()  # a signal stops the fleet wherever it is: every step of an answer is crash-safe
    try:
        serve(args, config, fleets, readers, reports, f"wevent-devices-{'+'.join(names)}-{shard}of{shards}")
    except Stopped as stop:  # a request being answered stays uncommitted: it is answered again on restart
        print(f"wevent devices: {stop}: stopping", file=sys.stderr)
    finally:
        signals.restore()
    return 0


def serve(args, config, fleets: dict, readers: dict, reports, group: str) -> None:
    """Wait for Kafka, then answer the requests of ``group``'s partitions until stopped."""
    from confluent_kafka import Consumer, Producer

    from wevent.producers.device_fleet import signed_reports
    from wevent.stream.runtime.health import log_client_errors
    from wevent.stream.runtime.kafka import consumer_config, producer_config

    settings = args.settings
    bootstrap = wait_for_kafka(args.bootstrap, settings, "wevent devices", config=config)
    credentials = settings.kafka_credentials(config)
    if args.metrics_port:
        serve_metrics(args.metrics_port, args.metrics_host)
    log_client_errors()  # a broker that goes away: one line per 30 s in the fleet's log, not one per retry
    # Offsets are committed by hand, each after its request's answer is delivered (see answer_requests).
    consumer = Consumer({**consumer_config(bootstrap, group=group, tansu_compat=args.tansu_compat,
                                         credentials=credentials), "enable.auto.commit": False})
    producer = Producer(producer_config(bootstrap, args.tansu_compat, credentials))
    consumer.subscribe([LDP_REQUESTS])
    for name, fleet in fleets.items():
        fullest = fleet.ledger.tightest()
        spent = "" if fullest is None else f", fullest user window {fullest.spend:g} of {fullest.bound:g}"
        print(f"devices of stream {name!r}: shard {fleet.shard}/{fleet.shards} of {fleet.stream.users} users in "
              f"blocks of {fleet.devices.block_size}; ledger {fleet.ledger.path} (newest charged slot "
              f"{fleet.ledger.newest}{spent}); waiting for requests until SIGTERM", file=sys.stderr, flush=True)

    def respond(raw: bytes) -> list[tuple[bytes, bytes]]:
        """The ``ldp.reports`` messages answering one request, with their keys ([] for a forged one or
        one of a stream this fleet does not serve)."""
        for name, reader in readers.items():
            request = reader.read(raw)
            if request is not None:
                return [(name.encode(), m) for m in signed_reports(fleets[name].answer(request), reports)]
        return []

    try:
        answer_requests(consumer, producer, respond)
    finally:
        consumer.close()  # leaves the consumer group: a fleet of the same shard started next takes over at once


def answer_requests(consumer, producer, respond) -> None:
    """Answer every request the consumer reads, in order, until the process is stopped.

    A request's offset is committed only once its answer is delivered: the ledger is on disk
    before the reports leave (``DeviceFleet.answer``), the reports are delivered before the offset
    is committed. A crash at any point leaves the request uncommitted or answered; an uncommitted
    request is read again after a restart and answered with the identical reports (its ledger
    entry makes the repeat free), so the collector counts every report once.
    """
    from confluent_kafka import KafkaException

    while True:
        message = consumer.poll(0.5)
        if message is None or message.error():
            continue
        deliver(producer, LDP_REPORTS, respond(message.value()))
        try:
            consumer.commit(message=message, asynchronous=False)
        except KafkaException as exc:  # the next commit covers it; a restart before then reads it again
            log.warning("could not commit ldp.requests[%d]@%d (%s); its answer was delivered", message.partition(),
                        message.offset(), exc.args[0])


def deliver(producer, topic: str, messages: list[tuple[bytes, bytes]]) -> None:
    """Send ``messages`` (key, value) and wait until the broker has every one; a failure is one line, no commit.

    A broker that is down holds the reports in the producer's queue until it returns or the
    producer gives them up (``message.timeout.ms``): then the fleet stops, with its request
    uncommitted, for its supervisor to restart it.
    """
    failures = []

    def delivered(error, _message) -> None:
        if error is not None:
            failures.append(error)

    for key, value in messages:
        producer.produce(topic, value, key=key, on_delivery=delivered)
        producer.poll(0)
    while producer.flush(1.0):  # short waits: the process still answers signals
        pass
    if failures:
        raise Unavailable(f"{len(failures)} of {len(messages)} report message(s) not delivered to {topic} "
                          f"({failures[0].str()}); the request stays uncommitted and is answered again on restart")


def server_public_key(text: str | None, config, settings: Settings):
    """The key requests are checked with: the given public key, else the public half of the
    server's own key where the devices run beside the server (its key in ``settings``, or the
    config's seed, at hand)."""
    from wevent.stream.wire.seals import SignatureSeal, request_seal
    from wevent.stream.config import ConfigError

    if text:
        try:
            return SignatureSeal.from_public_hex(text)
        except ValueError as exc:
            raise UsageError(f"--request-key: {exc}") from None
    try:
        return request_seal(settings.noise_key(config)).public()
    except ConfigError:
        raise UsageError("no key to check the server's requests with: pass --request-key HEX or set "
                         "WEVENT_REQUEST_PUBLIC_KEY (`wevent keys` prints it)") from None
