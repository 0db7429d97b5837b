"""``wevent audit``: re-verify the w-event guarantee from the audit topic or a JSON-lines file."""

from __future__ import annotations

import sys

from ._common import UsageError


def register(sub) -> None:
    p = sub.add_parser("audit", help="re-verify every window's budget from audit records or a release log")
    p.add_argument("file", nargs="?", help="JSON lines of release or audit records (default: read the audit topic)")
    p.add_argument("--bootstrap", "-b", help="Kafka bootstrap servers for the audit topic (default: $WEVENT_BOOTSTRAP)")
    p.add_argument("--topic", default="audit", help="topic to read (default: audit)")
    p.add_argument("--stream", "-s", action="append", help="only these streams (repeatable)")
    p.set_defaults(handler=handle)


def handle(args) -> int:
    from ..stream.audit import read_jsonl, verify

    if args.file:
        try:
            records = read_jsonl(args.file)
        except FileNotFoundError:
            raise UsageError(f"file not found: {args.file}") from None
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    else:
        records = _read_topic(args)
    try:
        if args.stream:
            records = [r for r in records if r.get("stream") in args.stream]
        findings = verify(records)
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"not release or audit records: {exc}") from None
    if not findings:
        raise UsageError("no records to audit")
    for finding in findings:
        print(("PASS " if finding.ok else "FAIL ") + finding.message)
    return 0 if all(f.ok for f in findings) else 1


def _read_topic(args) -> list[dict]:
    import json

    from confluent_kafka import Consumer, TopicPartition

    from ..stream.broker import resolve_bootstrap
    from ..stream.kafka import consumer_config

    bootstrap = resolve_bootstrap(args.bootstrap)
    if not bootstrap:
        raise UsageError("give a file, or a Kafka with --bootstrap / WEVENT_BOOTSTRAP")
    consumer = Consumer(consumer_config(bootstrap))
    try:
        metadata = consumer.list_topics(args.topic, timeout=30)
        if args.topic not in metadata.topics or not metadata.topics[args.topic].partitions:
            raise UsageError(f"topic {args.topic!r} does not exist")
        records = []
        for p in metadata.topics[args.topic].partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(args.topic, p), timeout=30)
            if high <= low:
                continue
            consumer.assign([TopicPartition(args.topic, p, low)])
            while True:
                message = consumer.poll(5)
                if message is None:
                    break  # nothing more within 5 s
                if message.error():
                    continue
                records.append(json.loads(message.value()))
                if message.offset() >= high - 1:
                    break
        return records
    finally:
        consumer.close()
