"""What a process takes from its environment, read once, at the edge, and passed in.

Every setting the environment gives (the Kafka to use, how to reach it securely and any other
client property, in a properties file: :mod:`wevent.stream.kafka_properties`; the server's
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

Keys
----

**Keys.** The server's key comes from `WEVENT_NOISE_KEY`, the devices' from `WEVENT_DEVICE_KEY`
(64 hex characters each), or from a `seed`, which is for experiments only: anyone who knows it
can remove the noise, and `wevent run` says so on stderr. There is no public default key. Every
key a worker signs or MACs with is a keyed-BLAKE2b sub-key of the server's key, one per purpose
(the internal MAC's, the requests', the releases'), so a public half gives away neither the
secret nor another sub-key.
**Rotating the server's key** starts new streams: a stream's key is fixed for its life like its
parameters (its noise, its state and the signatures of its releases all derive from it), so
run the new key under new stream names, give subscribers the new `WEVENT_RELEASE_PUBLIC_KEY`,
and let the old streams end. Their releases stay on `releases` and `audit` and stay verifiable
with the old public key (`wevent audit --release-key OLD --stream NAME`), so keep it published
beside the new one.
Without either, `wevent run` draws two independent random keys for the run and hands each to
its own process only (the worker gets the server's key, the device fleet the devices' key),
through their environment, never in a file or on a command line. With a seed the two keys are
separate hashes of it; the devices' key is never derived from the server's. On an external
Kafka (`--bootstrap`) the keys must come from the environment or a seed, because the streams'
state outlives the run and a re-processed slot must draw the same noise. `wevent run` stops
everything it started on Ctrl-C, SIGTERM and SIGHUP, and deletes its working directory (config,
the devices' true values, logs) on every exit.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping

from ..core.randomness import SecretKey
from ..errors import UsageError
from .config import AppConfig, ConfigError
from .kafka_properties import (PROPERTIES_FILE_ENV, SASL_MECHANISMS, SECURITY_ENV, SECURITY_PROTOCOLS, KafkaCredentials,
                               read_properties)
from .wire.seals import SignatureSeal, report_seal

__all__ = ["Settings", "KafkaCredentials", "NOISE_KEY_ENV", "DEVICE_KEY_ENV", "REQUEST_KEY_ENV", "REPORT_KEY_ENV",
           "RELEASE_KEY_ENV", "BOOTSTRAP_ENV", "MEMORY_LIMIT_ENV", "SECURITY_ENV", "PROPERTIES_FILE_ENV",
           "SECURITY_PROTOCOLS", "SASL_MECHANISMS", "DEBUG_ENV", "SCALE_ENV", "LOOPBACK"]

NOISE_KEY_ENV = "WEVENT_NOISE_KEY"  # 64 hex characters: the server's secret noise key
DEVICE_KEY_ENV = "WEVENT_DEVICE_KEY"  # the simulated devices' key (local model)
REQUEST_KEY_ENV = "WEVENT_REQUEST_PUBLIC_KEY"  # hex: the server's public key, which devices check requests with
REPORT_KEY_ENV = "WEVENT_DEVICE_PUBLIC_KEY"  # hex: the devices' public key, which workers check reports with
RELEASE_KEY_ENV = "WEVENT_RELEASE_PUBLIC_KEY"  # hex: the server's public key, which readers check releases with
BOOTSTRAP_ENV = "WEVENT_BOOTSTRAP"
MEMORY_LIMIT_ENV = "WEVENT_BROKER_MEMORY_MB"
DEBUG_ENV = "WEVENT_DEBUG"
SCALE_ENV = "WEVENT_REPRODUCE_SCALE"  # "tiny": the test suite's seconds-long run of `wevent reproduce`
KAFKA_CACHE_ENV = "WEVENT_KAFKA_CACHE"  # the directory holding kafka-<version>/ caches
LOOPBACK = "127.0.0.1"  # the default address of every HTTP port: open it to the network explicitly


@dataclass(frozen=True)
class Settings:
    """The environment's settings, as given (:meth:`from_environ`); ``Settings()`` is an empty environment.

    Parameters
    ----------
    bootstrap : str or None
        ``WEVENT_BOOTSTRAP``: the Kafka to use when no ``--bootstrap`` is given.
    kafka : mapping
        ``WEVENT_KAFKA_*`` by the names of :data:`SECURITY_ENV` (:meth:`kafka_credentials`).
    kafka_properties_file : str or None
        ``WEVENT_KAFKA_PROPERTIES_FILE`` (or a command's ``--kafka-properties``,
        :meth:`with_kafka_properties`): a file of any Kafka client properties, Java's form
        (:mod:`wevent.stream.kafka_properties`).
    noise_key_hex, device_key_hex : str or None
        ``WEVENT_NOISE_KEY`` and ``WEVENT_DEVICE_KEY``, 64 hexadecimal characters each
        (:meth:`noise_key`, :meth:`device_key`).
    device_public_key_hex, request_public_key_hex : str or None
        ``WEVENT_DEVICE_PUBLIC_KEY`` (the workers check the devices' reports with it) and
        ``WEVENT_REQUEST_PUBLIC_KEY`` (the devices check the server's requests with it).
    release_public_key_hex : str or None
        ``WEVENT_RELEASE_PUBLIC_KEY``: the server's release public key, which ``wevent subscribe``
        and ``wevent audit`` check releases and audit records with (:meth:`release_checker`).
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
    kafka_properties_file: str | None = None
    noise_key_hex: str | None = field(default=None, repr=False)
    device_key_hex: str | None = field(default=None, repr=False)
    device_public_key_hex: str | None = None
    request_public_key_hex: str | None = None
    release_public_key_hex: str | None = None
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
            kafka_properties_file=environ.get(PROPERTIES_FILE_ENV) or None,
            noise_key_hex=environ.get(NOISE_KEY_ENV) or None,
            device_key_hex=environ.get(DEVICE_KEY_ENV) or None,
            device_public_key_hex=environ.get(REPORT_KEY_ENV) or None,
            request_public_key_hex=environ.get(REQUEST_KEY_ENV) or None,
            release_public_key_hex=environ.get(RELEASE_KEY_ENV) or None,
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

    def with_kafka_properties(self, path: str | None) -> "Settings":
        """These settings with the properties file ``path`` (a command's ``--kafka-properties``,
        which wins over ``WEVENT_KAFKA_PROPERTIES_FILE``); unchanged for None."""
        return replace(self, kafka_properties_file=path) if path else self

    def kafka_bootstrap(self, explicit: str | None) -> str | None:
        """The configured Kafka (flag, then WEVENT_BOOTSTRAP, then the properties file's
        ``bootstrap.servers``), or None for the embedded broker."""
        if explicit or self.bootstrap:
            return explicit or self.bootstrap
        return self._properties_file().get("bootstrap.servers") or None

    def kafka_credentials(self, config: AppConfig | None = None) -> KafkaCredentials | None:
        """How the clients reach Kafka, and any other client property: ``WEVENT_KAFKA_*`` over the
        properties file over ``config``'s ``kafka_properties`` (:meth:`KafkaCredentials.parse`)."""
        path = self.kafka_properties_file
        return KafkaCredentials.parse(self.kafka, (path, self._properties_file()) if path else None,
                                      config.kafka_properties if config is not None else None)

    def _properties_file(self) -> dict[str, str]:
        return read_properties(self.kafka_properties_file) if self.kafka_properties_file else {}

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

    def release_checker(self, explicit: str | None) -> SignatureSeal | None:
        """The release public key that releases and audit records are checked with: ``explicit``
        (a ``--release-key``), else ``WEVENT_RELEASE_PUBLIC_KEY``; None when neither is given."""
        for source, text in (("--release-key", explicit), (RELEASE_KEY_ENV, self.release_public_key_hex)):
            if text:
                try:
                    return SignatureSeal.from_public_hex(text)
                except ValueError as exc:
                    raise UsageError(f"{source}: {exc}") from None
        return None

    def check_release_key(self, signer: SignatureSeal) -> None:
        """Refuses a ``WEVENT_RELEASE_PUBLIC_KEY`` that is not ``signer``'s public key (this
        server's): the subscribers it was given to would drop every release."""
        given = self.release_checker(None)
        if given is not None and given.public_hex != signer.public_hex:
            raise ConfigError(f"{RELEASE_KEY_ENV} (fingerprint {given.fingerprint}) is not this server's release "
                              f"public key (fingerprint {signer.fingerprint}, derived from its noise key): subscribers "
                              "given it would drop every release; `wevent keys` prints the right one")

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
