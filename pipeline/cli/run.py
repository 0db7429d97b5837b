"""``wevent run``: the whole system on one machine, with live releases in the terminal.

Starts the embedded broker (unless a Kafka is configured), creates the topics, starts a worker,
replays the feed (the bundled sample by default) into ``reports`` and prints every release as it
arrives; metrics are served on the worker's web port. With ``--slots N --release-log FILE`` it
stops after N slots and writes every release as one JSON line.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from ._common import UsageError


def register(sub) -> None:
    p = sub.add_parser("run", help="run broker, worker and a feed replay; print releases live")
    p.add_argument("--config", "-c", help="stream config file; default: one central stream over the feed")
    p.add_argument("--stream", help="stream of the config that the feed is replayed into (default: the first)")
    p.add_argument("--feed", help="a .npz dump of user values to replay (default: the bundled sample feed)")
    p.add_argument("--mechanism", "-m", default="ba", help="mechanism of the default stream (default: ba)")
    p.add_argument("--epsilon", "-e", type=float, default=1.0, help="epsilon of the default stream (default: 1)")
    p.add_argument("--window", "-w", type=int, default=20, help="w of the default stream (default: 20)")
    p.add_argument("--slots", type=int, help="stop after this many slots (default: the whole feed)")
    p.add_argument("--release-log", help="write every release as one JSON line to this file")
    p.add_argument("--speed", type=float, default=300.0,
                   help="replay speed as a multiple of real time; 0 = as fast as possible (default: 300)")
    p.add_argument("--bootstrap", "-b", help="use this Kafka instead of the embedded broker (or $WEVENT_BOOTSTRAP)")
    p.add_argument("--metrics-port", type=int, default=0, help="worker web port for /metrics (default: a free port)")
    p.add_argument("--quiet", "-q", action="store_true", help="do not print each release")
    p.set_defaults(handler=handle)


def demo_feed():
    """The bundled sample feed: a synthetic grid-like stream until the T-Drive sample is wired in."""
    import numpy as np

    from ..core.data import UserValues
    from ..core.synthetic import synthetic

    data = synthetic("lns", users=2000, slots=240, seed=1)
    return UserValues(data.values().astype(np.int32), domain_size=2, labels=["0", "1"], slot_seconds=60.0,
                      start=1201910400.0, name="sample")


def default_config(feed, args):
    from ..stream.config import parse_config

    return parse_config({
        "app": "wevent",
        "report_partitions": 2,
        "stream_partitions": 1,
        "seed": 0,
        "streams": [{
            "name": feed.name, "model": "central", "mechanism": args.mechanism, "epsilon": args.epsilon,
            "window": args.window, "domain": feed.domain_size, "users": feed.users,
            "slot_seconds": feed.slot_seconds, "start": feed.start, "labels": list(feed.labels),
        }],
    })


def handle(args) -> int:
    from ..core.data import UserValues
    from ..stream.broker import EmbeddedBroker, create_topics, free_port, resolve_bootstrap
    from ..stream.config import load_config
    from ..stream.kafka import KafkaReportSink
    from ..stream.processes import WorkerProcess, write_config
    from ..stream.subscription import Releases, format_release

    if args.slots is not None and args.slots < 1:
        raise UsageError("--slots must be >= 1")
    if args.speed < 0:
        raise UsageError("--speed must be >= 0")
    feed = UserValues.load(args.feed) if args.feed else demo_feed()
    config = load_config(args.config) if args.config else default_config(feed, args)
    stream = config.stream(args.stream) if args.stream else config.streams[0]
    if stream is None:
        raise UsageError(f"the config has no stream {args.stream!r}")
    if feed.users > stream.users or feed.domain_size > stream.domain:
        raise UsageError(f"the feed ({feed.users} users, d = {feed.domain_size}) does not fit stream "
                         f"{stream.name!r} ({stream.users} users, d = {stream.domain})")
    config.noise_key()
    slots = min(args.slots or feed.slots, feed.slots)
    if args.slots and args.slots > feed.slots:
        print(f"the feed has only {feed.slots} slots", file=sys.stderr)
    log = open(args.release_log, "w") if args.release_log else None

    workdir = Path(tempfile.mkdtemp(prefix="wevent-run-"))
    bootstrap = resolve_bootstrap(args.bootstrap)
    broker = None if bootstrap else EmbeddedBroker().start()
    bootstrap = bootstrap or broker.bootstrap
    worker = None
    stop = threading.Event()
    try:
        create_topics(bootstrap, config.topics())
        port = args.metrics_port or free_port()
        worker = WorkerProcess(write_config(config, workdir), bootstrap, port, workdir / "worker.log",
                               tansu_compat=broker is not None, datadir=workdir / "data").start()
        print(f"broker {bootstrap}{' (embedded tansu)' if broker else ''}; metrics http://127.0.0.1:{port}/metrics; "
              f"worker log {worker.log_path}", file=sys.stderr)
        print(f"stream {stream.name!r}: {stream.mechanism}, epsilon = {stream.epsilon:g} per window of "
              f"w = {stream.window} slots of {stream.slot_seconds:g} s; {feed.users} users, d = {stream.domain}; "
              f"replaying {slots} slots", file=sys.stderr)
        sink = KafkaReportSink(bootstrap, stream.name, config.report_partitions, tansu_compat=broker is not None)
        replay = threading.Thread(target=_replay, args=(feed, stream, sink, slots, args.speed, stop), daemon=True)
        replay.start()
        released = 0
        with Releases(bootstrap, streams=[stream.name]) as releases:
            while released < slots:
                for record in releases.follow(idle_timeout=1.0):
                    if log:
                        log.write(record.to_json() + "\n")
                        log.flush()
                    if not args.quiet:
                        print(format_release(record), flush=True)
                    released += 1
                    if released >= slots:
                        break
                else:  # a second without releases: fine while the worker lives (it may be starting)
                    if not worker.alive:
                        raise UsageError(f"the worker stopped; its log ends with:\n{worker.log_tail()}")
        print(f"{released} releases of stream {stream.name!r}"
              + (f" written to {args.release_log}" if args.release_log else ""), file=sys.stderr)
        return 0
    finally:
        stop.set()
        if worker:
            worker.stop()
        if broker:
            broker.stop()
        if log:
            log.close()


def _replay(feed, stream, sink, slots: int, speed: float, stop: threading.Event) -> None:
    """Send slots 1..slots of the feed, paced at ``speed`` times real time."""
    import numpy as np

    users = np.arange(feed.users)
    started = time.monotonic()
    for slot in range(1, slots + 1):
        if stop.is_set():
            return
        if speed > 0:
            due = started + (slot - 1) * stream.slot_seconds / speed
            while not stop.is_set() and time.monotonic() < due:
                time.sleep(min(0.05, due - time.monotonic()))
        values = feed.values[slot - 1]
        present = values >= 0
        sink.send_slot(slot, stream.slot_start(slot), stream.slot_end(slot), users[present], values[present])
    sink.close()
