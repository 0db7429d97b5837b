"""``wevent query``: a decayed sliding-window range query against a worker's query service."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

from ..stream.settings import Settings
from ._common import UsageError, http_url, integer, probability
from . import COMMANDS
from ._help import add_command


TIMEOUT = 10.0  # seconds to wait for a worker's answer


def register(sub, settings: Settings) -> None:
    p = add_command(
        sub, "query", summary=COMMANDS["query"],
        description="Ask a worker's query service for the decayed sum of a stream's releases over a range of its "
        "last slots, each bin with its standard error. The stream's config must have a query index.",
        examples=[("slots 100 to 120 of stream taxi, from the worker on this machine",
                   "wevent query -s taxi --from 100 --to 120"),
                  ("the same from another worker, as JSON", "wevent query --url http://10.0.0.5:6066 -s taxi --from "
                   "100 --to 120 --json")])
    p.add_argument("--url", default="http://127.0.0.1:6066", type=http_url,
                   help="a worker's web address (default: http://127.0.0.1:6066)")
    p.add_argument("--stream", "-s", required=True, help="the stream to query")
    p.add_argument("--from", dest="first", type=integer(1), required=True, help="first slot of the range")
    p.add_argument("--to", dest="last", type=integer(1), required=True, help="last slot of the range")
    p.add_argument("--decay", type=probability(open_low=True),
                   help="decay p in (0, 1] (must be the index's; default: the index's)")
    p.add_argument("--json", action="store_true", help="print the worker's JSON answer")
    p.set_defaults(handler=handle)


def handle(args) -> int:
    params = {"stream": args.stream, "from": args.first, "to": args.last}
    if args.decay is not None:
        params["decay"] = args.decay
    url = f"{args.url.rstrip('/')}/query?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
            body = json.loads(response.read())
        answers = [(float(v), float(e)) for v, e in zip(body["answer"], body["standard_error"])]
        heading = (f"stream {body['stream']!r}, slots {body['from']}..{body['to']} at slot {body['slot']}, "
                   f"decay {body['decay']:g}, mode {body['mode']}")
    except urllib.error.HTTPError as exc:
        try:
            reason = json.loads(exc.read()).get("error", exc.reason)
        except (ValueError, AttributeError):
            reason = exc.reason
        raise UsageError(f"the worker refused the query: {reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise UsageError(f"cannot reach a worker at {args.url} within {TIMEOUT:g} s: {getattr(exc, 'reason', exc)}") \
            from None
    except (ValueError, TypeError, KeyError):
        raise UsageError(f"{args.url} answered, but not with a query answer (is it a wevent worker?)") from None
    if args.json:
        print(json.dumps(body))
        return 0
    print(heading)
    for i, (value, error) in enumerate(answers):
        print(f"  bin {i:>4}: {value:14.3f}  ± {error:.3f}")
    return 0
