"""``wevent devices``: run the local model's device fleet for a shard of users."""

from __future__ import annotations

import os
import sys

from ._common import (UsageError, bootstrap_servers, listen_port, reachable_kafka, readable_file, serve_metrics,
                      shard_spec)


def register(sub) -> None:
    p = sub.add_parser("devices", help="the local model's devices: answer ldp.requests with perturbed reports")
    p.add_argument("--config", "-c", required=True, type=readable_file, help="stream config file")
    p.add_argument("--stream", "-s", help="local-model stream of the config (default: the first)")
    p.add_argument("--values", required=True, type=readable_file, help="the users' true values: a dump "
                   "(wevent replay --dump)")
    p.add_argument("--shard", default="0/1", type=shard_spec, help="K/N: this process holds the device blocks b with "
                   "b mod N = K (default: 0/1, every user)")
    p.add_argument("--bootstrap", "-b", type=bootstrap_servers,
                   help="Kafka bootstrap servers (default: $WEVENT_BOOTSTRAP)")
    p.add_argument("--tansu-compat", action="store_true", default=os.environ.get("WEVENT_TANSU_COMPAT") == "1",
                   help="the broker is tansu: one record per batch")
    p.add_argument("--metrics-port", type=listen_port, help="serve the fleet's counters on this port (/metrics)")
    p.set_defaults(handler=handle)


def handle(args) -> int:
    from pipeline.core.data import UserValues
    from pipeline.core.local import Request
    from pipeline.core.local.devices import Devices
    from pipeline.core.randomness import DerivedRandomness
    from pipeline.stream.codecs import DecodeError, Envelope
    from pipeline.stream.config import load_config
    from pipeline.stream.kafka import consumer_config, producer_config
    from pipeline.stream.logic import device_block_size
    from producers.devices import DeviceFleet

    config = load_config(args.config)
    stream = config.stream(args.stream) if args.stream else config.streams[0]
    if stream is None or stream.model != "local":
        raise UsageError(f"{args.stream or stream.name!r} is not a local-model stream of the config")
    try:
        shard, shards = (int(x) for x in args.shard.split("/"))
    except ValueError:
        raise UsageError(f"--shard must be K/N, got {args.shard!r}") from None
    values = UserValues.load(args.values)
    bootstrap = reachable_kafka(args.bootstrap)
    block_size = device_block_size(stream)
    fleet = DeviceFleet(stream, values,
                        Devices(DerivedRandomness(config.device_key(), stream.name), block_size=block_size),
                        shard, shards)
    if args.metrics_port:
        serve_metrics(args.metrics_port)
    from confluent_kafka import Consumer, Producer

    consumer = Consumer(consumer_config(bootstrap, group=f"wevent-devices-{stream.name}-{shard}of{shards}"))
    producer = Producer(producer_config(bootstrap, args.tansu_compat))
    consumer.subscribe(["ldp.requests"])
    print(f"devices of stream {stream.name!r}: shard {shard}/{shards} of {stream.users} users in blocks of "
          f"{block_size}; waiting for requests", file=sys.stderr, flush=True)
    try:
        while True:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            try:
                envelope = Envelope.decode(message.value())
            except DecodeError:
                continue
            if envelope.kind != "request" or envelope.get("stream") != stream.name:
                continue
            request = Request.from_dict({k: v for k, v in envelope.fields.items() if k != "stream"})
            for batch in fleet.answer(request):
                producer.produce("ldp.reports", Envelope("reports", batch).encode(), key=stream.name.encode())
                producer.poll(0)
            producer.flush(30)
    finally:
        consumer.close()
    return 0
