"""What a process takes from its environment, read once, at the edge, and passed in.

Every setting the environment gives (the Kafka to use and how to reach it securely, the server's
and the devices' keys and public keys, the worker's web and health defaults, the embedded broker's
memory limit, debugging) is read by :meth:`Settings.from_environ`, once, by ``wevent``'s ``main``
for every command, the worker's included; the cache of Apache Kafka's jars is read so too, where
the tests and benchmarks that start a Kafka ask for it. Below the edge, nothing reads
``os.environ``: each command hands on what it needs (the worker its keys and Kafka credentials).
Child processes (``wevent run``'s worker and devices) inherit this process's environment, get
their keys added to it, each only its own, and read it the same way.

What is read is kept as it was given; a setting is checked where it is used, with the message it
always had: the server's key when a key is needed (:meth:`Settings.noise_key`), the Kafka security
settings when the first client is made (:meth:`Settings.kafka_credentials`), the worker's port
and host by the options they stand in for. A flag on the command line wins over the environment,
which wins over the config's ``seed``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ..core.randomness import SecretKey
from ..errors import UsageError
from .config import AppConfig, ConfigError
from .wire.seals import SignatureSeal, report_seal

__all__ = ["Settings", "KafkaCredentials", "NOISE_KEY_ENV", "DEVICE_KEY_ENV", "REQUEST_KEY_ENV", "REPORT_KEY_ENV",
           "BOOTSTRAP_ENV", "MEMORY_LIMIT_ENV", "SECURITY_ENV", "SECURITY_PROTOCOLS", "SASL_MECHANISMS", "DEBUG_ENV",
           "SCALE_ENV", "LOOPBACK"]

NOISE_KEY_ENV = "WEVENT_NOISE_KEY"  # 64 hex characters: the server's secret noise key
DEVICE_KEY_ENV = "WEVENT_DEVICE_KEY"  # the simulated devices' key (local model)
REQUEST_KEY_ENV = "WEVENT_REQUEST_PUBLIC_KEY"  # hex: the server's public key, which devices check requests with
REPORT_KEY_ENV = "WEVENT_DEVICE_PUBLIC_KEY"  # hex: the devices' public key, which workers check reports with
BOOTSTRAP_ENV = "WEVENT_BOOTSTRAP"
MEMORY_LIMIT_ENV = "WEVENT_BROKER_MEMORY_MB"
DEBUG_ENV = "WEVENT_DEBUG"
SCALE_ENV = "WEVENT_REPRODUCE_SCALE"  # "tiny": the test suite's seconds-long run of `wevent reproduce`
KAFKA_CACHE_ENV = "WEVENT_KAFKA_CACHE"  # the directory holding kafka-<version>/ caches
# How to reach Kafka securely (the Helm chart fills these from its Secret).
SECURITY_ENV = {"protocol": "WEVENT_KAFKA_SECURITY_PROTOCOL", "mechanism": "WEVENT_KAFKA_SASL_MECHANISM",
                "username": "WEVENT_KAFKA_USERNAME", "password": "WEVENT_KAFKA_PASSWORD",
                "cafile": "WEVENT_KAFKA_SSL_CAFILE", "certfile": "WEVENT_KAFKA_SSL_CERTFILE",
                "keyfile": "WEVENT_KAFKA_SSL_KEYFILE", "key_password": "WEVENT_KAFKA_SSL_KEY_PASSWORD"}
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
LOOPBACK = "127.0.0.1"  # the default address of every HTTP port: open it to the network explicitly


@dataclass(frozen=True)
class KafkaCredentials:
    """How the clients reach Kafka: TLS, SASL, both, or neither.

    Made from the ``WEVENT_KAFKA_*`` settings by :meth:`parse`, which refuses an incoherent
    combination with one line (a password without SASL, a certificate without TLS, a file that
    cannot be read).

    Parameters
    ----------
    protocol : str
        ``PLAINTEXT``, ``SSL`` (TLS, and mutual TLS with a client certificate), ``SASL_PLAINTEXT``
        or ``SASL_SSL``.
    mechanism, username, password : str or None
        SASL (``PLAIN``, ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``); only with a ``SASL_`` protocol.
    cafile : str or None
        PEM file of the certificate authorities to trust instead of the system's.
    certfile, keyfile, key_password : str or None
        The client's PEM certificate and private key (mutual TLS), and the key's password.
    """

    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    key_password: str | None = None

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @classmethod
    def parse(cls, given: Mapping[str, str | None]) -> "KafkaCredentials | None":
        """The settings ``given`` by name (the keys of :data:`SECURITY_ENV`), or None when none is
        given (plain TCP, no authentication).

        The protocol defaults to ``SASL_SSL`` when a username is given, else to ``PLAINTEXT``.
        """
        env = {name: given.get(name) or None for name in SECURITY_ENV}
        if not any(env.values()):
            return None
        protocol = (env["protocol"] or ("SASL_SSL" if env["username"] else "PLAINTEXT")).upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise UsageError(f"{SECURITY_ENV['protocol']} must be one of {', '.join(SECURITY_PROTOCOLS)}, got {protocol!r}")
        sasl = protocol.startswith("SASL_")
        mechanism = (env["mechanism"] or "SCRAM-SHA-512").upper() if sasl else env["mechanism"]
        if sasl and mechanism not in SASL_MECHANISMS:
            raise UsageError(f"{SECURITY_ENV['mechanism']} must be one of {', '.join(SASL_MECHANISMS)}, got {mechanism!r}")
        if sasl and not (env["username"] and env["password"]):
            raise UsageError(f"{SECURITY_ENV['protocol']}={protocol} needs {SECURITY_ENV['username']} and "
                             f"{SECURITY_ENV['password']}")
        for name in ("mechanism", "username", "password") if not sasl else ():
            if env[name]:
                raise UsageError(f"{SECURITY_ENV[name]} is set but {SECURITY_ENV['protocol']}={protocol} has no SASL "
                                 "(use SASL_SSL or SASL_PLAINTEXT)")
        tls = protocol in ("SSL", "SASL_SSL")
        for name in ("cafile", "certfile", "keyfile", "key_password") if not tls else ():
            if env[name]:
                raise UsageError(f"{SECURITY_ENV[name]} is set but {SECURITY_ENV['protocol']}={protocol} has no TLS "
                                 "(use SSL or SASL_SSL)")
        if bool(env["certfile"]) != bool(env["keyfile"]):
            raise UsageError(f"{SECURITY_ENV['certfile']} and {SECURITY_ENV['keyfile']} go together (mutual TLS)")
        if env["key_password"] and not env["keyfile"]:
            raise UsageError(f"{SECURITY_ENV['key_password']} is set without {SECURITY_ENV['keyfile']}")
        credentials = cls(protocol, mechanism, env["username"], env["password"], env["cafile"], env["certfile"],
                          env["keyfile"], env["key_password"])
        credentials.ssl_context()  # unreadable or mismatched files: one line now, not a failure in every client
        return credentials

    def ssl_context(self):
        """The TLS context of Python clients (Faust's), or None without TLS; UsageError for bad files."""
        import ssl

        if not self.tls:
            return None
        try:
            context = ssl.create_default_context(cafile=self.cafile)
        except OSError as exc:  # ssl.SSLError included
            raise UsageError(f"{SECURITY_ENV['cafile']}={self.cafile}: not a readable PEM file of CA certificates "
                             f"({_reason(exc)})") from None
        if self.certfile:
            try:
                # never None: OpenSSL would prompt on the terminal for the password of an encrypted key
                context.load_cert_chain(self.certfile, self.keyfile, self.key_password or "")
            except OSError as exc:
                raise UsageError(f"{SECURITY_ENV['certfile']}={self.certfile} with {SECURITY_ENV['keyfile']}="
                                 f"{self.keyfile}: not a client certificate and its key ({_reason(exc)})") from None
        return context

    def librdkafka(self) -> dict:
        config = {"security.protocol": self.protocol}
        if self.sasl:
            config.update({"sasl.mechanism": self.mechanism, "sasl.username": self.username,
                           "sasl.password": self.password})
        optional = {"ssl.ca.location": self.cafile, "ssl.certificate.location": self.certfile,
                    "ssl.key.location": self.keyfile, "ssl.key.password": self.key_password}
        return config | {key: value for key, value in optional.items() if value}


def _reason(exc: OSError) -> str:
    """A TLS or file error in a few words: OpenSSL's reason (``KEY_VALUES_MISMATCH``) or the system's."""
    import ssl

    if isinstance(exc, ssl.SSLError):
        return exc.reason or "not PEM, or an encrypted key without its password"
    return exc.strerror or str(exc)


@dataclass(frozen=True)
class Settings:
    """The environment's settings, as given (:meth:`from_environ`); ``Settings()`` is an empty environment.

    Parameters
    ----------
    bootstrap : str or None
        ``WEVENT_BOOTSTRAP``: the Kafka to use when no ``--bootstrap`` is given.
    kafka : mapping
        ``WEVENT_KAFKA_*`` by the names of :data:`SECURITY_ENV` (:meth:`kafka_credentials`).
    noise_key_hex, device_key_hex : str or None
        ``WEVENT_NOISE_KEY`` and ``WEVENT_DEVICE_KEY``, 64 hexadecimal characters each
        (:meth:`noise_key`, :meth:`device_key`).
    device_public_key_hex, request_public_key_hex : str or None
        ``WEVENT_DEVICE_PUBLIC_KEY`` (the workers check the devices' reports with it) and
        ``WEVENT_REQUEST_PUBLIC_KEY`` (the devices check the server's requests with it).
    web_port, web_host, stall_seconds, session_seconds : str or None
        ``WEVENT_WEB_PORT`` (default 6066), ``WEVENT_WEB_HOST`` (default 127.0.0.1),
        ``WEVENT_STALL_SECONDS`` (default 120) and ``WEVENT_SESSION_SECONDS``: the defaults of
        ``wevent worker``'s options, which check them.
    tansu_compat : bool
        ``WEVENT_TANSU_COMPAT=1``: the default of ``--tansu-compat``.
    broker_memory_mb : str or None
        ``WEVENT_BROKER_MEMORY_MB``: the embedded broker's memory limit (:meth:`broker_memory_limit_mb`).
    debug : bool
        ``WEVENT_DEBUG=1``: an internal error shows its traceback.
    reproduce_scale : str or None
        ``WEVENT_REPRODUCE_SCALE``: the scale of ``wevent reproduce``'s runs.
    kafka_cache, cache_home : str or None
        ``WEVENT_KAFKA_CACHE`` and ``XDG_CACHE_HOME``: where Apache Kafka's jars are kept
        (:meth:`kafka_cache_root`).
    """

    bootstrap: str | None = None
    kafka: Mapping[str, str | None] = field(default_factory=dict, repr=False)
    noise_key_hex: str | None = field(default=None, repr=False)
    device_key_hex: str | None = field(default=None, repr=False)
    device_public_key_hex: str | None = None
    request_public_key_hex: str | None = None
    web_port: str = "6066"
    web_host: str = LOOPBACK
    stall_seconds: str = "120"
    session_seconds: str | None = None
    tansu_compat: bool = False
    broker_memory_mb: str | None = None
    debug: bool = False
    reproduce_scale: str | None = None
    kafka_cache: str | None = None
    cache_home: str | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> "Settings":
        """The settings ``environ`` gives (``os.environ``, read by the edge that calls this)."""
        return cls(
            bootstrap=environ.get(BOOTSTRAP_ENV) or None,
            kafka={name: environ.get(variable) or None for name, variable in SECURITY_ENV.items()},
            noise_key_hex=environ.get(NOISE_KEY_ENV) or None,
            device_key_hex=environ.get(DEVICE_KEY_ENV) or None,
            device_public_key_hex=environ.get(REPORT_KEY_ENV) or None,
            request_public_key_hex=environ.get(REQUEST_KEY_ENV) or None,
            web_port=environ.get("WEVENT_WEB_PORT", "6066"),
            web_host=environ.get("WEVENT_WEB_HOST", LOOPBACK),
            stall_seconds=environ.get("WEVENT_STALL_SECONDS", "120"),
            session_seconds=environ.get("WEVENT_SESSION_SECONDS"),
            tansu_compat=environ.get("WEVENT_TANSU_COMPAT") == "1",
            broker_memory_mb=environ.get(MEMORY_LIMIT_ENV) or None,
            debug=environ.get(DEBUG_ENV) == "1",
            reproduce_scale=environ.get(SCALE_ENV) or None,
            kafka_cache=environ.get(KAFKA_CACHE_ENV) or None,
            cache_home=environ.get("XDG_CACHE_HOME") or None,
        )

    def kafka_bootstrap(self, explicit: str | None) -> str | None:
        """The configured Kafka (flag, then WEVENT_BOOTSTRAP), or None for the embedded broker."""
        return explicit or self.bootstrap or None

    def kafka_credentials(self) -> KafkaCredentials | None:
        """How the clients reach Kafka (:meth:`KafkaCredentials.parse` of ``WEVENT_KAFKA_*``)."""
        return KafkaCredentials.parse(self.kafka)

    def noise_key(self, config: AppConfig) -> SecretKey:
        """The server's secret: ``WEVENT_NOISE_KEY`` (hex) if set, else derived from the config's ``seed``."""
        return _key(NOISE_KEY_ENV, self.noise_key_hex, config.seed, "server")

    def device_key(self, config: AppConfig) -> SecretKey:
        """The devices' secret: ``WEVENT_DEVICE_KEY`` (hex) if set, else derived from the config's ``seed``."""
        return _key(DEVICE_KEY_ENV, self.device_key_hex, config.seed, "devices")

    def report_checker(self, config: AppConfig) -> SignatureSeal | None:
        """The devices' public key, which checks ``ldp.reports`` (None without a local-model stream).

        It comes from ``WEVENT_DEVICE_PUBLIC_KEY``; without it, from the devices' own key
        (``WEVENT_DEVICE_KEY`` or the config's ``seed``), where the devices are simulated beside the server.
        """
        if not any(s.model == "local" for s in config.streams):
            return None
        if self.device_public_key_hex:
            try:
                return SignatureSeal.from_public_hex(self.device_public_key_hex)
            except ValueError as exc:
                raise ConfigError(f"{REPORT_KEY_ENV}: {exc}") from None
        if self.device_key_hex or config.seed is not None:
            return report_seal(self.device_key(config)).public()
        raise ConfigError(f"no key to check the devices' reports with: set {REPORT_KEY_ENV} to the devices' "
                          "public key (`wevent keys` prints it)")

    def broker_memory_limit_mb(self) -> int | None:
        """``WEVENT_BROKER_MEMORY_MB``, a positive number of MiB, or None when it is not set."""
        if not self.broker_memory_mb:
            return None
        try:
            limit = int(self.broker_memory_mb)
        except ValueError:
            limit = 0
        if limit <= 0:
            raise UsageError(f"{MEMORY_LIMIT_ENV} must be a positive number of MiB, got {self.broker_memory_mb!r}")
        return limit

    def kafka_cache_root(self) -> Path:
        """``$WEVENT_KAFKA_CACHE``, else ``$XDG_CACHE_HOME/wevent``, else ``~/.cache/wevent``."""
        return Path(self.kafka_cache or Path(self.cache_home or Path.home() / ".cache") / "wevent")


def _key(variable: str, text: str | None, seed: int | None, purpose: str) -> SecretKey:
    if text:
        try:
            return SecretKey.from_hex(text)
        except ValueError as exc:
            raise ConfigError(f"{variable}: {exc}") from None
    if seed is None:
        raise ConfigError(f"no noise key: set {variable} (64 hex characters) or a `seed` in the config")
    return SecretKey.from_seed(seed, purpose)
