"""Config validation, message codecs and the audit's verdicts, without a broker."""

import json
import os

import numpy as np
import pytest

from wevent.stream.audit import verify
from wevent.stream.wire.format import DecodeError
from wevent.stream.wire.reports import ReportBatch, decode_report_message
from wevent.stream.wire.messages import decode_message, decode_users, encode_users
from wevent.stream.config import ConfigError, load_config, parse_config
from wevent.stream.settings import Settings

STREAM = {"name": "s", "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 5, "domain": 4, "users": 10,
          "slot_seconds": 60, "start": "2008-02-02T00:00:00Z"}


def config(**changes):
    stream = {k: v for k, v in {**STREAM, **changes}.items() if v is not None}
    return parse_config({"seed": 1, "streams": [stream]})


@pytest.mark.parametrize("changes, fragment", [
    ({"epsilon": 0}, "epsilon must be >= 1e-290"),
    ({"epsilon": "x"}, "epsilon must be a number"),
    ({"window": 0}, "window must be >= 1"),
    ({"window": 2.5}, "window must be an integer"),
    ({"domain": None}, "missing field(s) domain"),
    ({"mechanism": "nope"}, "unknown mechanism"),
    ({"model": "quantum"}, "model must be one of"),
    ({"start": "yesterday"}, "not ISO 8601"),
    ({"colour": "red"}, "unknown field(s) colour"),
    ({"name": "a/b"}, "without '/'"),
    ({"mechanism": "pba"}, "not a central-model mechanism"),
])
def test_config_errors_name_the_stream_and_field(changes, fragment):
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        cfg = config(**changes)
        from wevent.stream.agents.processors import logic_for
        logic_for(cfg, cfg.streams[0], Settings())


def test_config_files_and_noise_keys(tmp_path, monkeypatch):
    toml = tmp_path / "c.toml"
    toml.write_text('seed = 3\n[[streams]]\nname = "s"\nmodel = "central"\nmechanism = "bd"\nepsilon = 1.0\n'
                    'window = 5\ndomain = 4\nusers = 10\nslot_seconds = 60\nstart = 1200000000\n')
    cfg = load_config(toml)
    assert cfg.streams[0].slot_of_ms(np.array([1_200_000_000_000, 1_200_000_059_999, 1_200_000_060_000])).tolist() == [1, 1, 2]
    monkeypatch.setenv("WEVENT_NOISE_KEY", "ab" * 32)
    assert bytes(Settings.from_environ(os.environ).noise_key(cfg)) == bytes.fromhex("ab" * 32)
    monkeypatch.setenv("WEVENT_NOISE_KEY", "zz")
    with pytest.raises(ConfigError, match="WEVENT_NOISE_KEY"):
        Settings.from_environ(os.environ).noise_key(cfg)
    monkeypatch.delenv("WEVENT_NOISE_KEY")
    with pytest.raises(ConfigError, match="no noise key"):
        Settings.from_environ(os.environ).noise_key(parse_config({"streams": [STREAM]}))
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.toml")
    (tmp_path / "bad.toml").write_text("streams = [")
    with pytest.raises(ConfigError):
        load_config(tmp_path / "bad.toml")


def test_report_batch_wire_format_rejects_truncation_and_garbage():
    batch = ReportBatch("s", np.array([1, 2, 3]), np.array([0, 1, 2]), np.array([5, 5, 9]))
    data = batch.encode()
    for cut in range(len(data)):
        with pytest.raises(DecodeError):
            decode_report_message(data[:cut] if cut else b"\x00")
    with pytest.raises(DecodeError):
        decode_report_message(data + b"\x00")
    for bad in (b"[1, 2]", b'{"stream": "s", "user": true, "time": 1, "value": 0}',
                b'{"stream": "s", "user": 1, "time": "now", "value": 0}', b'{"type": "watermark", "stream": "s"}'):
        with pytest.raises(DecodeError):
            decode_report_message(bad)
    back = decode_report_message(json.dumps({"stream": "s", "user": 7, "time": 1.5, "value": 2}).encode())
    assert back.users.tolist() == [7] and back.times_ms.tolist() == [1500]
    with pytest.raises(DecodeError):
        decode_message(b"WEVS1 but not really")


def test_user_sets_roundtrip_as_bitsets():
    users = np.array([0, 7, 8, 999])
    assert decode_users(encode_users(users, 1000), 1000).tolist() == users.tolist()
    assert encode_users(None, 10) is None


