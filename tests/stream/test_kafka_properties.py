"""Any Kafka client property: the properties file, the config's table, their precedence, what each
client stack gets, and the one-line refusals.

Against a real broker: tests/integration/test_kafka_properties.py.
"""

from __future__ import annotations

import pytest

from wevent.errors import UsageError
from wevent.stream.config import ConfigError, parse_config
from wevent.stream.kafka_properties import KafkaCredentials, normalise, parse_properties, read_properties
from wevent.stream.runtime.kafka import client_config, consumer_config, faust_options, producer_config
from wevent.stream.settings import PROPERTIES_FILE_ENV, Settings
from tests.certificates import TestAuthority

STREAM = {"name": "s", "model": "central", "mechanism": "ba", "epsilon": 1.0, "window": 5, "domain": 4,
          "users": 10, "slot_seconds": 60, "start": 0}
CONFLUENT_CLOUD = """\
# Required connection configs for Kafka producer, consumer, and admin
bootstrap.servers=pkc-00000.europe-west1.gcp.confluent.cloud:9092
security.protocol=SASL_SSL
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username='ABCDEF' \\
    password='s3cr=t;x';
sasl.mechanism=PLAIN
# Required for correctness in Apache Kafka clients prior to 2.6
client.dns.lookup=use_all_dns_ips
# Best practice for higher availability in Apache Kafka clients prior to 3.0
session.timeout.ms=45000
# Best practice for Kafka producer to prevent data loss
acks=all
"""


def credentials_of(text: str | None = None, env: dict | None = None, config: dict | None = None, path="client.properties"):
    return KafkaCredentials.parse(env or {}, (path, parse_properties(text)) if text is not None else None, config)


def one_line(call, match: str) -> str:
    with pytest.raises(UsageError, match=match) as raised:
        call()
    assert "\n" not in str(raised.value)
    return str(raised.value)


# --- the file -------------------------------------------------------------------------------------
def test_java_properties_syntax():
    text = ("! a comment\n  # another\n\nplain=1\nspaced : 2\nbare 3\nempty=\nescaped\\ key=a\\=b\\:c\\\\\n"
            "unicode=caf\\u00e9\ncontinued=one, \\\n    two\nlater=first\nlater=second\r\nwindows=1\r\n")
    assert parse_properties(text) == {"plain": "1", "spaced": "2", "bare": "3", "empty": "", "escaped key": "a=b:c\\",
                                      "unicode": "café", "continued": "one, two", "later": "second", "windows": "1"}


def test_a_file_that_cannot_be_read_is_one_line(tmp_path):
    one_line(lambda: read_properties(tmp_path / "missing.properties"), "cannot read .*missing.properties")
    latin = tmp_path / "latin.properties"
    latin.write_bytes(b"client.id=caf\xe9\n")
    one_line(lambda: read_properties(latin), "not UTF-8")
    broken = tmp_path / "broken.properties"
    broken.write_text("client.id=\\u12\n")
    one_line(lambda: read_properties(broken), "malformed")


def test_a_managed_kafka_file_as_its_provider_hands_it_out():
    credentials = credentials_of(CONFLUENT_CLOUD)
    assert credentials.librdkafka() == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "ABCDEF",
        "sasl.password": "s3cr=t;x", "client.dns.lookup": "use_all_dns_ips", "session.timeout.ms": "45000",
        "acks": "all"}
    assert credentials.label("sasl.password") == "sasl.jaas.config (client.properties)"
    options = faust_options(credentials)  # a worker honours every line of it
    assert options["broker_session_timeout"] == 45.0 and options["producer_acks"] == -1
    faust = options["broker_credentials"]
    assert (faust.username, faust.password, faust.mechanism.value, faust.protocol.value) == (
        "ABCDEF", "s3cr=t;x", "PLAIN", "SASL_SSL")


