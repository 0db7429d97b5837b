"""One local stream, ``kept``, served by a real `wevent devices` process that tests drive with
requests they sign themselves (as the server would), to watch its ledger, answers and commits;
and a fleet process serving several streams of a config (:func:`fleet_of_streams`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wevent.core.data import UserValues
from wevent.stream.runtime.broker import create_topics
from wevent.stream.wire.messages import ReportsMessage, decode_message, pack_message
from wevent.stream.wire.seals import request_seal, seal
from wevent.stream.config import AppConfig, parse_config
from wevent.stream.runtime.kafka import consumer_config, producer_config
from wevent.stream.runtime.child_processes import ChildProcess, DevicesProcess, write_config
from wevent.stream.runtime.subscription import read_topic
from wevent.stream.settings import Settings
from tests.integration.test_central_pipeline import START, categorical_feed

DOMAIN, WINDOW = 4, 10
GROUP = "wevent-devices-kept-0of1"  # the consumer group `wevent devices` joins for shard 0/1 of "kept"


def answers(bootstrap) -> dict[tuple[int, int], list[bytes]]:
    """The messages on ldp.reports by (slot, phase), as sent."""
    found: dict[tuple[int, int], list[bytes]] = {}
    for value in read_topic(bootstrap, "ldp.reports"):
        message = decode_message(value)
        if isinstance(message, ReportsMessage):
            found.setdefault((message.slot, message.phase), []).append(value)
    return found


def committed(bootstrap, group: str = GROUP) -> int:
    """The fleet's committed offset on ldp.requests (what a restarted fleet resumes from; 0 when none)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(consumer_config(bootstrap, group=group))
    try:
        return max(consumer.committed([TopicPartition("ldp.requests", 0)], timeout=10)[0].offset, 0)
    finally:
        consumer.close()


@dataclass
class KeptStream:
    """The stream, its values dump and ledger directory, and a producer of signed requests."""

    config: AppConfig
    bootstrap: str
    tansu_compat: bool
    directory: Path
    users: int
    sent: int = 0

    @property
    def ledger(self) -> Path:
        return self.directory / "ledger"

    def start_fleet(self, n: int) -> DevicesProcess:
        """The fleet's ``n``-th start: its first (0) begins the ledger, a restart must find it."""
        return DevicesProcess(write_config(self.config, self.directory), "kept", self.directory / "values.npz",
                              self.bootstrap, self.directory / f"devices{n}.log", tansu_compat=self.tansu_compat,
                              new_ledger=n == 0, ledger_dir=self.ledger).start()

    def ask(self, slot: int, phase: int, users, epsilon: float) -> None:
        """Send a GRR request signed with the server's key, as M2 would."""
        from confluent_kafka import Producer

        request = {"stream": "kept", "slot": slot, "phase": phase, "epsilon": epsilon, "oracle": "grr",
                   "domain_size": DOMAIN + 1, "population": self.users,  # the values and the devices' "absent"
                   "users": np.asarray(users, dtype=np.int64),
                   "bound": None}
        signed = seal("ldp.requests", "kept", pack_message("request", request),
                      request_seal(Settings().noise_key(self.config)))
        producer = Producer(producer_config(self.bootstrap, self.tansu_compat))
        producer.produce("ldp.requests", signed, key=b"kept")
        producer.flush()
        self.sent += 1


def kept_stream(broker, directory: Path, users: int, slots: int) -> KeptStream:
    """Topics on ``broker``, a values dump of ``users`` x ``slots`` categorical values, and the stream's config."""
    bootstrap = broker.bootstrap
    config = parse_config({"seed": 5, "report_partitions": 1, "stream_partitions": 1, "streams": [{
        "name": "kept", "model": "local", "mechanism": "lpa", "epsilon": 1.0, "window": WINDOW, "domain": DOMAIN,
        "users": users, "slot_seconds": 60, "start": START, "options": {"block_size": 64}}]})
    create_topics(bootstrap, config.topics())
    UserValues(categorical_feed(users=users, slots=slots, domain=DOMAIN, seed=6), DOMAIN, slot_seconds=60,
               start=START).save(directory / "values.npz")
    return KeptStream(config, bootstrap, broker.tansu_compat, directory, users)


def fleet_of_streams(config_path: Path, dumps: dict[str, Path], bootstrap: str, directory: Path, shard: int,
                     shards: int, tansu_compat: bool) -> ChildProcess:
    """One `wevent devices` process serving every stream of ``dumps`` (stream -> its values) for one shard."""
    arguments = ["devices", "--config", str(config_path), "--bootstrap", bootstrap, "--shard", f"{shard}/{shards}",
                 "--ledger-dir", str(directory / "ledger"), "--new-ledger", *(["--tansu-compat"] if tansu_compat else [])]
    for stream, dump in dumps.items():
        arguments += ["--stream", stream, "--values", str(dump)]
    return ChildProcess(arguments, directory / f"devices-{shard}of{shards}.log").start()
