"""`wevent keys` prints the public keys that `wevent devices` and the workers check messages with."""

import hashlib
import secrets

import numpy as np

from wevent.cli import main
from wevent.core.data import UserValues
from wevent.core.randomness import SecretKey
from wevent.stream.wire.seals import SignatureSeal, release_seal, report_seal, request_seal


def test_keys_prints_the_public_halves_of_the_derived_signing_keys(monkeypatch, capsys):
    noise, device = secrets.token_hex(32), secrets.token_hex(32)
    monkeypatch.setenv("WEVENT_NOISE_KEY", noise)
    monkeypatch.setenv("WEVENT_DEVICE_KEY", device)
    assert main(["keys"]) == 0
    out, err = capsys.readouterr()
    printed = dict(line.split("=") for line in out.split())
    server, devices = request_seal(SecretKey.from_hex(noise)), report_seal(SecretKey.from_hex(device))
    releases = release_seal(SecretKey.from_hex(noise))
    assert printed == {"WEVENT_REQUEST_PUBLIC_KEY": server.public_hex, "WEVENT_DEVICE_PUBLIC_KEY": devices.public_hex,
                       "WEVENT_RELEASE_PUBLIC_KEY": releases.public_hex}
    tag = server.tag("ldp.requests", "s", b"request")  # what a device holding the printed key accepts
    assert SignatureSeal.from_public_hex(printed["WEVENT_REQUEST_PUBLIC_KEY"]).valid("ldp.requests", "s", b"request", tag)
    tag = releases.tag("releases", "s", b"{}")  # what a subscriber holding the printed key accepts
    assert SignatureSeal.from_public_hex(printed["WEVENT_RELEASE_PUBLIC_KEY"]).valid("releases", "s", b"{}", tag)
    assert noise not in printed.values() and device not in printed.values()
    # the fingerprint, on stderr so that `export $(wevent keys)` takes only the variables
    fingerprint = hashlib.sha256(bytes.fromhex(releases.public_hex)).hexdigest()[:16]
    assert err == f"release key fingerprint {fingerprint}\n"


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
