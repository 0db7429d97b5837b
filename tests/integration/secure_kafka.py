"""An Apache Kafka with TLS, SASL/SCRAM-SHA-512 and ACLs, and the wevent roles' grants on it.

Listeners (one node, loopback): ``MTLS`` (TLS with client certificates required; also the
inter-broker listener), ``SASL_SSL`` and ``SASL_PLAINTEXT`` (SCRAM-SHA-512); the KRaft controller
listener is TLS with client certificates too. Certificates come from a CA the test makes. The
principals ``User:CN=broker`` and ``User:CN=admin`` are super users; every other principal may do
only what its ACLs grant (StandardAuthorizer, no ACL means no access).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from wevent.stream.runtime.apache_kafka import KafkaCluster
from wevent.stream.runtime.broker import ask_again
from tests.certificates import TestAuthority

PASSWORD = "pw-{}-9f3c"  # SCRAM passwords per user
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
SECURITY_VARIABLES = ("WEVENT_KAFKA_SECURITY_PROTOCOL", "WEVENT_KAFKA_SASL_MECHANISM", "WEVENT_KAFKA_USERNAME",
                      "WEVENT_KAFKA_PASSWORD", "WEVENT_KAFKA_SSL_CAFILE", "WEVENT_KAFKA_SSL_CERTFILE",
                      "WEVENT_KAFKA_SSL_KEYFILE", "WEVENT_KAFKA_SSL_KEY_PASSWORD")

# What each role may do: (resource type, name, pattern, operations). The worker's consumer group
# and topics are named after its app ("wevent"): Faust's changelog topics are "wevent-<table>-changelog".
WORKER_READS = ("reports", "slots", "dissimilarity", "releases", "ldp.requests", "ldp.reports")
WORKER_WRITES = ("slots", "dissimilarity", "releases", "audit", "deadletter", "ldp.requests", "ldp.reports")
GRANTS = {
    "producer": [("TOPIC", "reports", "LITERAL", ("WRITE", "DESCRIBE"))],
    "device": [("TOPIC", "ldp.requests", "LITERAL", ("READ", "DESCRIBE")),
               ("TOPIC", "ldp.reports", "LITERAL", ("WRITE", "DESCRIBE")),
               ("GROUP", "wevent-devices-", "PREFIXED", ("READ",))],
    "subscriber": [("TOPIC", "releases", "LITERAL", ("READ", "DESCRIBE")),
                   ("TOPIC", "audit", "LITERAL", ("READ", "DESCRIBE")),
                   ("GROUP", "wevent-subscribe-", "PREFIXED", ("READ",)),  # `wevent subscribe`
                   ("GROUP", "wevent-observer", "LITERAL", ("READ",))],  # `wevent audit --bootstrap`
    "worker": [*[("TOPIC", t, "LITERAL", ("READ", "DESCRIBE")) for t in WORKER_READS],
               *[("TOPIC", t, "LITERAL", ("WRITE", "DESCRIBE")) for t in WORKER_WRITES],
               ("TOPIC", "wevent-", "PREFIXED", ("ALL",)),  # Faust's changelogs: created, written, read
               ("GROUP", "wevent", "LITERAL", ("READ", "DESCRIBE"))],
}
TLS_ROLES = {"subscriber-tls": "subscriber", "worker-tls": "worker"}  # certificate CN -> the role it plays


@dataclass
class SecureKafka:
    """The running cluster, its CA and the client files and environments of each role."""

    cluster: KafkaCluster
    authority: TestAuthority
    certificates: dict = field(default_factory=dict)  # CN -> Issued

    def bootstrap(self, listener: str) -> str:
        return self.cluster.bootstrap_for(listener)

    def scram_env(self, user: str | None, protocol: str = "SASL_SSL", password: str | None = None) -> dict:
        """The WEVENT_KAFKA_* of a SCRAM user (``user`` None: TLS only, no credentials)."""
        env = {"WEVENT_KAFKA_SECURITY_PROTOCOL": protocol if user else "SSL"}
        if user:
            env |= {"WEVENT_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "WEVENT_KAFKA_USERNAME": user,
                    "WEVENT_KAFKA_PASSWORD": password or PASSWORD.format(user)}
        if protocol.endswith("SSL"):
            env["WEVENT_KAFKA_SSL_CAFILE"] = str(self.authority.ca_file)
        return env

    def tls_env(self, common_name: str | None) -> dict:
        """The WEVENT_KAFKA_* of a client certificate (``None``: TLS without one)."""
        env = {"WEVENT_KAFKA_SECURITY_PROTOCOL": "SSL", "WEVENT_KAFKA_SSL_CAFILE": str(self.authority.ca_file)}
        if common_name:
            issued = self.certificates[common_name]
            env |= {"WEVENT_KAFKA_SSL_CERTFILE": str(issued.cert), "WEVENT_KAFKA_SSL_KEYFILE": str(issued.key),
                    "WEVENT_KAFKA_SSL_KEY_PASSWORD": PASSWORD.format(common_name)}
        return env

    def admin_config(self) -> dict:
        issued = self.certificates["admin"]
        return {"bootstrap.servers": self.bootstrap("MTLS"), "security.protocol": "SSL",
                "ssl.ca.location": str(self.authority.ca_file), "ssl.certificate.location": str(issued.cert),
                "ssl.key.location": str(issued.key), "log_level": 0}


def start_secure_kafka(directory: Path, topics: dict[str, int]) -> SecureKafka:
    """A secured one-node cluster with ``topics`` created, the roles' SCRAM users and their ACLs."""
    authority = TestAuthority(directory / "tls")
    certificates = {"broker": authority.issue("broker"), "admin": authority.issue("admin")}
    # the roles' client certificates have encrypted keys: the key password path is exercised too
    certificates |= {cn: authority.issue(cn, PASSWORD.format(cn).encode()) for cn in TLS_ROLES}
    properties = {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:CN=broker;User:CN=admin",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": certificates["broker"].bundle,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": authority.ca_file,
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.controller.ssl.client.auth": "required",
        "listener.security.protocol.map": "MTLS:SSL,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
    }
    cluster = KafkaCluster(1, base_dir=directory / "kafka", extra_properties=properties,
                           listeners={"MTLS": "SSL", "SASL_SSL": "SASL_SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT"})
    cluster.start()
    secure = SecureKafka(cluster, authority, certificates)
    try:
        _provision(secure, topics)
    except BaseException:
        cluster.stop()
        raise
    return secure


