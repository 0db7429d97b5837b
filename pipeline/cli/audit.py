"""``wevent audit``: re-verify the w-event guarantee from the audit topic or a JSON-lines file."""

from __future__ import annotations

import sys

from ..stream.settings import Settings
from ..stream.wire.topics import AUDIT
from . import COMMANDS
from ._help import add_command
from ._common import (UsageError, add_verification, bootstrap_servers, integer, kafka_properties_option,
                      reachable_kafka, readable_file, release_key)

READ_TIMEOUT = 15.0  # seconds for the topic's metadata and offsets

DESCRIPTION = """\
Re-verify the w-event guarantee of every stream from its audit records (or a central stream's
release log) and exit 1 naming the first window that overspends.

How it compares: every recorded budget is a float, and a float is an exact rational. A window is
the w consecutive slots ending at a slot (the slots before the first count as spending nothing),
and it passes when the exact sum of its charges is at most its bound: eps1 + eps2 of every slot
plus the share a query index reserves, against epsilon (central); every requirement type's
charges against its own eps_k over its own w_k (personalized); every user's charges, from the
phases that asked everyone and those that listed them, against epsilon (local). The sums are
exact rational sums: there is no tolerance, and an overspend of one ulp fails.

What it refuses (FAIL): records that do not start at the stream's first slot (1) or that miss a
slot, unless --from-slot/--to-slot name the range to audit (that range must then be complete, and
a window reaching before it is checked on its slots in the range); two records of one slot that
disagree (two audit copies, two release copies, or a release record and the audit record of its
slot, on the mechanism, window, eps1, eps2, per-type charges, or epsilon where nothing is
reserved), naming the slot and the field; a budget or charge that is NaN, infinite or negative;
records that disagree on the stream's budget or window; a slot whose record does not say who paid.
A record of a message version this reader does not know is refused in one line (exit 2).

Whose records: only those whose signature verifies under the server's release public key
(--release-key, else $WEVENT_RELEASE_PUBLIC_KEY) count; the others (unsigned, forged, changed, or
signed under another key) are dropped, and one line on stderr says how many. Without a key the
command refuses to start, unless --no-verify says to take every record as it is (a simulation's
release log, which nobody signs, say)."""


def register(sub, settings: Settings) -> None:
    p = add_command(sub, "audit", summary=COMMANDS["audit"], description=DESCRIPTION, examples=[
        ("every stream's windows from the audit topic, verified with the key `wevent keys` derives",
         "export $(wevent keys) && wevent audit -b localhost:9092"),
        ("the audit log of a run", "wevent run --slots 60 --audit-log a.jsonl && wevent audit a.jsonl --no-verify"),
        ("a simulation's release log, which nobody signs",
         "wevent simulate -m bd --slots 100 --releases r.jsonl && wevent audit r.jsonl --no-verify")])
    p.add_argument("file", nargs="?", type=readable_file,
                   help="JSON lines of release or audit records (default: read the audit topic)")
    p.add_argument("--bootstrap", "-b", type=bootstrap_servers,
                   help="Kafka bootstrap servers for the audit topic (default: $WEVENT_BOOTSTRAP)")
    kafka_properties_option(p)
    p.add_argument("--topic", default=AUDIT, help=f"topic to read (default: {AUDIT})")
    p.add_argument("--stream", "-s", action="append", help="only these streams (repeatable)")
    p.add_argument("--from-slot", type=integer(1), metavar="SLOT",
                   help="audit from this slot on (default: the stream's first slot, 1, which the records must hold)")
    p.add_argument("--to-slot", type=integer(1), metavar="SLOT",
                   help="audit up to this slot (default: the last one recorded)")
    add_verification(p, "audit and release records")
    p.set_defaults(handler=handle)


def handle(args) -> int:
    from ..stream.audit import read_lines, verify
    from ..stream.wire.records import PublishedRecords

    if args.from_slot is not None and args.to_slot is not None and args.to_slot < args.from_slot:
        raise UsageError(f"--to-slot must be >= --from-slot ({args.from_slot}), got {args.to_slot}")
    key = release_key(args, "audit records")
    if args.file:
        try:
            messages = read_lines(args.file)
        except FileNotFoundError:
            raise UsageError(f"file not found: {args.file}") from None
        except OSError as exc:
            raise UsageError(f"cannot read {args.file}: {exc.strerror}") from None
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    else:
        messages = _read_topic(args)
    published = PublishedRecords(key)
    records = [record for record in map(published.read, messages) if record is not None]
    dropped = (f"{published.summary()} of {len(messages)} records"
               + (f" (checked under release key {key.fingerprint})" if key is not None else "")
               if published.dropped else "")
    try:
        findings = verify(records, args.stream, first=args.from_slot, last=args.to_slot)
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"not release or audit records: {exc}") from None
    if not findings:
        raise UsageError("no records to audit" + (f": {dropped}" if dropped else ""))
    if dropped:
        print(f"wevent audit: {dropped}", file=sys.stderr)
    for finding in findings:
        print(("PASS " if finding.ok else "FAIL ") + finding.message)
    return 0 if all(f.ok for f in findings) else 1


def _read_topic(args) -> list[bytes]:
    from confluent_kafka import KafkaException

    from ..stream.runtime.subscription import read_topic

    if not args.settings.kafka_bootstrap(args.bootstrap):
        raise UsageError("give a file, or a Kafka with --bootstrap / WEVENT_BOOTSTRAP")
    bootstrap = reachable_kafka(args.bootstrap, args.settings)
    try:
        values = read_topic(bootstrap, args.topic, timeout=READ_TIMEOUT, credentials=args.settings.kafka_credentials())
    except KafkaException as exc:
        raise UsageError(f"cannot read topic {args.topic!r} from Kafka at {bootstrap}: {exc.args[0].str()}") from None
    return values
