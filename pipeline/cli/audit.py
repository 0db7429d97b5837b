"""``wevent audit``: re-verify the w-event guarantee from the audit topic or a JSON-lines file."""

from __future__ import annotations

from ..stream.wire.topics import AUDIT
from ..stream.settings import Settings
from ._common import UsageError, bootstrap_servers, reachable_kafka, readable_file

READ_TIMEOUT = 15.0  # seconds for the topic's metadata and offsets


def register(sub, settings: Settings) -> None:
    p = sub.add_parser("audit", help="re-verify every window's budget from audit records or a release log")
    p.add_argument("file", nargs="?", type=readable_file,
                   help="JSON lines of release or audit records (default: read the audit topic)")
    p.add_argument("--bootstrap", "-b", type=bootstrap_servers,
                   help="Kafka bootstrap servers for the audit topic (default: $WEVENT_BOOTSTRAP)")
    p.add_argument("--topic", default=AUDIT, help=f"topic to read (default: {AUDIT})")
    p.add_argument("--stream", "-s", action="append", help="only these streams (repeatable)")
    p.set_defaults(handler=handle)


def handle(args) -> int:
    from ..stream.audit import read_jsonl, verify

    if args.file:
        try:
            records = read_jsonl(args.file)
        except FileNotFoundError:
            raise UsageError(f"file not found: {args.file}") from None
        except OSError as exc:
            raise UsageError(f"cannot read {args.file}: {exc.strerror}") from None
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    else:
        records = _read_topic(args)
    try:
        findings = verify(records, args.stream)
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"not release or audit records: {exc}") from None
    if not findings:
        raise UsageError("no records to audit")
    for finding in findings:
        print(("PASS " if finding.ok else "FAIL ") + finding.message)
    return 0 if all(f.ok for f in findings) else 1


def _read_topic(args) -> list:
    import json

    from confluent_kafka import KafkaException

    from ..stream.runtime.subscription import read_topic

    if not args.settings.kafka_bootstrap(args.bootstrap):
        raise UsageError("give a file, or a Kafka with --bootstrap / WEVENT_BOOTSTRAP")
    bootstrap = reachable_kafka(args.bootstrap, args.settings)
    try:
        values = read_topic(bootstrap, args.topic, timeout=READ_TIMEOUT, credentials=args.settings.kafka_credentials())
    except KafkaException as exc:
        raise UsageError(f"cannot read topic {args.topic!r} from Kafka at {bootstrap}: {exc.args[0].str()}") from None
    records = []
    for number, value in enumerate(values, start=1):
        try:
            records.append(json.loads(value))
        except (ValueError, TypeError):
            raise UsageError(f"message {number} of topic {args.topic!r} is not JSON") from None
    return records