def test_the_file_names_the_kafka_after_the_flag_and_the_variable(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text(CONFLUENT_CLOUD)
    settings = Settings.from_environ({PROPERTIES_FILE_ENV: str(path)})
    assert settings.kafka_bootstrap(None) == "pkc-00000.europe-west1.gcp.confluent.cloud:9092"
    assert settings.kafka_bootstrap("k:9092") == "k:9092"
    assert Settings.from_environ({PROPERTIES_FILE_ENV: str(path), "WEVENT_BOOTSTRAP": "e:9092"}).kafka_bootstrap(None) \
        == "e:9092"
    assert "bootstrap.servers" not in settings.kafka_credentials().properties  # the servers come from kafka_bootstrap
    other = tmp_path / "other.properties"
    other.write_text("client.id=from-the-flag\n")
    assert settings.with_kafka_properties(str(other)).kafka_credentials().librdkafka() == {
        "client.id": "from-the-flag", "security.protocol": "PLAINTEXT"}
    assert Settings().with_kafka_properties(None).kafka_credentials() is None


# --- precedence -------------------------------------------------------------------------------------
def test_variables_win_over_the_file_which_wins_over_the_config():
    config = parse_config({"kafka_properties": {"client.id": "from-config", "session.timeout.ms": 30000,
                                                "check.crcs": False}, "streams": [STREAM]})
    file = "client.id=from-file\nsecurity.protocol=SASL_PLAINTEXT\nsasl.username=file-user\nsasl.password=pw\n"
    credentials = KafkaCredentials.parse({"username": "env-user"}, ("f.properties", parse_properties(file)),
                                         config.kafka_properties)
    assert credentials.librdkafka() == {
        "client.id": "from-file", "session.timeout.ms": "30000", "check.crcs": "false", "security.protocol":
        "SASL_PLAINTEXT", "sasl.username": "env-user", "sasl.password": "pw", "sasl.mechanism": "SCRAM-SHA-512"}
    assert [credentials.label(n) for n in ("sasl.username", "sasl.password", "session.timeout.ms")] == [
        "WEVENT_KAFKA_USERNAME", "sasl.password (f.properties)", "session.timeout.ms (the config's kafka_properties)"]


def test_the_users_properties_win_over_the_clients_defaults_but_not_over_wevents_own():
    credentials = credentials_of("linger.ms=50\ncompression.type=zstd\nsession.timeout.ms=45000\nlog_level=6\n")
    producer = producer_config("k:9092", tansu_compat=False, credentials=credentials)
    assert (producer["linger.ms"], producer["compression.type"], producer["partitioner"]) == ("50", "zstd",
                                                                                           "murmur2_random")
    consumer = consumer_config("k:9092", group="g", credentials=credentials)
    assert (consumer["session.timeout.ms"], consumer["group.id"], consumer["log_level"]) == ("45000", "g", "6")
    assert client_config("k:9092", credentials)["bootstrap.servers"] == "k:9092"


# --- Java's forms -------------------------------------------------------------------------------------
def test_java_forms_become_librdkafkas(tmp_path):
    authority = TestAuthority(tmp_path)
    issued = authority.issue("client")
    text = (f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={authority.ca_file}\n"
            f"ssl.keystore.type=PEM\nssl.keystore.location={issued.bundle}\nssl.endpoint.identification.algorithm=\n")
    credentials = credentials_of(text)
    assert credentials.librdkafka() == {"security.protocol": "SSL", "ssl.ca.location": str(authority.ca_file),
                                        "ssl.certificate.location": str(issued.bundle),
                                        "ssl.key.location": str(issued.bundle),
                                        "ssl.endpoint.identification.algorithm": "none"}
    context = credentials.ssl_context()
    assert context.check_hostname is False and context.verify_mode.name == "CERT_REQUIRED"
    scram = normalise({"sasl.mechanisms": "SCRAM-SHA-256", "sasl.jaas.config":
                       'org.apache.kafka.common.security.scram.ScramLoginModule required username="u\\"1" '
                       'password="p w";'}, "f")
    assert {k: v.value for k, v in scram.items()} == {"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": 'u"1',
                                                      "sasl.password": "p w"}


def test_a_pkcs12_key_store_is_librdkafkas_alone():
    given = normalise({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/k.p12",
                       "ssl.keystore.password": "pw"}, "f")
    assert {k: v.value for k, v in given.items()} == {"ssl.keystore.location": "/k.p12", "ssl.keystore.password": "pw"}
    credentials = credentials_of("security.protocol=SSL\nssl.keystore.location=/k.p12\nssl.keystore.password=pw\n")
    refused = one_line(lambda: faust_options(credentials), "cannot honour ssl.keystore")
    assert "pw" not in refused  # a secret's value is never shown


@pytest.mark.parametrize("properties, match", [
    ({"group.id": "mine"}, r"group.id \(f\) is set by wevent itself"),
    ({"enable.auto.commit": "true"}, "enable.auto.commit"),
    ({"partitioner.class": "x"}, "partitioner.class"),
    ({"message.timeout.ms": "1"}, "delivery timeouts"),
    ({"metadata.broker.list": "k:9092"}, "--bootstrap"),
    ({"sasl.mechanism": "PLAIN", "sasl.mechanisms": "PLAIN"}, "gives sasl.mechanism twice"),
    ({"sasl.username": "a", "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
      "username='b' password='c';"}, "gives sasl.username twice"),
    ({"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;"}, "Krb5LoginModule"),
    ({"sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required user='b';"},
     "option user of PlainLoginModule"),
    ({"sasl.jaas.config": "nonsense"}, "required key"),
    ({"ssl.truststore.location": "/t.jks"}, "JKS, Java's default type"),
    ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "/k.jks"}, "a JKS key store"),
    ({"ssl.truststore.type": "PEM", "ssl.truststore.location": "/t.pem", "ssl.truststore.password": "x"},
     "has no password"),
    ({"sasl.login.callback.handler.class": "com.example.Mine"}, "com.example.Mine"),
])
def test_what_neither_client_takes_is_one_line_naming_it(properties, match):
    one_line(lambda: normalise(properties, "f"), match)


