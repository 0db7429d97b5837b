"""Kafka client properties: any setting of the Kafka clients, from three places, merged and checked once.

A client property is a name and a text value, in Kafka's own vocabulary (``session.timeout.ms``,
``ssl.ca.location``). The commands' clients get them from, highest precedence first:

1. the ``WEVENT_KAFKA_*`` variables (:data:`SECURITY_ENV`), each standing for one property: the
   deployment's explicit security settings;
2. a properties file (:func:`read_properties`), in the Java form managed Kafka providers hand out,
   named by ``WEVENT_KAFKA_PROPERTIES_FILE`` or a command's ``--kafka-properties``: secrets live
   here (a mounted Secret), as does ``bootstrap.servers``, the Kafka to use when neither
   ``--bootstrap`` nor ``WEVENT_BOOTSTRAP`` names one;
3. the stream config's ``kafka_properties`` table: tuning that belongs with the app, never a
   secret (the config schema refuses those).

A property given in two places takes the value of the higher one, whole: ``sasl.jaas.config`` in
the file and ``WEVENT_KAFKA_USERNAME`` give the variable's user and the file's password.

Properties are kept in librdkafka's names, which are Kafka's for nearly everything; the few Java
forms librdkafka does not take are rewritten as they are read (:func:`normalise`): the JAAS line
of the PLAIN, SCRAM and OAUTHBEARER login modules, PEM trust and key stores, the OIDC login
handler, and the empty endpoint identification algorithm. The confluent clients (producers,
subscribers, device fleets) get every property as it stands (librdkafka refuses one it does not
know, in one line, when the first client is made); a worker's Faust clients (aiokafka) get those
they can honour, and refuse the others before connecting
(:func:`wevent.stream.runtime.kafka.faust_options`). Properties wevent sets itself, because its
correctness depends on them (the consumer groups, offsets, partitioner, transactions and delivery
timeouts: :data:`RESERVED`), are refused wherever they are given.

SASL/OAUTHBEARER is the OIDC client-credentials grant: a token endpoint, a client id and a
secret (``sasl.oauthbearer.method=oidc`` and its ``sasl.oauthbearer.*`` properties, or Kafka's
``OAuthBearerLoginModule`` with ``clientId`` and ``clientSecret``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, NamedTuple

from ..errors import UsageError
from .properties_format import parse_properties

__all__ = ["PROPERTIES_FILE_ENV", "SECURITY_ENV", "SECURITY_PROTOCOLS", "SASL_MECHANISMS", "PROPERTY_SASL_MECHANISMS",
           "RESERVED", "CONFIG_ORIGIN", "SECRET_PATTERN", "Given", "parse_properties", "read_properties", "normalise",
           "is_secret", "KafkaCredentials"]

PROPERTIES_FILE_ENV = "WEVENT_KAFKA_PROPERTIES_FILE"
# How to reach Kafka securely, one variable per property (the Helm chart fills these from its Secret).
SECURITY_ENV = {"protocol": "WEVENT_KAFKA_SECURITY_PROTOCOL", "mechanism": "WEVENT_KAFKA_SASL_MECHANISM",
                "username": "WEVENT_KAFKA_USERNAME", "password": "WEVENT_KAFKA_PASSWORD",
                "cafile": "WEVENT_KAFKA_SSL_CAFILE", "certfile": "WEVENT_KAFKA_SSL_CERTFILE",
                "keyfile": "WEVENT_KAFKA_SSL_KEYFILE", "key_password": "WEVENT_KAFKA_SSL_KEY_PASSWORD"}
ENV_PROPERTY = {"protocol": "security.protocol", "mechanism": "sasl.mechanism", "username": "sasl.username",
                "password": "sasl.password", "cafile": "ssl.ca.location", "certfile": "ssl.certificate.location",
                "keyfile": "ssl.key.location", "key_password": "ssl.key.password"}
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")  # WEVENT_KAFKA_SASL_MECHANISM's
PROPERTY_SASL_MECHANISMS = (*SASL_MECHANISMS, "OAUTHBEARER")  # OAUTHBEARER's settings have no variables
CONFIG_ORIGIN = "the config's kafka_properties"
MAX_FILE_BYTES = 1 << 20

#: Properties wevent sets itself, and why a user's value would break it.
RESERVED = {
    **dict.fromkeys(("group.id", "group.instance.id"), "each command names its own consumer group (the ACLs "
                                                       "grant them by name)"),
    **dict.fromkeys(("enable.auto.commit", "auto.offset.reset", "isolation.level", "enable.partition.eof"),
                    "where each client reads from and what it commits is part of how it counts"),
    **dict.fromkeys(("partitioner", "partitioner.class"), "a stream's messages must land where Faust's tables "
                                                          "expect them"),
    "transactional.id": "the config's processing_guarantee decides on transactions",
    **dict.fromkeys(("message.timeout.ms", "delivery.timeout.ms"), "the commands' delivery timeouts set it"),
    **dict.fromkeys(("key.serializer", "value.serializer", "key.deserializer", "value.deserializer"),
                    "wevent encodes its messages itself"),
}
# librdkafka's other names of the properties wevent reads or maps itself.
ALIASES = {"sasl.mechanisms": "sasl.mechanism", "metadata.broker.list": "bootstrap.servers",
           "request.required.acks": "acks", "queue.buffering.max.ms": "linger.ms",
           "compression.codec": "compression.type", "fetch.message.max.bytes": "max.partition.fetch.bytes"}
OIDC_HANDLERS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
                 "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler")
LOGIN_MODULES = {  # JAAS login module -> {its option: the librdkafka property}
    "org.apache.kafka.common.security.plain.PlainLoginModule": {"username": "sasl.username",
                                                                "password": "sasl.password"},
    "org.apache.kafka.common.security.scram.ScramLoginModule": {"username": "sasl.username",
                                                                "password": "sasl.password"},
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule": {
        "clientId": "sasl.oauthbearer.client.id", "clientSecret": "sasl.oauthbearer.client.secret",
        "scope": "sasl.oauthbearer.scope"},
}
OIDC = ("sasl.oauthbearer.method", "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.scope", "sasl.oauthbearer.extensions")
USER_PASSWORD = ("sasl.username", "sasl.password")
TLS_FILES = ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password")
SECRET_PATTERN = r"password|secret|jaas|^ssl\.key\.pem$|^ssl_key$"  # RE2 too (the Helm chart's schema)


def is_secret(name: str) -> bool:
    """Whether property ``name`` holds a secret (a password, a client secret, a JAAS line, a key).

    >>> [is_secret(n) for n in ("sasl.password", "sasl.oauthbearer.client.secret", "ssl.key.pem", "ssl.key.location")]
    [True, True, True, False]
    """
    return bool(re.search(SECRET_PATTERN, name))


class Given(NamedTuple):
    """A property's value and where it was given: ``name`` as given there (a variable, or a property
    the value was read from, such as ``sasl.jaas.config``) and ``where`` (a file, the config; "" for
    a variable)."""

    value: str
    name: str
    where: str = ""

    @property
    def label(self) -> str:
        """How messages name it: ``WEVENT_KAFKA_USERNAME``, ``sasl.username (/etc/kafka/client.properties)``."""
        return f"{self.name} ({self.where})" if self.where else self.name


def read_properties(path: str | Path) -> dict[str, str]:
    """The properties file at ``path``; a file that cannot be read is one line naming it."""
    try:
        data = Path(path).read_bytes()[:MAX_FILE_BYTES + 1]
    except OSError as exc:
        raise UsageError(f"{PROPERTIES_FILE_ENV} or --kafka-properties: cannot read {path}: "
                         f"{exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise UsageError(f"{path}: a Kafka properties file has at most {MAX_FILE_BYTES // 1024} KiB")
    try:
        return parse_properties(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text (a Kafka properties file)") from None
    except ValueError as exc:
        raise UsageError(f"{path}: {exc}") from None


# --- from Java's forms to librdkafka's ------------------------------------------------------------
_JAAS_OPTION = re.compile(r"\s*([\w.$-]+)\s*=\s*(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|[^\s;]+)")


def _jaas(given: Given) -> dict[str, Given]:
    """The properties a ``sasl.jaas.config`` line stands for (PLAIN, SCRAM or OAUTHBEARER)."""
    found = re.fullmatch(r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)(.*?);?\s*", given.value, re.DOTALL)
    if not found:
        raise UsageError(f"{given.label} must be '<LoginModule> required key=\"value\" ...;'")
    module, options_text = found.group(1), found.group(3)
    if module not in LOGIN_MODULES:
        raise UsageError(f"{given.label} uses {module}: only the PLAIN, SCRAM and OAUTHBEARER login modules "
                         f"({', '.join(m.rpartition('.')[2] for m in LOGIN_MODULES)}) are taken")
    options = {}
    for pair in _JAAS_OPTION.finditer(options_text):
        value = pair.group(2)
        options[pair.group(1)] = re.sub(r"\\(.)", r"\1", value[1:-1]) if value[:1] in "\"'" else value
    if _JAAS_OPTION.sub("", options_text).strip():
        raise UsageError(f"{given.label}: cannot read its options (key=\"value\" pairs)")
    out: dict[str, Given] = {}
    extensions = []
    for option, value in options.items():
        if option.startswith("extension_") and LOGIN_MODULES[module].get("clientId"):
            extensions.append(f"{option[len('extension_'):]}={value}")
        elif option in LOGIN_MODULES[module]:
            out[LOGIN_MODULES[module][option]] = given._replace(value=value)
        else:
            raise UsageError(f"{given.label}: option {option} of {module.rpartition('.')[2]} is not taken "
                             f"(known: {', '.join(LOGIN_MODULES[module])})")
    if extensions:
        out["sasl.oauthbearer.extensions"] = given._replace(value=",".join(extensions))
    if "sasl.oauthbearer.client.id" in out:
        out["sasl.oauthbearer.method"] = given._replace(value="oidc")
    return out


def _store(given: dict[str, Given], kind: str) -> dict[str, Given]:
    """A Java trust or key store as librdkafka's files: PEM, or a PKCS#12 key store, which
    librdkafka reads itself (its ``ssl.keystore.location``); neither client reads JKS."""
    location = given.pop(f"ssl.{kind}store.location", None)
    store_type = given.pop(f"ssl.{kind}store.type", None)
    password = given.get(f"ssl.{kind}store.password")
    if location is None:
        if store_type is not None:
            raise UsageError(f"{store_type.label} is set without ssl.{kind}store.location")
        return {}
    if kind == "key" and (store_type is None or store_type.value.upper() == "PKCS12"):
        given["ssl.keystore.location"] = location
        return {}
    if store_type is None or store_type.value.upper() != "PEM":
        what = store_type.value if store_type else "JKS, Java's default type"
        raise UsageError(f"{location.label}: a {what} {kind} store is read by neither Kafka client here: "
                         f"give it as PEM (ssl.{kind}store.type=PEM, or "
                         f"{'ssl.ca.location' if kind == 'trust' else 'ssl.certificate.location and ssl.key.location'})")
    if password is not None:
        raise UsageError(f"{password.label}: a PEM {kind} store has no password"
                         f"{' (the key has ssl.key.password)' if kind == 'key' else ''}")
    if kind == "trust":
        return {"ssl.ca.location": location}
    return {"ssl.certificate.location": location, "ssl.key.location": location}


def normalise(raw: Mapping[str, object], where: str) -> dict[str, Given]:
    """The properties ``raw`` given in ``where`` (a file, the config), in librdkafka's names.

    Java's forms librdkafka does not take become its own: ``sasl.jaas.config`` (PLAIN, SCRAM,
    OAUTHBEARER), a PEM trust or key store, the OIDC login callback handler, and the empty
    ``ssl.endpoint.identification.algorithm`` (no host name check: ``none``). A property wevent sets
    itself (:data:`RESERVED`), two names for one property, or a form neither client reads is one
    line naming it and ``where``.
    """
    given: dict[str, Given] = {}
    for name, value in raw.items():
        name = name.strip()
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        canonical = ALIASES.get(name, name)
        if canonical == "bootstrap.servers":
            raise UsageError(f"{name} ({where}): name the Kafka with --bootstrap or WEVENT_BOOTSTRAP, or as "
                             "bootstrap.servers in the properties file")
        if canonical in RESERVED:
            raise UsageError(f"{name} ({where}) is set by wevent itself: {RESERVED[canonical]}")
        if canonical in given:
            raise UsageError(f"{where} gives {canonical} twice (as {given[canonical].name} and {name})")
        given[canonical] = Given(text, name, where)
    derived: dict[str, Given] = {}
    jaas = given.pop("sasl.jaas.config", None)
    if jaas is not None:
        derived |= _jaas(jaas)
    handler = given.pop("sasl.login.callback.handler.class", None)
    if handler is not None:
        if handler.value not in OIDC_HANDLERS:
            raise UsageError(f"{handler.label}: {handler.value} is a Java class neither Kafka client here runs "
                             "(OAUTHBEARER is the OIDC client-credentials grant)")
        derived["sasl.oauthbearer.method"] = handler._replace(value="oidc")
    derived |= _store(given, "trust")
    derived |= _store(given, "key")
    algorithm = given.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None and algorithm.value in ("", "none"):
        given["ssl.endpoint.identification.algorithm"] = algorithm._replace(value="none")
    for name, value in derived.items():
        if name in given and (name != "sasl.oauthbearer.method" or given[name].value.lower() != "oidc"):
            raise UsageError(f"{where} gives {name} twice (as {given[name].name} and within {value.name})")
        given.setdefault(name, value)
    return given


# --- the merged properties, checked -------------------------------------------------------------------
def _reason(exc: OSError) -> str:
    """A TLS or file error in a few words: OpenSSL's reason (``KEY_VALUES_MISMATCH``) or the system's."""
    import ssl  # noqa: PLC0415 - OpenSSL loads only where TLS is configured

    if isinstance(exc, ssl.SSLError):
        return exc.reason or "not PEM, or an encrypted key without its password"
    return exc.strerror or str(exc)


def _property(name: str) -> property:
    return property(lambda self: self.properties.get(name), doc=f"``{name}``, or None")


@dataclass(frozen=True)
class KafkaCredentials:
    """How the clients reach Kafka: TLS, SASL, both or neither, and any other client property.

    Made by :meth:`parse` from what the ``WEVENT_KAFKA_*`` variables, a properties file and the
    config give, which refuses an incoherent combination with one line (a password without SASL, a
    certificate without TLS, a file that cannot be read).

    Parameters
    ----------
    properties : mapping
        Every property, by its librdkafka name (:func:`normalise`), ``security.protocol``
        (``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``) always among them, and with
        SASL ``sasl.mechanism`` (``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512`` or ``OAUTHBEARER``).
    given : mapping
        Where each property was given (:class:`Given`), for messages.

    Examples
    --------
    >>> credentials = KafkaCredentials.parse({"username": "alice", "password": "pw"},
    ...                                      config={"client.id": "wevent-eu", "session.timeout.ms": 45000})
    >>> credentials.protocol, credentials.mechanism, credentials.properties["session.timeout.ms"]
    ('SASL_SSL', 'SCRAM-SHA-512', '45000')
    >>> credentials.given["sasl.username"].label, credentials.given["client.id"].label
    ('WEVENT_KAFKA_USERNAME', "client.id (the config's kafka_properties)")
    """

    properties: Mapping[str, str] = field(default_factory=dict, repr=False)
    given: Mapping[str, Given] = field(default_factory=dict, repr=False)

    @property
    def protocol(self) -> str:
        return self.properties.get("security.protocol", "PLAINTEXT")

    # the security settings, by what they are (None when not given)
    mechanism = _property("sasl.mechanism")
    username = _property("sasl.username")
    password = _property("sasl.password")
    cafile = _property("ssl.ca.location")
    certfile = _property("ssl.certificate.location")
    keyfile = _property("ssl.key.location")
    key_password = _property("ssl.key.password")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def oauthbearer(self) -> bool:
        """SASL/OAUTHBEARER: tokens from an OIDC provider's token endpoint (client credentials)."""
        return self.sasl and self.mechanism == "OAUTHBEARER"

    def label(self, name: str) -> str:
        """How messages name property ``name``: where it was given."""
        return self.given[name].label if name in self.given else name

    @classmethod
    def parse(cls, env: Mapping[str, str | None], file: tuple[str, Mapping[str, str]] | None = None,
              config: Mapping[str, object] | None = None) -> "KafkaCredentials | None":
        """The properties of the ``WEVENT_KAFKA_*`` settings ``env`` (by the names of
        :data:`SECURITY_ENV`), over those of a properties ``file`` (its path and properties; its
        ``bootstrap.servers`` excepted, which says where Kafka is), over the ``config``'s; None when
        none is given (plain TCP, nothing to set).

        The protocol defaults to ``SASL_SSL`` when SASL credentials are given, else to ``PLAINTEXT``;
        the SASL mechanism to ``OAUTHBEARER`` with OIDC settings, else to ``SCRAM-SHA-512``.
        """
        given = normalise(config or {}, CONFIG_ORIGIN)
        if file is not None:
            path, properties = file
            given |= normalise({k: v for k, v in properties.items() if k != "bootstrap.servers"}, path)
        given |= {ENV_PROPERTY[name]: Given(value, variable) for name, variable in SECURITY_ENV.items()
                  if (value := env.get(name) or None) is not None}
        if not given:
            return None
        credentials = cls(*_checked(given))
        credentials.ssl_context()  # unreadable or mismatched files: one line now, not a failure in every client
        return credentials

    def ssl_context(self):
        """The TLS context of Python clients (Faust's), or None without TLS; UsageError for bad files."""
        import ssl  # noqa: PLC0415 - OpenSSL loads only where TLS is configured

        if not self.tls:
            return None
        try:
            context = ssl.create_default_context(cafile=self.cafile)
        except OSError as exc:  # ssl.SSLError included
            raise UsageError(f"{self.label('ssl.ca.location')}={self.cafile}: not a readable PEM file of CA "
                             f"certificates ({_reason(exc)})") from None
        if self.certfile:
            try:
                # never None: OpenSSL would prompt on the terminal for the password of an encrypted key
                context.load_cert_chain(self.certfile, self.keyfile, self.key_password or "")
            except OSError as exc:
                raise UsageError(f"{self.label('ssl.certificate.location')}={self.certfile} with "
                                 f"{self.label('ssl.key.location')}={self.keyfile}: not a client certificate and "
                                 f"its key ({_reason(exc)})") from None
        if self.properties.get("ssl.endpoint.identification.algorithm") == "none":
            context.check_hostname = False  # the certificate is still checked against the CAs
        return context

    def librdkafka(self) -> dict[str, str]:
        """Every property, as the confluent (librdkafka) clients take them."""
        return dict(self.properties)


