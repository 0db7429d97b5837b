"""`wevent keys` prints the public keys that `wevent devices` and the workers check messages with."""

import secrets

import numpy as np

from wevent.cli import main
from wevent.core.data import UserValues
from wevent.core.randomness import SecretKey
from wevent.stream.wire.seals import SignatureSeal, report_seal, request_seal


def test_keys_prints_the_public_halves_of_the_derived_signing_keys(monkeypatch, capsys):
    noise, device = secrets.token_hex(32), secrets.token_hex(32)
    monkeypatch.setenv("WEVENT_NOISE_KEY", noise)
    monkeypatch.setenv("WEVENT_DEVICE_KEY", device)
    assert main(["keys"]) == 0
    printed = dict(line.split("=") for line in capsys.readouterr().out.split())
    server, devices = request_seal(SecretKey.from_hex(noise)), report_seal(SecretKey.from_hex(device))
    assert printed == {"WEVENT_REQUEST_PUBLIC_KEY": server.public_hex, "WEVENT_DEVICE_PUBLIC_KEY": devices.public_hex}
    tag = server.tag("ldp.requests", "s", b"request")  # what a device holding the printed key accepts
    assert SignatureSeal.from_public_hex(printed["WEVENT_REQUEST_PUBLIC_KEY"]).valid("ldp.requests", "s", b"request", tag)
    assert noise not in printed.values() and device not in printed.values()


def test_keys_without_any_secret_and_devices_with_a_bad_key_are_one_line_errors(monkeypatch, capsys, tmp_path):
    monkeypatch.delenv("WEVENT_NOISE_KEY", raising=False)
    monkeypatch.delenv("WEVENT_DEVICE_KEY", raising=False)
    assert main(["keys"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    config = tmp_path / "c.json"
    config.write_text('{"streams": [{"name": "l", "model": "local", "mechanism": "lpa", "epsilon": 1, "window": 5, '
                      '"domain": 2, "users": 10, "slot_seconds": 60, "start": 0}]}')
    values = tmp_path / "v.npz"
    UserValues(np.zeros((2, 10), dtype=np.int64), 2, slot_seconds=60, start=0).save(values)
    monkeypatch.setenv("WEVENT_DEVICE_KEY", secrets.token_hex(32))
    for extra in (["--request-key", "abc"], []):  # a malformed key; no key and no server secret at hand
        assert main(["devices", "-c", str(config), "--values", str(values), "-b", "127.0.0.1:1", *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "key" in err, err