# --- coherence ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, env, match", [
    ("security.protocol=SSL\nsasl.username=a\nsasl.password=b\n", {},
     r"sasl.username \(client.properties\) is set but security.protocol \(client.properties\)=SSL has no SASL"),
    ("sasl.mechanism=OAUTHBEARER\nsecurity.protocol=SASL_SSL\n", {}, "needs sasl.oauthbearer.token.endpoint.url"),
    ("sasl.oauthbearer.client.id=c\nsasl.oauthbearer.client.secret=s\n"
     "sasl.oauthbearer.token.endpoint.url=ftp://idp/token\n", {}, "http:// or https:// URL"),
    ("sasl.oauthbearer.method=default\nsasl.mechanism=OAUTHBEARER\nsecurity.protocol=SASL_PLAINTEXT\n", {},
     "must be oidc"),
    ("sasl.oauthbearer.client.id=c\n", {"username": "u", "password": "p"}, "WEVENT_KAFKA_USERNAME is set but sasl.mechanism=OAUTHBEARER"),
    ("sasl.oauthbearer.client.id=c\nsasl.mechanism=PLAIN\nsasl.username=u\nsasl.password=p\n", {},
     "is not OAUTHBEARER"),
    ("", {"mechanism": "OAUTHBEARER", "username": "u", "password": "p"}, "goes in the properties file"),
    ("ssl.ca.location=/ca.pem\n", {}, "has no TLS"),
])
def test_incoherent_properties_are_one_line(text, env, match):
    one_line(lambda: credentials_of(text, env), match)


def test_oauthbearer_from_the_java_login_module():
    text = ("security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n"
            "sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer."
            "OAuthBearerLoginCallbackHandler\nsasl.oauthbearer.token.endpoint.url=https://idp.example/token\n"
            "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            "clientId='wevent' clientSecret='s3cret' scope='kafka' extension_logicalCluster='lkc-1';\n")
    credentials = credentials_of(text)
    assert credentials.oauthbearer
    assert credentials.librdkafka() == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token", "sasl.oauthbearer.client.id": "wevent",
        "sasl.oauthbearer.client.secret": "s3cret", "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.extensions": "logicalCluster=lkc-1"}
    faust = faust_options(credentials)["broker_credentials"]
    assert (faust.mechanism.value, faust.protocol.value) == ("OAUTHBEARER", "SASL_SSL")
    assert faust.oauth_cb.extensions() == {"logicalCluster": "lkc-1"} and faust.oauth_cb.scope == "kafka"


# --- the worker's clients --------------------------------------------------------------------------------
def test_a_worker_maps_what_aiokafka_honours():
    text = ("client.id=wevent-eu\nrequest.timeout.ms=60000\nheartbeat.interval.ms=2000\nmax.poll.interval.ms=300000\n"
            "max.poll.records=100\nmax.partition.fetch.bytes=2097152\nmetadata.max.age.ms=60000\n"
            "connections.max.idle.ms=540000\ncheck.crcs=false\nlinger.ms=20\nbatch.size=65536\n"
            "message.max.bytes=2000000\ncompression.type=gzip\n")
    options = faust_options(credentials_of(text))
    assert options == {
        "broker_credentials": None, "broker_client_id": "wevent-eu", "broker_request_timeout": 60.0,
        "producer_request_timeout": 60.0, "broker_heartbeat_interval": 2.0, "broker_max_poll_interval": 300.0,
        "broker_max_poll_records": 100, "consumer_max_fetch_size": 2097152, "consumer_metadata_max_age_ms": 60000,
        "producer_metadata_max_age_ms": 60000, "consumer_connections_max_idle_ms": 540000,
        "producer_connections_max_idle_ms": 540000, "broker_check_crcs": False, "producer_linger": 0.02,
        "producer_max_batch_size": 65536, "producer_max_request_size": 2000000, "producer_compression_type": "gzip"}
    assert faust_options(None) == {}


