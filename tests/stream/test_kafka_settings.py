"""The TLS and SASL forms of WEVENT_KAFKA_*: what librdkafka and Faust get, and bad combinations.

The forms against a real broker are in tests/integration/test_kafka_security.py.
"""

import os

import faust
import pytest

from wevent.errors import UsageError
from wevent.stream.runtime.kafka import client_config, faust_credentials
from wevent.stream.settings import SECURITY_ENV, Settings
from tests.certificates import TestAuthority


def from_env():
    """The credentials of this process's WEVENT_KAFKA_*, as the commands read them."""
    return Settings.from_environ(os.environ).kafka_credentials()


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    authority = TestAuthority(tmp_path_factory.mktemp("tls"))
    return authority, authority.issue("client"), authority.issue("locked", b"key-pw")


@pytest.fixture
def env(monkeypatch):
    for variable in SECURITY_ENV.values():
        monkeypatch.delenv(variable, raising=False)

    def set_env(**settings):
        for name, value in settings.items():
            monkeypatch.setenv(SECURITY_ENV[name], str(value))

    return set_env


def test_nothing_set_is_plain_tcp(env):
    env()
    assert from_env() is None
    assert "security.protocol" not in client_config("k:9092", from_env())


def test_every_form_maps_to_librdkafka_and_faust(env, tls):
    authority, client, locked = tls
    ca = str(authority.ca_file)
    env(protocol="ssl", cafile=ca)  # TLS with a private CA
    credentials = from_env()
    assert credentials.librdkafka() == {"security.protocol": "SSL", "ssl.ca.location": ca}
    assert isinstance(faust_credentials(credentials), faust.SSLCredentials)

    env(certfile=locked.cert, keyfile=locked.key, key_password="key-pw")  # mutual TLS, an encrypted key
    config = client_config("k:9092", from_env())
    assert (config["ssl.certificate.location"], config["ssl.key.location"], config["ssl.key.password"]) == (
        str(locked.cert), str(locked.key), "key-pw")
    assert faust_credentials(from_env()).protocol.value == "SSL"

    env(protocol="SASL_SSL", username="alice", password="s3cret", certfile=client.cert, keyfile=client.key,
        key_password="")
    config = client_config("k:9092", from_env())
    assert (config["security.protocol"], config["sasl.mechanism"], config["sasl.username"]) == (
        "SASL_SSL", "SCRAM-SHA-512", "alice")
    assert "ssl.key.password" not in config
    credentials = faust_credentials(from_env())
    assert isinstance(credentials, faust.SASLCredentials) and credentials.protocol.value == "SASL_SSL"
    assert credentials.ssl_context is not None and credentials.password == "s3cret"


def test_sasl_without_tls(env):
    env(protocol="sasl_plaintext", mechanism="scram-sha-256", username="bob", password="pw")
    assert client_config("k:9092", from_env())["security.protocol"] == "SASL_PLAINTEXT"
    credentials = faust_credentials(from_env())
    assert credentials.protocol.value == "SASL_PLAINTEXT" and credentials.ssl_context is None
    assert credentials.mechanism.value == "SCRAM-SHA-256"


def test_a_username_alone_means_sasl_over_tls(env):
    env(username="carol", password="pw")
    assert from_env().protocol == "SASL_SSL"


@pytest.mark.parametrize("settings, named", [
    ({"protocol": "TLS"}, "WEVENT_KAFKA_SECURITY_PROTOCOL"),
    ({"protocol": "SASL_SSL"}, "WEVENT_KAFKA_USERNAME"),
    ({"username": "alice"}, "WEVENT_KAFKA_PASSWORD"),
    ({"username": "a", "password": "b", "mechanism": "GSSAPI"}, "WEVENT_KAFKA_SASL_MECHANISM"),
    ({"protocol": "SSL", "username": "a", "password": "b"}, "WEVENT_KAFKA_USERNAME"),
    ({"protocol": "PLAINTEXT", "mechanism": "PLAIN"}, "WEVENT_KAFKA_SASL_MECHANISM"),
    ({"protocol": "SASL_PLAINTEXT", "username": "a", "password": "b", "cafile": "ca"}, "WEVENT_KAFKA_SSL_CAFILE"),
    ({"cafile": "ca"}, "WEVENT_KAFKA_SSL_CAFILE"),
    ({"protocol": "SSL", "certfile": "c"}, "WEVENT_KAFKA_SSL_KEYFILE"),
    ({"protocol": "SSL", "key_password": "p"}, "WEVENT_KAFKA_SSL_KEY_PASSWORD"),
    ({"protocol": "SSL", "cafile": "/no/such/ca.pem"}, "No such file"),
])
def test_incoherent_settings_are_one_line(env, settings, named):
    env(**settings)
    with pytest.raises(UsageError, match=named) as raised:
        from_env()
    assert "\n" not in str(raised.value)


def test_unusable_files_are_one_line(env, tls, tmp_path):
    authority, client, locked = tls
    not_pem = tmp_path / "ca.pem"
    not_pem.write_text("hello\n")
    env(protocol="SSL", cafile=not_pem)
    with pytest.raises(UsageError, match="WEVENT_KAFKA_SSL_CAFILE=.*not a readable PEM file"):
        from_env()
    other = authority.issue("other")
    cases = [(client.cert, other.key, None, "KEY_VALUES_MISMATCH"),  # another certificate's key
             (locked.cert, locked.key, None, "without its password"),  # would prompt on the terminal
             (locked.cert, locked.key, "wrong", "")]
    for cert, key, password, reason in cases:
        env(cafile=authority.ca_file, certfile=cert, keyfile=key)
        if password:
            env(key_password=password)
        with pytest.raises(UsageError, match=f"WEVENT_KAFKA_SSL_CERTFILE=.*{reason}"):
            from_env()
