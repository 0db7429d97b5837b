"""A Taobao-shaped local stream (1,023,154 users, d = 117, OUE, LPA, w = 20) through the
processors in-process for 2w slots: every message on every topic and every value written to a
table stays under a stated bound, far below the broker's 1 MiB default, M2 keeps only the parts
of its mechanism's state that its head names, and the releases equal the simulation's."""

import numpy as np

from wevent.core import packing
from wevent.core.data import UserValues
from wevent.core.local import LPA
from wevent.core.local.device_reports import Devices
from wevent.core.randomness import DerivedRandomness, SecretKey
from wevent.stream.config import parse_config
from wevent.producers.device_fleet import DeviceFleet
from wevent.stream.settings import Settings
from tests.stream.harness import InProcessPipeline
from tests.stream.test_processors import START

USERS, DOMAIN, WINDOW, SEED, BLOCK = 1_023_154, 117, 20, 3, 65_536
SLOTS = 2 * WINDOW
MESSAGE_BOUND = 256 * 1024  # a packed set of every user is N / 8 = 125 KiB; OUE reports of a block below 190 KiB


class WrittenSizes(dict):
    """A table that remembers the largest value ever written to it."""

    largest = 0

    def __setitem__(self, key, value):
        self.largest = max(self.largest, len(value))
        super().__setitem__(key, value)


def test_taobao_scale_messages_stay_bounded_and_releases_equal_the_simulation():
    config = parse_config({"seed": SEED, "report_partitions": 2, "stream_partitions": 1, "streams": [{
        "name": "t", "model": "local", "mechanism": "lpa", "oracle": "oue", "epsilon": 1.0, "window": WINDOW,
        "domain": DOMAIN, "users": USERS, "slot_seconds": 60, "start": START, "options": {"block_size": BLOCK}}]})
    rng = np.random.default_rng(SEED)
    popularity = 1 / np.arange(1, DOMAIN + 1) ** 1.1  # a Zipf-like category mix, as in shopping logs
    values = rng.choice(DOMAIN, (SLOTS, USERS), p=popularity / popularity.sum()).astype(np.int8)
    stream = config.stream("t")
    fleet = DeviceFleet(stream, UserValues(values, DOMAIN, start=START, slot_seconds=60),
                        Devices(DerivedRandomness(Settings().device_key(config), "t"), block_size=BLOCK), new_ledger=True)
    pipeline = InProcessPipeline(config, {"t": fleet})
    pipeline.tables = {name: WrittenSizes() for name in pipeline.tables}
    for slot in range(1, SLOTS + 1):
        pipeline.send_slot("t", stream.slot_start(slot), stream.slot_end(slot), None, None)
        pipeline.run(now=100.0 * slot)
    largest = {topic: max(map(len, messages)) for topic, messages in pipeline.log.items()}
    assert {"ldp.requests", "ldp.reports", "audit", "releases"} <= set(largest)
    assert max(largest.values()) <= MESSAGE_BOUND, largest
    assert max(table.largest for table in pipeline.tables.values()) <= MESSAGE_BOUND
    m2 = pipeline.tables["m2"]
    parts = {key.rsplit("/", 1)[1] for key in m2 if key.startswith("t/part/")}
    assert parts and parts == packing.references(packing.unpack(m2["t"])["mechanism"])

    simulation = LPA(1.0, WINDOW, DOMAIN, USERS, oracle="oue", absent=True,  # as a stream's devices answer
                     randomness=DerivedRandomness(SecretKey.from_seed(SEED), "t"),
                     devices=Devices.from_seed(SEED, "t", block_size=BLOCK))
    expected = [simulation.step(values[t]) for t in range(SLOTS)]
    got = pipeline.releases("t")
    assert [r.release for r in got] == [e.release.tolist() for e in expected]
    assert sum(e.published for e in expected) >= 2 and fleet.refused == 0
