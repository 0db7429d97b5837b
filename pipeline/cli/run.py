"""``wevent run``: the whole system on one machine, with live releases in the terminal.

Starts the embedded broker (unless a Kafka is configured), creates the topics, starts a worker,
replays the feed (the bundled sample by default) into ``reports`` and prints every release as it
arrives; metrics are served on the worker's web port. With ``--slots N --release-log FILE`` it
stops after N slots and writes every release as one JSON line.
"""

from __future__ import annotations

import sys
import tempfile
import threading
from pathlib import Path

import numpy as np

from ._common import UsageError, serve_metrics


def register(sub) -> None:
    p = sub.add_parser("run", help="run broker, worker and a feed replay; print releases live")
    p.add_argument("--config", "-c", help="stream config file; default: one central stream over the feed")
    p.add_argument("--stream", help="stream of the config that the feed is replayed into (default: the first)")
    p.add_argument("--feed", help="a .npz dump of user values to replay (default: the bundled sample feed)")
    p.add_argument("--mechanism", "-m", default="ba", help="mechanism of the default stream (default: ba); a local-model "
                   "one (lpa, ...) runs the devices too, pbd/pba get a generated requirement mix")
    p.add_argument("--epsilon", "-e", type=float, default=1.0, help="epsilon of the default stream (default: 1)")
    p.add_argument("--window", "-w", type=int, default=20, help="w of the default stream (default: 20)")
    p.add_argument("--slots", type=int, help="stop after this many slots (default: the whole feed)")
    p.add_argument("--release-log", help="write every release as one JSON line to this file")
    p.add_argument("--audit-log", help="write every audit record (who was charged what) as one JSON line to this file")
    p.add_argument("--speed", type=float, default=1200.0,
                   help="replay speed as a multiple of real time; 0 = as fast as possible (default: 1200, "
                   "a 5-minute slot every 0.25 s)")
    p.add_argument("--bootstrap", "-b", help="use this Kafka instead of the embedded broker (or $WEVENT_BOOTSTRAP)")
    p.add_argument("--metrics-port", type=int, default=0, help="worker web port for /metrics (default: a free port)")
    p.add_argument("--truth-port", type=int, default=0, help="port serving the releases' error against the feed's "
                   "ground truth as /metrics (default: a free port)")
    p.add_argument("--quiet", "-q", action="store_true", help="do not print each release")
    p.set_defaults(handler=handle)


SAMPLE_TDRIVE = Path(__file__).resolve().parents[2] / "producers" / "fixtures" / "tdrive"


def demo_feed():
    """The bundled sample: a day of a few hundred Beijing taxis (T-Drive format), counted on a 4x4
    grid over the papers' bounding box in 5-minute slots (d = 16, about 15 taxis per cell)."""
    from producers.replay import MatrixFeed
    from producers.tdrive import read_tdrive

    data = read_tdrive([SAMPLE_TDRIVE], "personalized", grid=(4, 4), slot_seconds=300.0).values
    data.name = "taxi"
    return MatrixFeed(data)


def default_config(feed, args):
    """One stream over the feed; its model follows from the mechanism (a local one runs devices)."""
    from ..core.local import LocalMechanism
    from ..core.personalized import PersonalizedMechanism
    from ..core.registry import mechanisms
    from ..stream.config import parse_config

    cls = mechanisms().get(args.mechanism)
    if cls is None:
        raise UsageError(f"unknown mechanism {args.mechanism!r}")
    stream = {"name": feed.name, "model": "central", "mechanism": args.mechanism, "epsilon": args.epsilon,
              "window": args.window, "domain": feed.domain_size, "users": feed.users,
              "slot_seconds": feed.slot_seconds, "start": feed.start, "labels": list(feed.labels)}
    if issubclass(cls, LocalMechanism):
        stream["model"] = "local"
    elif issubclass(cls, PersonalizedMechanism):  # a generated mix tied to --epsilon/--window (the strictest pair)
        stream.update(model="personalized", options={"requirements": {"mix": "groups", "epsilon": args.epsilon,
                                                                      "window": args.window}})
        del stream["epsilon"], stream["window"]
    return parse_config({"app": "wevent", "report_partitions": 2, "stream_partitions": 1, "seed": 0,
                         "streams": [stream]})


