"""``wevent run``: the whole system on one machine, with live releases in the terminal.

Parses the options, builds the config (one stream over the feed by default) and hands the run to
:class:`~wevent.stream.runtime.local_run.LocalRun`, which starts the embedded broker (unless a Kafka is
configured), the topics, a worker, the devices of a local-model stream and the feed's replay (the
bundled sample by default), and stops them all and deletes its working directory on every exit.
This handler prints every release as it arrives; with ``--slots N --release-log FILE`` it stops
after N slots and writes every release as one JSON line (``--truth-log`` the slots' true
histograms, for ``wevent plot``). Metrics are served on the worker's web port, and the releases'
error against the feed's truth on a port of this process (loopback only).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from dataclasses import replace

from ..core.registry import mechanism_class, mechanisms
from ..producers.fixtures import TDRIVE as SAMPLE_TDRIVE
from ..stream.settings import LOOPBACK, PROPERTIES_FILE_ENV, Settings
from . import COMMANDS
from ._common import (
    UsageError,
    add_release_display,
    release_display,
    bootstrap_servers,
    epsilon_value,
    integer,
    kafka_properties_option,
    real,
    readable_file,
    seed,
    serve_metrics,
    slot_count,
    window_length,
    writable_file,
)
from ._help import add_command

PORT = integer(0, 65_535)  # 0: a free port


def stream_name(text: str) -> str:
    """A stream name as a config's (letters, digits, '.', '_', '-')."""
    from ..stream.config_kinds import SchemaError
    from ..stream.config_schema import STREAM_FIELDS

    try:
        return STREAM_FIELDS["name"].kind.check(text, "")
    except SchemaError as exc:
        raise argparse.ArgumentTypeError(str(exc).strip()) from None


def register(sub, settings: Settings) -> None:
    p = add_command(
        sub, "run", summary=COMMANDS["run"],
        description="Run the whole system on this machine: the embedded broker (or the Kafka of --bootstrap), a "
        "worker, the devices of a local-model stream and a replay of the feed (the bundled T-Drive sample by "
        "default), and print every release as it arrives. Everything started stops on exit.\n\n"
        "Each release line shows the slot, its strategy (publish: a fresh noisy release; approximate: the last "
        "release repeated, no budget spent; nullified: skipped to pay back an earlier spend, also the last release), "
        "the budget the slot spent, the window's spend against epsilon, and the largest bins by name.\n\n"
        "Exit status: 0 done; 1 internal error; 2 bad input, or the embedded broker at its memory limit; 3 the "
        "embedded broker died (its state is gone); 75 Kafka unreachable or the replay not delivered; 128+N stopped "
        "by signal N. A worker or device fleet that stops ends the run with its status (1 if it was killed).",
        examples=[("BA over the bundled taxi sample (4x4 grid cells), the first 30 slots", "wevent run --slots 30"),
                  ("a local-model stream: the devices perturb every report", "wevent run -m lpa --slots 30"),
                  ("keep the releases, the audit and the truth for `wevent audit` and `wevent plot`",
                   "wevent run --slots 60 --release-log r.jsonl --audit-log a.jsonl --truth-log t.jsonl")])
    stream = p.add_argument_group("stream (without --config, one stream over the feed)")
    stream.add_argument("--config", "-c", type=readable_file, help="stream config file; default: one stream over the "
                        "feed, with --mechanism, --epsilon and --window")
    stream.add_argument("--stream", type=stream_name, help="the stream's name (default: the feed's, taxi for the "
                        "bundled sample); with --config, the config's stream that the feed is replayed into (default: "
                        "the first). A stream keeps its parameters and key for life: new ones need a new name")
    stream.add_argument("--feed", type=readable_file, help="a .npz dump of user values to replay (`wevent replay ... "
                        "--dump`; default: the bundled sample feed)")
    stream.add_argument("--slots", type=slot_count, help="stop after this many slots (default: the whole feed)")
    stream.add_argument("--speed", type=real(0, 1e9), default=1200.0,
                        help="replay speed as a multiple of real time; 0 = as fast as possible (default: 1200, "
                        "a 5-minute slot every 0.25 s)")
    privacy = p.add_argument_group("privacy (of the default stream: not with --config)")
    privacy.add_argument("--mechanism", "-m", default=None, help="mechanism (default: ba), one of "
                         f"{', '.join(sorted(mechanisms()))}: a local-model one (lpa, ...) runs the devices too, "
                         "pbd/pba get a generated requirement mix tied to --epsilon and --window")
    privacy.add_argument("--epsilon", "-e", type=epsilon_value, default=None, help="epsilon per window (default: 1)")
    privacy.add_argument("--window", "-w", type=window_length, default=None, help="w, in slots (default: 20)")
    privacy.add_argument("--seed", type=seed, help="derive the keys from this seed, for reproducible "
                         "experiments only: anyone who knows it can remove the noise (default: the config's seed; "
                         "without one, $WEVENT_NOISE_KEY and $WEVENT_DEVICE_KEY, else fresh random keys)")
    output = p.add_argument_group("output")
    output.add_argument("--quiet", "-q", action="store_true", help="do not print each release")
    add_release_display(output)
    output.add_argument("--release-log", type=writable_file, help="write every release as one JSON line to this file "
                        "(as published: no post-processing)")
    output.add_argument("--audit-log", type=writable_file,
                        help="write every audit record (who was charged what) as one JSON line to this file")
    output.add_argument("--truth-log", type=writable_file,
                        help="write every released slot's true histogram from the feed as one JSON line to this file, "
                        "for `wevent plot --truth`: the users' raw data, written only here, on this machine")
    kafka = p.add_argument_group("Kafka and ports")
    kafka.add_argument("--bootstrap", "-b", type=bootstrap_servers,
                       help="use this Kafka instead of the embedded broker (or $WEVENT_BOOTSTRAP)")
    kafka_properties_option(kafka)
    kafka.add_argument("--metrics-port", type=PORT, default=0,
                       help="worker web port for /metrics (default: a free port)")
    kafka.add_argument("--truth-port", type=PORT, default=0, help="port serving the releases' error against the "
                       f"feed's ground truth as /metrics, on {LOOPBACK} only (default: a free port)")
    p.set_defaults(handler=handle)