def _provision(secure: SecureKafka, topics: dict[str, int]) -> None:
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                       ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)

    admin = AdminClient(secure.admin_config())
    ask_again(lambda seconds: admin.list_topics(timeout=seconds), 60)
    for topic in [NewTopic(t, n, 1) for t, n in topics.items()]:
        ask_again(lambda seconds, topic=topic: created(admin, topic, seconds), 60)
    upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                            PASSWORD.format(user).encode()) for user in GRANTS]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(60)
    principals = [(f"User:{role}", role) for role in GRANTS] + [(f"User:CN={cn}", role) for cn, role in TLS_ROLES.items()]
    grants = dict.fromkeys((principal, kind, name, pattern, operation) for principal, role in principals
                           for kind, name, pattern, operations in GRANTS[role] for operation in operations)
    bindings = [AclBinding(ResourceType[kind], name, ResourcePatternType[pattern], principal, "*",
                           AclOperation[operation], AclPermissionType.ALLOW)
                for principal, kind, name, pattern, operation in grants]
    for future in admin.create_acls(bindings).values():
        future.result(60)
    # ACLs and SCRAM users reach the broker's caches asynchronously: wait until a role sees its topic
    probe = AdminClient({"bootstrap.servers": secure.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
                         "ssl.ca.location": str(secure.authority.ca_file), "sasl.mechanism": "SCRAM-SHA-512",
                         "sasl.username": "producer", "sasl.password": PASSWORD.format("producer"), "log_level": 0})
    deadline = time.monotonic() + 60
    while "reports" not in ask_again(lambda seconds: probe.list_topics(timeout=seconds), 10).topics:
        assert time.monotonic() < deadline, "the producer's ACLs did not reach the broker within 60 s"
        time.sleep(0.2)


def created(admin, topic, seconds: float) -> None:
    """Create ``topic`` (or find it created by an earlier request whose answer was lost)."""
    from confluent_kafka import KafkaException

    try:
        admin.create_topics([topic])[topic.topic].result(seconds)
    except KafkaException as exc:
        if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
            raise


def credentials(env: dict):
    """The Kafka credentials a command reads from an environment of ``env`` (its WEVENT_KAFKA_*)."""
    from wevent.stream.settings import Settings

    return Settings.from_environ(env).kafka_credentials()


@contextlib.contextmanager
def environment(env: dict):
    """``os.environ`` with the WEVENT_KAFKA_* of ``env`` only, inside the block (clients read it when built)."""
    saved = {name: os.environ.pop(name) for name in SECURITY_VARIABLES if name in os.environ}
    os.environ.update(env)
    try:
        yield
    finally:
        for name in SECURITY_VARIABLES:
            os.environ.pop(name, None)
        os.environ.update(saved)