def _checked(given: dict[str, Given]) -> tuple[dict[str, str], dict[str, Given]]:
    """The properties ``given``, with the protocol and mechanism filled in, once they agree."""
    values = {name: g.value for name, g in given.items()}

    def label(name: str) -> str:
        return given[name].label if name in given else name

    oidc = [name for name in OIDC if name in values]
    protocol = values.get("security.protocol", "").upper() or (
        "SASL_SSL" if "sasl.username" in values or oidc else "PLAINTEXT")
    if protocol not in SECURITY_PROTOCOLS:
        raise UsageError(f"{label('security.protocol')} must be one of {', '.join(SECURITY_PROTOCOLS)}, "
                         f"got {protocol!r}")
    values["security.protocol"] = protocol
    sasl = protocol.startswith("SASL_")
    mechanism = values.get("sasl.mechanism", "").upper()
    if sasl:
        mechanism = mechanism or ("OAUTHBEARER" if oidc else "SCRAM-SHA-512")
        choices = SASL_MECHANISMS if given.get("sasl.mechanism", Given("", "")).name == SECURITY_ENV["mechanism"] \
            else PROPERTY_SASL_MECHANISMS
        if mechanism not in choices:
            extra = " (OAUTHBEARER goes in the properties file, with its token endpoint)" if choices == SASL_MECHANISMS \
                else ""
            raise UsageError(f"{label('sasl.mechanism')} must be one of {', '.join(choices)}, got {mechanism!r}{extra}")
        values["sasl.mechanism"] = mechanism
    needs = "use SASL_SSL or SASL_PLAINTEXT"
    for name in ("sasl.mechanism", *USER_PASSWORD, *oidc) if not sasl else ():
        if name in given:
            raise UsageError(f"{label(name)} is set but {label('security.protocol')}={protocol} has no SASL ({needs})")
    if sasl and mechanism == "OAUTHBEARER":
        _check_oidc(values, given, label)
    elif sasl:
        if oidc:
            raise UsageError(f"{label(oidc[0])} is set but {label('sasl.mechanism')}={mechanism} is not OAUTHBEARER")
        if not ("sasl.username" in values and "sasl.password" in values):
            raise UsageError(f"{label('security.protocol')}={protocol} needs a user and a password: "
                             f"{SECURITY_ENV['username']} and {SECURITY_ENV['password']}, or sasl.username and "
                             "sasl.password (or sasl.jaas.config) in the properties file")
    tls = protocol in ("SSL", "SASL_SSL")
    for name in TLS_FILES if not tls else ():
        if name in given:
            raise UsageError(f"{label(name)} is set but {label('security.protocol')}={protocol} has no TLS "
                             "(use SSL or SASL_SSL)")
    if ("ssl.certificate.location" in values) != ("ssl.key.location" in values):
        raise UsageError(f"{label('ssl.certificate.location')} and {label('ssl.key.location')} go together "
                         f"(mutual TLS; {SECURITY_ENV['certfile']} and {SECURITY_ENV['keyfile']})")
    if "ssl.key.password" in values and "ssl.key.location" not in values:
        raise UsageError(f"{label('ssl.key.password')} is set without {label('ssl.key.location')} "
                         f"({SECURITY_ENV['keyfile']})")
    return values, given


def _check_oidc(values: dict[str, str], given: dict[str, Given], label) -> None:
    for name in USER_PASSWORD:
        if name in values:
            raise UsageError(f"{label(name)} is set but {label('sasl.mechanism')}=OAUTHBEARER takes a client id "
                             "and secret (sasl.oauthbearer.client.id and .client.secret)")
    method = values.setdefault("sasl.oauthbearer.method", "oidc").lower()
    if method != "oidc":
        raise UsageError(f"{label('sasl.oauthbearer.method')} must be oidc (the client-credentials grant), "
                         f"got {method!r}")
    values["sasl.oauthbearer.method"] = method
    missing = [name for name in ("sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.client.id",
                                 "sasl.oauthbearer.client.secret") if not values.get(name)]
    if missing:
        raise UsageError(f"{label('sasl.mechanism')}=OAUTHBEARER needs {', '.join(missing)} (the OIDC provider's "
                         "token endpoint and this client's credentials, in the properties file)")
    url = values["sasl.oauthbearer.token.endpoint.url"]
    if not re.match(r"https?://[^/\s]+", url):
        raise UsageError(f"{label('sasl.oauthbearer.token.endpoint.url')} must be an http:// or https:// URL, "
                         f"got {url!r}")