def demo_feed():
    """The bundled sample: a day of a few hundred Beijing taxis (T-Drive format), counted on a 4x4
    grid over the papers' bounding box in 5-minute slots (d = 16, about 15 taxis per cell)."""
    from wevent.producers.replay import MatrixFeed
    from wevent.producers.tdrive import read_tdrive

    data = read_tdrive([SAMPLE_TDRIVE], "personalized", grid=(4, 4), slot_seconds=300.0).values
    data.name = "taxi"
    return MatrixFeed(data)


def default_config(feed, args):
    """One stream over the feed; its model follows from the mechanism (a local one runs devices)."""
    from ..stream.config import parse_config

    model = mechanism_class(args.mechanism).model
    stream = {"name": args.stream or feed.name, "model": model, "mechanism": args.mechanism, "epsilon": args.epsilon,
              "window": args.window, "domain": feed.domain_size, "users": feed.users,
              "slot_seconds": feed.slot_seconds, "start": feed.start, "labels": list(feed.labels)}
    if model == "personalized":  # a generated mix tied to --epsilon/--window (the strictest pair)
        stream["options"] = {"requirements": {"mix": "groups", "epsilon": args.epsilon, "window": args.window}}
        del stream["epsilon"], stream["window"]
    return parse_config({"app": "wevent", "report_partitions": 2, "stream_partitions": 1, "streams": [stream]})


def describe(stream, feed, slots: int) -> str:
    budget = (f"epsilon = {stream.epsilon:g} per window of w = {stream.window} slots" if stream.epsilon is not None
              else "every user's own (w_i, epsilon_i)")
    return (f"stream {stream.name!r}: {stream.mechanism}, {budget}, slots of {stream.slot_seconds:g} s; "
            f"{feed.users} users, d = {stream.domain}; replaying {slots} slots")


# The default stream's settings: a config's stream has its own, so they do not go with --config.
DEFAULT_STREAM = {"mechanism": "ba", "epsilon": 1.0, "window": 20}


def default_stream_settings(args) -> None:
    """Refuse --mechanism, --epsilon and --window with --config (they would be ignored), else fill in their
    defaults."""
    for name, default in DEFAULT_STREAM.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
        elif args.config:
            raise UsageError(f"--{name} sets the default stream's {name}: with --config, the config's stream has its "
                             f"own (leave --{name} out, or change it in {args.config})")


def check_stream(config, stream) -> None:
    """Build ``stream``'s mechanism now, as its worker will: what its parameters refuse (too few users for
    population division, a requirements file that is not one, ...) stops the run before anything starts.
    The key given is a placeholder: it draws nothing, and keys do not change what is refused."""
    from ..stream.agents.processors import logic_for

    logic_for(config, stream, Settings(noise_key_hex="00" * 32))