@pytest.mark.parametrize("text, guarantee, match", [
    ("socket.keepalive.enable=true\n", False, r"socket.keepalive.enable \(client.properties\): a worker's Kafka "
                                              "clients .* cannot honour socket.keepalive.enable=true"),
    ("client.dns.lookup=resolve_canonical_bootstrap_servers_only\n", False, "client.dns.lookup"),
    ("enable.ssl.certificate.verification=false\n", False, "cannot honour"),
    ("acks=2\n", False, "'2' is not a value of acks"),
    ("session.timeout.ms=soon\n", False, "'soon' is not a value"),
    ("acks=1\n", True, "exactly_once.* needs acks=all"),
])
def test_a_worker_refuses_what_aiokafka_cannot_honour(text, guarantee, match):
    one_line(lambda: faust_options(credentials_of(text), exactly_once=guarantee), match)


def test_tansu_batches_hold_one_record_whatever_batch_size_says():
    one_line(lambda: faust_options(credentials_of("batch.size=65536\n"), tansu_compat=True), "one record per batch")


def test_a_worker_refuses_before_it_connects(tmp_path):
    """`wevent worker` with a property aiokafka cannot honour: one line, exit 2, and no attempt to
    reach the Kafka it is given (a port nothing listens on would say "cannot reach")."""
    import subprocess
    import sys

    from wevent.stream.runtime.broker import free_port
    from wevent.stream.runtime.child_processes import write_config

    properties = tmp_path / "client.properties"
    properties.write_text("client.id=w\nsocket.keepalive.enable=true\n")
    config = write_config(parse_config({"seed": 1, "streams": [STREAM]}), tmp_path)
    done = subprocess.run([sys.executable, "-m", "wevent.cli", "worker", "--config", str(config), "--bootstrap",
                           f"127.0.0.1:{free_port()}", "--kafka-properties", str(properties)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "socket.keepalive.enable" in done.stderr and "cannot reach" not in done.stderr


# --- the config's table ----------------------------------------------------------------------------------
@pytest.mark.parametrize("properties, match", [
    ({"sasl.password": "x"}, "sasl.password is a secret"),
    ({"sasl.oauthbearer.client.secret": "x"}, "is a secret"),
    ({"sasl.jaas.config": "x"}, "is a secret"),
    ({"client.id": ["a"]}, "must be a string, a number or a boolean"),
    ({"client id": "a"}, "a Kafka property name"),
    ({"client.id": "a\nb"}, "control characters"),
])
def test_the_config_table_is_checked_by_the_schema(properties, match):
    with pytest.raises(ConfigError, match=match):
        parse_config({"kafka_properties": properties, "streams": [STREAM]})


def test_the_config_table_reaches_every_client_and_is_checked_when_one_is_made():
    config = parse_config({"kafka_properties": {"client.id": "eu", "request.timeout.ms": 60000}, "streams": [STREAM]})
    assert client_config("k:9092", Settings().kafka_credentials(config))["client.id"] == "eu"
    reserved = parse_config({"kafka_properties": {"group.id": "mine"}, "streams": [STREAM]})
    one_line(lambda: Settings().kafka_credentials(reserved), r"group.id \(the config's kafka_properties\)")


# --- OAUTHBEARER tokens for the worker's clients ------------------------------------------------------
def test_tokens_are_fetched_once_and_renewed_after_most_of_their_lifetime():
    import asyncio
    import time

    from wevent.stream.runtime.oauth import REFRESH_AT, ClientCredentialsTokens, _expiry
    from tests.integration.oidc_endpoint import TokenEndpoint, unsecured_jws

    now = [0.0]
    with TokenEndpoint({"w": "s&cret=1"}, lifetime=100) as endpoint:
        tokens = ClientCredentialsTokens(endpoint.url, "w", "s&cret=1", scope="kafka", clock=lambda: now[0])
        first = asyncio.run(tokens.token())
        now[0] = 100 * REFRESH_AT - 1
        assert tokens.current() == first and endpoint.requests == {"w": 1}
        now[0] = 100 * REFRESH_AT
        tokens.current()
        assert endpoint.requests == {"w": 2}
    assert abs(_expiry(unsecured_jws("w", 60)) - time.time() - 60) < 2  # a token without expires_in: its exp


def test_a_token_endpoint_that_refuses_or_is_not_there_is_one_line():
    from wevent.stream.runtime.broker import free_port
    from wevent.stream.runtime.oauth import ClientCredentialsTokens, TokenError
    from tests.integration.oidc_endpoint import TokenEndpoint

    with TokenEndpoint({"w": "right"}) as endpoint:
        with pytest.raises(TokenError, match=r"refused client 'w': HTTP 401 \(invalid_client: bad client") as refused:
            ClientCredentialsTokens(endpoint.url, "w", "wrong").check()
    assert "wrong" not in str(refused.value)
    with pytest.raises(TokenError, match="cannot reach the OAUTHBEARER token endpoint"):
        ClientCredentialsTokens(f"http://127.0.0.1:{free_port()}/token", "w", "s").check()