def handle(args) -> int:
    from producers.replay import MatrixFeed, replay
    from ..core.data import UserValues
    from ..stream.broker import EmbeddedBroker, create_topics, free_port, resolve_bootstrap
    from ..stream.config import load_config
    from ..stream.kafka import check_feed_fits, sink_for
    from ..stream.processes import DevicesProcess, WorkerProcess, write_config
    from ..stream.subscription import Releases, format_release
    from ..stream.truth import TruthMonitor

    if args.slots is not None and args.slots < 1:
        raise UsageError("--slots must be >= 1")
    if args.speed < 0:
        raise UsageError("--speed must be >= 0")
    feed = MatrixFeed(UserValues.load(args.feed)) if args.feed else demo_feed()
    config = load_config(args.config) if args.config else default_config(feed, args)
    stream = config.stream(args.stream) if args.stream else config.streams[0]
    if stream is None:
        raise UsageError(f"the config has no stream {args.stream!r}")
    check_feed_fits(feed, stream)
    config.noise_key()
    slots = min(args.slots or feed.slots, feed.slots)
    if args.slots and args.slots > feed.slots:
        print(f"the feed has only {feed.slots} slots", file=sys.stderr)
    log = open(args.release_log, "w") if args.release_log else None

    workdir = Path(tempfile.mkdtemp(prefix="wevent-run-"))
    bootstrap = resolve_bootstrap(args.bootstrap)
    broker = None if bootstrap else EmbeddedBroker().start()
    bootstrap = bootstrap or broker.bootstrap
    children = []
    try:
        create_topics(bootstrap, config.topics())
        port = args.metrics_port or free_port()
        truth_port = args.truth_port or free_port()
        config_path = write_config(config, workdir)
        worker = WorkerProcess(config_path, bootstrap, port, workdir / "worker.log",
                               tansu_compat=broker is not None, datadir=workdir / "data").start()
        children.append(worker)
        if stream.model == "local":  # the users' devices hold the values and answer the server's requests
            values = workdir / "values.npz"
            _first_slots(feed, slots).data.save(values)
            children.append(DevicesProcess(config_path, stream.name, values, bootstrap, workdir / "devices.log",
                                           tansu_compat=broker is not None).start())
        serve_metrics(truth_port, "127.0.0.1")
        print(f"broker {bootstrap}{' (embedded tansu)' if broker else ''}; worker metrics "
              f"http://127.0.0.1:{port}/metrics; error against truth http://127.0.0.1:{truth_port}/metrics; "
              f"worker log {worker.log_path}", file=sys.stderr)
        print(f"stream {stream.name!r}: {stream.mechanism}, epsilon = {stream.epsilon:g} per window of "
              f"w = {stream.window} slots of {stream.slot_seconds:g} s; {feed.users} users, d = {stream.domain}; "
              f"replaying {slots} slots", file=sys.stderr)
        sink = sink_for(bootstrap, stream, config.report_partitions, broker is not None)
        threading.Thread(target=replay, args=(_first_slots(feed, slots), sink, 1, args.speed), daemon=True).start()
        monitor = TruthMonitor.for_stream(stream, feed)
        released = 0
        with Releases(bootstrap, streams=[stream.name]) as releases:
            while released < slots:
                for record in releases.follow(idle_timeout=1.0):
                    monitor.observe(record)
                    if log:
                        log.write(record.to_json() + "\n")
                        log.flush()
                    if not args.quiet:
                        print(format_release(record), flush=True)
                    released += 1
                    if released >= slots:
                        break
                else:  # a second without releases: fine while the processes live (they may be starting)
                    for child in children:
                        if not child.alive:
                            raise UsageError(f"{child.command[3]} stopped; its log ends with:\n{child.log_tail()}")
        if args.audit_log:
            _write_audit_log(args.audit_log, bootstrap, stream.name, slots)
        error = monitor.total / monitor.cells if monitor.cells else float("nan")
        print(f"{released} releases of stream {stream.name!r}; mean absolute error against the truth {error:.3f}"
              + (f"; written to {args.release_log}" if args.release_log else ""), file=sys.stderr)
        return 0
    finally:
        for child in children:
            child.stop()
        if broker:
            broker.stop()
        if log:
            log.close()


def _write_audit_log(path: str, bootstrap: str, stream: str, slots: int) -> None:
    """The stream's audit records of slots 1..slots (once each), from the audit topic."""
    import json

    from ..stream.subscription import read_topic

    records = {}
    for value in read_topic(bootstrap, "audit"):
        record = json.loads(value)
        if record["stream"] == stream and record["slot"] <= slots:
            records.setdefault(record["slot"], value.decode())
    with open(path, "w") as fh:
        fh.writelines(records[slot] + "\n" for slot in sorted(records))


def _first_slots(feed, slots: int):
    """The feed cut to its first ``slots`` slots."""
    from producers.replay import MatrixFeed

    from ..core.data import UserValues

    data = UserValues(np.stack([feed.values_at(t) for t in range(1, slots + 1)]), feed.domain_size, list(feed.labels),
                      list(feed.user_ids), feed.slot_seconds, feed.start, feed.name)
    return MatrixFeed(data)
