"""``wevent devices``: run the local model's device fleet for a shard of users."""

from __future__ import annotations

import os
import sys

from ._common import LOOPBACK, UsageError, bind_address, serve_metrics

DEFAULT_LEDGER_DIR = "wevent-devices-ledger"


def register(sub) -> None:
    p = sub.add_parser("devices", help="the local model's devices: answer ldp.requests with perturbed reports")
    p.add_argument("--config", "-c", required=True, help="stream config file")
    p.add_argument("--stream", "-s", help="local-model stream of the config (default: the first)")
    p.add_argument("--values", required=True, help="the users' true values: a .npz dump (wevent replay --dump)")
    p.add_argument("--shard", default="0/1", help="K/N: this process holds the device blocks b with b mod N = K "
                   "(default: 0/1, every user)")
    p.add_argument("--ledger-dir", default=DEFAULT_LEDGER_DIR,
                   help="directory of the users' ledgers (their spend in the current window), one file per stream "
                   "and shard, written before any report leaves and read back at start "
                   f"(default: ./{DEFAULT_LEDGER_DIR})")
    p.add_argument("--max-slots-ahead", type=int,
                   help="refuse a request more than this many slots past the newest charged one (default: 100 w)")
    p.add_argument("--bootstrap", "-b", help="Kafka bootstrap servers (default: $WEVENT_BOOTSTRAP)")
    p.add_argument("--tansu-compat", action="store_true", default=os.environ.get("WEVENT_TANSU_COMPAT") == "1",
                   help="the broker is tansu: one record per batch")
    p.add_argument("--metrics-port", type=int, help="serve the fleet's counters on this port (/metrics)")
    p.add_argument("--request-key", default=os.environ.get("WEVENT_REQUEST_PUBLIC_KEY"),
                   help="the server's public key (64 hex characters; `wevent keys` prints it), which requests must "
                   "be signed with (default: $WEVENT_REQUEST_PUBLIC_KEY; without it, derived from the server's key "
                   "where the devices run beside it: $WEVENT_NOISE_KEY or the config's seed)")
    p.add_argument("--metrics-host", type=bind_address, default=LOOPBACK,
                   help=f"address the metrics port listens on (default: {LOOPBACK}, this machine only; 0.0.0.0 "
                   "for every interface)")
    p.set_defaults(handler=handle)


def handle(args) -> int:
    from pipeline.core.data import UserValues
    from pipeline.core.local.devices import Devices
    from pipeline.core.randomness import DerivedRandomness
    from pipeline.stream.broker import resolve_bootstrap
    from pipeline.stream.codecs import report_seal
    from pipeline.stream.config import load_config
    from pipeline.stream.kafka import consumer_config, producer_config
    from pipeline.stream.logic import device_block_size
    from producers.devices import DeviceFleet, SignedRequests, signed_reports

    config = load_config(args.config)
    stream = config.stream(args.stream) if args.stream else config.streams[0]
    if stream is None or stream.model != "local":
        raise UsageError(f"{args.stream or stream.name!r} is not a local-model stream of the config")
    try:
        shard, shards = (int(x) for x in args.shard.split("/"))
    except ValueError:
        raise UsageError(f"--shard must be K/N, got {args.shard!r}") from None
    block_size = device_block_size(stream)
    # The dump is checked against the stream, and the ledger read, before anything connects.
    fleet = DeviceFleet(stream, UserValues.load(args.values),
                        Devices(DerivedRandomness(config.device_key(), stream.name), block_size=block_size),
                        shard, shards, ledger_dir=args.ledger_dir, max_ahead=args.max_slots_ahead)
    requests = SignedRequests(stream.name, server_public_key(args.request_key, config))
    reports = report_seal(config.device_key())
    bootstrap = resolve_bootstrap(args.bootstrap)
    if not bootstrap:
        raise UsageError("no Kafka to connect to: pass --bootstrap or set WEVENT_BOOTSTRAP")
    if args.metrics_port:
        serve_metrics(args.metrics_port, args.metrics_host)
    from confluent_kafka import Consumer, Producer

    from pipeline.stream.health import log_client_errors

    log_client_errors()  # a broker that goes away: one line per 30 s in the fleet's log, not one per retry
    consumer = Consumer(consumer_config(bootstrap, group=f"wevent-devices-{stream.name}-{shard}of{shards}"))
    producer = Producer(producer_config(bootstrap, args.tansu_compat))
    consumer.subscribe(["ldp.requests"])
    print(f"devices of stream {stream.name!r}: shard {shard}/{shards} of {stream.users} users in blocks of "
          f"{block_size}; ledger {fleet.ledger.path} (newest charged slot {fleet.ledger.newest}); waiting for "
          "requests", file=sys.stderr, flush=True)
    try:
        while True:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            request = requests.read(message.value())
            if request is None:
                continue
            for value in signed_reports(fleet.answer(request), reports):
                producer.produce("ldp.reports", value, key=stream.name.encode())
                producer.poll(0)
            producer.flush(30)
    finally:
        consumer.close()
    return 0


def server_public_key(text: str | None, config):
    """The key requests are checked with: the given public key, else the public half of the
    server's own key where the devices run beside the server (its key or seed at hand)."""
    from pipeline.stream.codecs import SignatureSeal, request_seal
    from pipeline.stream.config import ConfigError

    if text:
        try:
            return SignatureSeal.from_public_hex(text)
        except ValueError as exc:
            raise UsageError(f"--request-key: {exc}") from None
    try:
        return request_seal(config.noise_key()).public()
    except ConfigError:
        raise UsageError("no key to check the server's requests with: pass --request-key HEX or set "
                         "WEVENT_REQUEST_PUBLIC_KEY (`wevent keys` prints it)") from None
