"""A fleet's answer fits in messages a broker accepts, whatever the stream's domain."""

import numpy as np

from wevent.core.data import UserValues
from wevent.core.local import Devices, Request
from wevent.core.randomness import Phase, SecretKey
from wevent.stream.wire.messages import ReportsMessage
from wevent.stream.wire.seals import report_seal
from wevent.stream.config import parse_config
from wevent.producers.device_fleet import DeviceFleet, signed_reports

KAFKA_DEFAULT_MAX_MESSAGE = 1_048_588  # bytes: a broker's message.max.bytes unless raised
USERS, DOMAIN, START = 600, 2**15, 1_201_910_400.0


def test_oue_reports_of_a_large_domain_are_split_into_messages_under_kafkas_default_limit():
    stream = parse_config({"seed": 1, "streams": [{
        "name": "wide", "model": "local", "mechanism": "lpa", "epsilon": 1.0, "window": 5, "domain": DOMAIN,
        "users": USERS, "slot_seconds": 60, "start": START, "options": {"block_size": 256}}]}).streams[0]
    values = np.random.default_rng(2).integers(0, DOMAIN, (3, USERS))
    fleet = DeviceFleet(stream, UserValues(values, DOMAIN, slot_seconds=60, start=START),
                        Devices.from_seed(1, "wide", block_size=256), new_ledger=True)
    batches = fleet.answer(Request(1, Phase.PUBLICATION, 1.0, "oue", DOMAIN + 1, USERS, None))  # and "absent"
    messages = signed_reports(batches, report_seal(SecretKey.from_seed(1, purpose="devices")))
    # 4 KiB a report: 600 of them are 2.4 MB, which no default broker takes in one message.
    assert len(messages) > 2 and max(map(len, messages)) < KAFKA_DEFAULT_MAX_MESSAGE
    users = np.concatenate([ReportsMessage.decode(m).users for m in messages])
    assert users.tolist() == list(range(USERS))
    assert all(np.asarray(b.reports).shape[1:] == (DOMAIN // 8 + 1,) for b in batches)