def handle(args) -> int:
    from wevent.producers.replay import MatrixFeed, first_slots, replay
    from ..core.data import UserValues
    from ..stream.runtime.broker import free_port
    from ..stream.config import load_config
    from ..stream.runtime.kafka import check_feed_fits
    from ..stream.runtime.local_run import Failed, LocalRun, Stopped, StreamConflict, run_keys

    default_stream_settings(args)
    if not args.config:
        mechanism_class(args.mechanism)
    feed = MatrixFeed(UserValues.load(args.feed)) if args.feed else demo_feed()
    config = load_config(args.config) if args.config else default_config(feed, args)
    stream = config.stream(args.stream) if args.stream and args.config else config.streams[0]
    if stream is None:
        raise UsageError(f"the config has no stream {args.stream!r}")
    check_feed_fits(feed, stream)
    check_stream(config, stream)
    display = release_display(args, {stream.name: stream.labels}, "--quiet" if args.quiet else None)
    settings = args.settings
    bootstrap = settings.kafka_bootstrap(args.bootstrap)
    keys = run_keys(config, args.seed, settings, devices=stream.model == "local", external_kafka=bootstrap is not None)
    if args.kafka_properties:  # the worker and the devices read it as every command does
        path = {PROPERTIES_FILE_ENV: os.path.abspath(args.kafka_properties)}
        keys = replace(keys, worker={**keys.worker, **path}, devices={**keys.devices, **path} if keys.devices else {})
    if keys.from_seed:
        print(f"wevent run: seed {keys.seed}: reproducible noise for experiments only, anyone who knows the seed "
              f"can remove it (without a seed, keys are drawn at random or read from {' and '.join(keys.from_seed)})",
              file=sys.stderr)
    slots = min(args.slots or feed.slots, feed.slots)
    if args.slots and args.slots > feed.slots:
        print(f"the feed has only {feed.slots} slots", file=sys.stderr)

    run = LocalRun(config, stream, feed, first_slots(feed, slots), keys, settings, replay=replay, bootstrap=bootstrap,
                   metrics_port=args.metrics_port or free_port(), speed=args.speed)
    try:
        run.open()
        return _follow(args, run, args.truth_port or free_port(), display)
    except StreamConflict as conflict:
        new_name = f"give the stream a new name in {args.config}" if args.config else "pass --stream NAME"
        raise UsageError(f"{conflict}; to start a new stream, {new_name}") from None
    except Stopped as stop:
        print(f"wevent run: {stop}: stopping", file=sys.stderr)
        return 128 + stop.signum
    except Failed as failure:
        print(f"wevent run: failed: {failure}", file=sys.stderr)
        return failure.status
    finally:
        run.close()


def _follow(args, run, truth_port: int, display) -> int:
    """Start the run, report where to look, and print (or log) its releases as they come."""
    from ..stream.runtime.subscription import RELEASE_LEGEND

    run.start_processes()
    serve_metrics(truth_port, LOOPBACK)  # the error against the truth is a function of raw data
    print(f"broker {run.bootstrap}{' (embedded tansu)' if run.embedded else ''}; worker metrics "
          f"http://127.0.0.1:{run.metrics_port}/metrics; error against truth http://{LOOPBACK}:{truth_port}/metrics; "
          f"worker log {run.worker.log_path} (deleted on exit)", file=sys.stderr)
    print(describe(run.stream, run.feed, run.slots), file=sys.stderr)
    print(f"releases are signed with release public key {run.made_with.key.public_hex} (fingerprint "
          f"{run.made_with.key.fingerprint}): `wevent audit --release-key` and `wevent subscribe --release-key` "
          "verify with it", file=sys.stderr)
    print(f"follow it from another terminal: {run.subscribe_command}", file=sys.stderr)
    if run.continues is not None:
        print(f"stream {run.stream.name!r} exists, released up to slot {run.continues} with these parameters and "
              "key: this run continues it", file=sys.stderr)
    if not args.quiet:
        print(RELEASE_LEGEND, file=sys.stderr)
    run.start_replay()
    with (open(args.release_log, "w") if args.release_log else contextlib.nullcontext() as log,
          open(args.truth_log, "w") if args.truth_log else contextlib.nullcontext() as truth_log):
        for record, message in run.releases():
            if log:  # as published, signed: `wevent audit` verifies the log
                log.write(message.decode() + "\n")
                log.flush()
            if truth_log:
                _write_truth(truth_log, run, record)
            if not args.quiet:
                print(display.line(record), flush=True)
    if args.audit_log:
        run.write_audit_log(args.audit_log)
    dropped = f"; {run.published.summary()} on releases" if run.published.dropped else ""
    print(f"{run.released} releases of stream {run.stream.name!r}, verified under release key "
          f"{run.made_with.key.fingerprint}{dropped}; mean absolute error against the truth {run.mean_error:.3f}"
          + (f"; written to {args.release_log}" if args.release_log else ""), file=sys.stderr)
    return 0


def _write_truth(log, run, record) -> None:
    """The slot's true histogram, as the run scores the release against it (the line `wevent plot` reads)."""
    import json

    truth = run.monitor.truth(record.slot, len(record.release))
    if truth is not None:
        log.write(json.dumps({"record": "truth", "stream": record.stream, "slot": record.slot,
                              "truth": truth.tolist()}) + "\n")
        log.flush()
