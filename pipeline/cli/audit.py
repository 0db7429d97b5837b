"""``wevent audit``: re-verify the w-event guarantee from the audit topic or a JSON-lines file."""

from __future__ import annotations

import sys

from ._common import UsageError, bootstrap_servers, reachable_kafka, readable_file


def register(sub) -> None:
    p = sub.add_parser("audit", help="re-verify every window's budget from audit records or a release log")
    p.add_argument("file", nargs="?", type=readable_file,
                   help="JSON lines of release or audit records (default: read the audit topic)")
    p.add_argument("--bootstrap", "-b", type=bootstrap_servers,
                   help="Kafka bootstrap servers for the audit topic (default: $WEVENT_BOOTSTRAP)")
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

    from ..stream.broker import resolve_bootstrap
    from ..stream.subscription import read_topic

    if not resolve_bootstrap(args.bootstrap):
        raise UsageError("give a file, or a Kafka with --bootstrap / WEVENT_BOOTSTRAP")
    return [json.loads(value) for value in read_topic(reachable_kafka(args.bootstrap), args.topic)]