def central(slot, eps1, eps2, **extra):
    return {"record": "audit", "stream": "s", "slot": slot, "mechanism": "ba", "epsilon": 1.0, "window": 3,
            "eps1": eps1, "eps2": eps2, **extra}


def test_audit_names_the_offending_window_gaps_and_conflicts():
    ok = [central(i, 1 / 6, 1 / 6) for i in range(1, 10)]
    assert verify(ok)[0].ok
    over = [central(i, 1 / 6, 0.5 if i == 5 else 1 / 6) for i in range(1, 10)]
    finding = verify(over)[0]
    assert not finding.ok and "slots 3..5" in finding.message
    gap = [r for r in ok if r["slot"] != 4]
    assert "slot 4 is missing" in verify(gap)[0].message
    conflict = ok + [central(2, 1 / 6, 0.0)]
    assert not all(f.ok for f in verify(conflict))


def test_audit_checks_every_user_of_population_methods():
    def slot(i, users1, users2):
        return central(i, 0.5, 0.5, phases=[{"phase": 1, "epsilon": 1.0, "users": users1},
                                            {"phase": 2, "epsilon": 1.0, "users": users2}])

    good = [slot(i, [i % 6], [6 + i % 6]) for i in range(1, 13)]  # each user every 6 slots, w = 3
    assert verify(good)[0].ok
    bad = good[:4] + [slot(5, [3], [11])] + good[5:]  # user 3 again two slots after slot 3
    finding = verify(bad)[0]
    assert not finding.ok and "user 3" in finding.message


def test_kafka_credentials_come_from_the_environment(monkeypatch):
    """Only the mapping is testable here: tansu cannot create SCRAM users on its authenticated listener."""
    import faust

    from wevent.errors import UsageError
    from wevent.stream.runtime.kafka import consumer_config, faust_credentials, producer_config

    def from_env():
        return Settings.from_environ(os.environ).kafka_credentials()

    for name in ("WEVENT_KAFKA_USERNAME", "WEVENT_KAFKA_PASSWORD", "WEVENT_KAFKA_SASL_MECHANISM",
                 "WEVENT_KAFKA_SECURITY_PROTOCOL"):
        monkeypatch.delenv(name, raising=False)
    assert from_env() is None
    assert "sasl.username" not in producer_config("k:9092", tansu_compat=False, credentials=from_env())
    monkeypatch.setenv("WEVENT_KAFKA_USERNAME", "alice")
    monkeypatch.setenv("WEVENT_KAFKA_PASSWORD", "s3cret")
    config = consumer_config("k:9092", credentials=from_env())
    assert (config["security.protocol"], config["sasl.mechanism"], config["sasl.username"], config["sasl.password"]) == (
        "SASL_SSL", "SCRAM-SHA-512", "alice", "s3cret")
    credentials = faust_credentials(from_env())
    assert isinstance(credentials, faust.SASLCredentials) and credentials.ssl_context is not None
    assert credentials.mechanism.value == "SCRAM-SHA-512" and credentials.username == "alice"
    monkeypatch.setenv("WEVENT_KAFKA_SECURITY_PROTOCOL", "sasl_plaintext")
    monkeypatch.setenv("WEVENT_KAFKA_SASL_MECHANISM", "plain")
    assert faust_credentials(from_env()).ssl_context is None
    monkeypatch.setenv("WEVENT_KAFKA_SASL_MECHANISM", "kerberos-please")
    with pytest.raises(UsageError, match="WEVENT_KAFKA_SASL_MECHANISM"):
        from_env()


def test_truth_monitor_scores_local_releases_as_frequencies():
    from wevent.core.data import ABSENT, UserValues
    from wevent.stream.wire.records import ReleaseRecord
    from wevent.stream.runtime.truth import TruthMonitor
    from wevent.producers.replay import MatrixFeed

    feed = MatrixFeed(UserValues(np.array([[0, 1, 1, ABSENT]]), 2, start=0.0, slot_seconds=60))
    local = parse_config({"seed": 1, "streams": [{**STREAM, "model": "local", "mechanism": "lpa", "domain": 2,
                                                  "users": 4, "start": 0}]}).streams[0]
    central = parse_config({"seed": 1, "streams": [{**STREAM, "domain": 2, "users": 4, "start": 0}]}).streams[0]

    def record(values):
        return ReleaseRecord("s", 1, values, "publish", "x", 1.0, 5, 0.0, 1.0, 1.0)

    assert TruthMonitor.for_stream(local, feed).observe(record([0.25, 0.5])) == 0.0  # shares of all 4 users
    assert TruthMonitor.for_stream(central, feed).observe(record([1.0, 2.0])) == 0.0
