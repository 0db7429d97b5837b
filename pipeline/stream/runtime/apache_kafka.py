"""A local Apache Kafka (KRaft) from Maven Central: for tests, benchmarks and trying the CLI.

:func:`install_kafka` fetches the broker's jars (``org.apache.kafka:kafka_2.13`` with its runtime
dependencies, Kafka's own command-line tools and a logging binding) into a cache once, with Maven.
:class:`KafkaCluster` starts one or three combined broker+controller nodes on loopback ports with
durable log directories, and can SIGKILL and restart any node with its data. Needs Java 17+ and
Maven (``mvn``) on the PATH.

``python -m wevent.stream.runtime.apache_kafka`` starts a one-node broker, prints its bootstrap address
and runs until Ctrl-C; ``--install`` only fills the cache.

What the tests prove on Apache Kafka
------------------------------------

`python -m wevent.stream.runtime.apache_kafka` fetches Apache Kafka 3.9.1 from Maven Central (once, into
`~/.cache/wevent/kafka-3.9.1`; Java 17 and Maven needed), starts a one-node KRaft broker and prints
its address; then `wevent run --bootstrap ADDR` runs the same stream against it.

What the tests prove on Apache Kafka (KRaft, started by the tests from those jars, durable log
directories):

- every integration test runs on both brokers, and on Kafka the clients batch and compress (lz4)
  as in production; releases equal `wevent simulate`'s;
- three workers on four partitions, one SIGKILLed and replaced, and a scale-out from one worker to
  three, release every slot once with unchanged values and pass the audit; a worker drops the
  gauges of the streams it hands over;
- with three brokers (replication 3, `min.insync.replicas=2`, acks=all), one broker SIGKILLed
  mid-stream and restarted, and a durable single broker SIGKILLed and restarted, lose nothing,
  duplicate nothing and change no release, and the worker carries on by itself;
- TLS, mutual TLS and SASL/SCRAM-SHA-512 with ACLs per role (docker/README.md, "Kafka security"), and Kafka's own
  console producer and consumer against the published schemas.
"""

from __future__ import annotations

import base64
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TextIO

from ...errors import UsageError
from ..settings import Settings
from .broker import free_port, wait_for_port
from .child_processes import die_with_parent, running

KAFKA_VERSION = "3.9.1"

#: Maven coordinates installed beside the broker: Kafka's tools (console consumer, ACLs) and the
#: slf4j binding for the log4j 1 (reload4j) configuration every Kafka 3.x ships with.
EXTRA_ARTIFACTS = (("org.apache.kafka", "kafka-tools"), ("org.slf4j", "slf4j-reload4j", "1.7.36"))

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>wevent</groupId><artifactId>kafka-runtime</artifactId><version>1</version>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""
DEPENDENCY = """    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId><version>{version}</version>
      <exclusions><exclusion><groupId>org.apache.kafka</groupId><artifactId>connect-runtime</artifactId></exclusion></exclusions>
    </dependency>"""

LOG4J = """log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.log.LogCleaner=WARN
log4j.logger.state.change.logger=WARN
"""
#: Kafka's tools print their records on stdout: their own logging goes to stderr, warnings only.
TOOLS_LOG4J = """log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
"""

MARKER = ".installed"

_UNSECURED = "org.apache.kafka.common.security.oauthbearer.internals.unsecured"
#: A listener's SASL/OAUTHBEARER with Kafka's unsecured JWS tokens (``listener.name.<name>.`` before each).
UNSECURED_OAUTHBEARER = {
    "sasl.enabled.mechanisms": "OAUTHBEARER",
    "oauthbearer.sasl.jaas.config": 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
                                    'unsecuredLoginStringClaim_sub="broker";',
    "oauthbearer.sasl.login.callback.handler.class": f"{_UNSECURED}.OAuthBearerUnsecuredLoginCallbackHandler",
    "oauthbearer.sasl.server.callback.handler.class": f"{_UNSECURED}.OAuthBearerUnsecuredValidatorCallbackHandler",
}


def default_cache(version: str = KAFKA_VERSION) -> Path:
    """``$WEVENT_KAFKA_CACHE/kafka-<version>``, else ``~/.cache/wevent/kafka-<version>``.

    A build cache of this tool and of the tests that start Kafka, read from the environment where
    it is needed (:meth:`Settings.kafka_cache_root <wevent.stream.settings.Settings.kafka_cache_root>`):
    the caches of one machine are where its environment says, whoever asks."""
    return Settings.from_environ(os.environ).kafka_cache_root() / f"kafka-{version}"


def install_kafka(version: str = KAFKA_VERSION, cache: str | Path | None = None, quiet: bool = True) -> Path:
    """The cache directory holding Kafka ``version``'s jars in ``libs/``, fetched with Maven once.

    The jars are copied into a staging directory that is renamed into place with the marker file
    already in it, so a cache directory either is complete or does not exist; a lock file beside
    it makes parallel first uses (pytest workers, two shells) wait for one download.
    """
    cache = Path(cache) if cache else default_cache(version)
    if (cache / MARKER).exists():
        return cache
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            raise UsageError(f"Apache Kafka needs Java 17+ and Maven: {tool!r} is not on the PATH")
    cache.parent.mkdir(parents=True, exist_ok=True)
    with open(cache.parent / f".{cache.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (cache / MARKER).exists():  # another process installed it while this one waited
            return cache
        staging = Path(tempfile.mkdtemp(prefix=f".{cache.name}-", dir=cache.parent))
        try:
            _fetch(version, staging, quiet)
            (staging / "log4j.properties").write_text(LOG4J)
            (staging / "tools-log4j.properties").write_text(TOOLS_LOG4J)
            (staging / MARKER).write_text(version + "\n")
            if cache.exists():  # a partial directory left by hand or by an older layout
                shutil.rmtree(cache)
            staging.rename(cache)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return cache


def _fetch(version: str, staging: Path, quiet: bool) -> None:
    artifacts = [("org.apache.kafka", "kafka_2.13", version)] + [
        (a[0], a[1], a[2] if len(a) > 2 else version) for a in EXTRA_ARTIFACTS]
    pom = staging / "pom.xml"
    pom.write_text(POM.format(dependencies="\n".join(
        DEPENDENCY.format(group=g, artifact=a, version=v) for g, a, v in artifacts)))
    command = ["mvn", "-B", "-Dstyle.color=never", "-f", str(pom), "dependency:copy-dependencies", "-DincludeScope=runtime",
               f"-DoutputDirectory={staging / 'libs'}"] + (["-q"] if quiet else [])
    result = subprocess.run(command, stdout=subprocess.PIPE if quiet else None, stderr=subprocess.STDOUT,
                            text=True, timeout=1800)
    if result.returncode != 0:
        last = (result.stdout or "").strip().splitlines()[-1:] or [f"exit status {result.returncode}"]
        raise UsageError(f"cannot fetch Apache Kafka {version} from Maven Central: {last[0]}")
    pom.unlink()


def java_command(home: Path, main_class: str, *args: str, heap_mb: int = 256, log4j: str = "tools-log4j.properties",
                 jvm_options: tuple[str, ...] = ()) -> list[str]:
    """The command line that runs ``main_class`` from the jars in ``home``: a small heap and
    serial GC, because several JVMs share a small machine and start-up time matters more here."""
    return ["java", f"-Xmx{heap_mb}m", f"-Xms{min(heap_mb, 64)}m", "-XX:+UseSerialGC", "-Xss512k",
            "-Djava.awt.headless=true", f"-Dlog4j.configuration=file:{home / log4j}", *jvm_options,
            "-cp", str(home / "libs" / "*"), main_class, *args]


def cluster_id() -> str:
    """A random Kafka cluster id (a UUID in URL-safe base64 without padding, as Kafka writes them)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class KafkaCluster:
    """One or three Apache Kafka nodes in KRaft mode on 127.0.0.1, each both broker and controller.

    Parameters
    ----------
    nodes
        How many nodes (1 or 3; every node is a voter of the controller quorum).
    base_dir
        Where each node keeps ``node<i>/server.properties``, ``node<i>/data`` (its log directory,
        durable across :meth:`kill` and :meth:`start`) and ``node<i>/server.log``. Default: a
        temporary directory removed by :meth:`stop`.
    replication
        Replication factor of new topics and of Kafka's internal topics (default: ``nodes``).
    extra_properties
        Broker properties added to (or overriding) the generated ones on every node, e.g.
        ``{"min.insync.replicas": 2}``.
    listeners
        Client listeners, name -> security protocol, e.g. ``{"PLAINTEXT": "PLAINTEXT",
        "SASL_SSL": "SASL_SSL"}``; each gets a free port per node. The first one is the
        inter-broker listener and the one :attr:`bootstrap` names (see :meth:`bootstrap_for`).
        Security settings (keystores, JAAS, SCRAM) go in ``extra_properties``.
    oauthbearer
        The name of a ``SASL_`` listener of ``listeners`` whose clients authenticate with
        SASL/OAUTHBEARER and Kafka's unsecured JWS tokens (:data:`UNSECURED_OAUTHBEARER`): a token
        whose header says ``"alg": "none"`` and whose claims hold ``sub`` (the principal) and an
        unexpired ``exp``. No identity provider is reachable from a test; a token endpoint that
        issues such tokens for a client id and secret stands in for one, and exercises what a
        client does with a real provider's signed tokens: the client-credentials grant, the
        token's lifetime, the SASL exchange.
    version, home
        The Kafka version to install, or an installed cache directory to use.
    heap_mb
        Each node's maximum heap.
    """

    #: Seconds a node gets to start, and to shut down cleanly before SIGKILL.
    start_timeout = 90.0
    stop_timeout = 15.0

    def __init__(self, nodes: int = 1, base_dir: str | Path | None = None, replication: int | None = None,
                 extra_properties: Mapping[str, object] | None = None, listeners: dict[str, str] | None = None,
                 version: str = KAFKA_VERSION, home: str | Path | None = None, heap_mb: int = 512,
                 oauthbearer: str | None = None) -> None:
        if nodes not in (1, 3):
            raise UsageError(f"a local Kafka cluster has 1 or 3 nodes, not {nodes}")
        self.nodes = nodes
        self.replication = replication or nodes
        if not 1 <= self.replication <= nodes:
            raise UsageError(f"replication must be between 1 and {nodes}, got {self.replication}")
        self.listeners = dict(listeners or {"PLAINTEXT": "PLAINTEXT"})
        if "CONTROLLER" in self.listeners:
            raise UsageError("the listener name CONTROLLER is reserved for the KRaft quorum")
        self.extra_properties: dict[str, object] = dict(extra_properties or {})
        if oauthbearer is not None:
            if not self.listeners.get(oauthbearer, "").startswith("SASL_"):
                raise UsageError(f"the OAUTHBEARER listener must be a SASL_PLAINTEXT or SASL_SSL listener, got "
                                 f"{oauthbearer!r}")
            prefix = f"listener.name.{oauthbearer.lower()}"
            self.extra_properties = {f"{prefix}.{key}": value for key, value in UNSECURED_OAUTHBEARER.items()} \
                | self.extra_properties
        self.version = version
        self.home = Path(home) if home else None
        self.heap_mb = heap_mb
        self._own_dir = base_dir is None
        self.base_dir = Path(base_dir) if base_dir else None
        # node -> listener -> port; the controller port of each node is under "CONTROLLER".
        self.ports = [{name: free_port() for name in [*self.listeners, "CONTROLLER"]} for _ in range(nodes)]
        self.processes: list[subprocess.Popen[bytes] | None] = [None] * nodes
        self.cluster_id = cluster_id()
        self._logs: list[TextIO | None] = [None] * nodes

    # -- addresses -------------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        """The bootstrap servers on the first listener, every node."""
        return self.bootstrap_for(next(iter(self.listeners)))

    def bootstrap_for(self, listener: str) -> str:
        return ",".join(f"127.0.0.1:{ports[listener]}" for ports in self.ports)

    def node_dir(self, node: int) -> Path:
        if self.base_dir is None:  # a temporary directory, made by start and removed by stop
            raise UsageError("the Kafka cluster has no directory while it is not started")
        return self.base_dir / f"node{node}"

    def log_path(self, node: int) -> Path:
        return self.node_dir(node) / "server.log"

    def alive(self, node: int) -> bool:
        return running(self.processes[node]) is not None

    # -- configuration ---------------------------------------------------------------------------
    def properties(self, node: int) -> dict[str, object]:
        ports = self.ports[node]
        voters = ",".join(f"{i}@127.0.0.1:{p['CONTROLLER']}" for i, p in enumerate(self.ports))
        client = list(self.listeners)
        internal_replication = self.replication
        return {
            "process.roles": "broker,controller",
            "node.id": node,
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "listeners": ",".join(f"{name}://127.0.0.1:{ports[name]}" for name in [*client, "CONTROLLER"]),
            "advertised.listeners": ",".join(f"{name}://127.0.0.1:{ports[name]}" for name in client),
            "listener.security.protocol.map": ",".join(
                [f"{name}:{protocol}" for name, protocol in self.listeners.items()] + ["CONTROLLER:PLAINTEXT"]),
            "inter.broker.listener.name": client[0],
            "log.dirs": str(self.node_dir(node) / "data"),
            "num.partitions": 1,
            "default.replication.factor": self.replication,
            "offsets.topic.replication.factor": internal_replication,
            "transaction.state.log.replication.factor": internal_replication,
            "transaction.state.log.min.isr": min(2, internal_replication),
            # Fewer internal partitions than Kafka's 50: a test cluster starts and elects faster.
            "offsets.topic.num.partitions": 4,
            "transaction.state.log.num.partitions": 4,
            # A consumer group's first join is not delayed by 3 s waiting for more members.
            "group.initial.rebalance.delay.ms": 0,
            # A killed node is fenced, and a restarted one back, within seconds rather than Kafka's 9.
            "broker.heartbeat.interval.ms": 500,
            "broker.session.timeout.ms": 3000,
            "log.segment.bytes": 64 * 1024 * 1024,
            **self.extra_properties,
        }

    def _write_properties(self, node: int) -> Path:
        path = self.node_dir(node) / "server.properties"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{key}={value}\n" for key, value in self.properties(node).items()))
        return path

    def java_cmd(self, main_class: str, *args: str, heap_mb: int = 256) -> list[str]:
        """A command running one of Kafka's own tools from the same jars, e.g.
        ``java_cmd("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", ...)``."""
        return java_command(self._installed(), main_class, *args, heap_mb=heap_mb)

    def _installed(self) -> Path:
        if self.home is None:
            self.home = install_kafka(self.version)
        return self.home

    # -- life cycle ------------------------------------------------------------------------------
    def start(self, node: int | None = None) -> "KafkaCluster":
        """Start every node (formatting fresh log directories), or restart one ``node`` with its data."""
        home = self._installed()
        if self.base_dir is None:
            self.base_dir = Path(tempfile.mkdtemp(prefix="wevent-kafka-"))
        targets = range(self.nodes) if node is None else [node]
        for n in targets:
            if self.alive(n):
                raise UsageError(f"Kafka node {n} is already running")
        try:
            self._format([n for n in targets if not (self.node_dir(n) / "data" / "meta.properties").exists()], home)
            for n in targets:
                self._launch(n, home)
            self.wait_ready(list(targets))
        except BaseException:
            if node is None:
                self.stop()
            raise
        return self

    def _format(self, nodes: list[int], home: Path) -> None:
        # All nodes' storage tools run at once: each is a JVM start of a few seconds.
        if not nodes:
            return
        # --cluster-id=ID: a random id may start with "-", which a separate argument would not survive.
        tools = [subprocess.Popen(java_command(home, "kafka.tools.StorageTool", "format",
                                               f"--cluster-id={self.cluster_id}", "-c", str(self._write_properties(n)),
                                               "--ignore-formatted", jvm_options=("-XX:TieredStopAtLevel=1",)),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for n in nodes]
        for n, tool in zip(nodes, tools):
            output, _ = tool.communicate(timeout=120)
            if tool.returncode != 0:
                raise UsageError(f"cannot format Kafka node {n}'s storage: {output.strip().splitlines()[-1:]}")

    def _launch(self, node: int, home: Path) -> None:
        properties = self._write_properties(node)
        previous = self._logs[node]
        if previous:
            previous.close()
        self._logs[node] = log = open(self.log_path(node), "a")
        self.processes[node] = subprocess.Popen(
            java_command(home, "kafka.Kafka", str(properties), heap_mb=self.heap_mb, log4j="log4j.properties"),
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent())  # a killed test run leaves no broker behind

    def wait_ready(self, nodes: list[int] | None = None, timeout: float | None = None) -> None:
        """Wait until ``nodes`` (default: all) accept clients and every live node is in the metadata."""
        from confluent_kafka.admin import AdminClient

        from .kafka import client_config

        nodes = list(range(self.nodes)) if nodes is None else nodes
        deadline = time.monotonic() + (timeout or self.start_timeout)
        listener = next(iter(self.listeners))
        for n in nodes:
            self._wait(lambda: self._accepts(n, listener), deadline, n)
        if self.listeners[listener] != "PLAINTEXT":
            return  # a secured first listener: the caller checks readiness with its credentials
        live = {n for n in range(self.nodes) if self.alive(n)}
        admin = AdminClient(client_config(self.bootstrap_for(listener)))

        def registered() -> bool:
            try:
                return set(admin.list_topics(timeout=2).brokers) >= live
            except Exception:  # noqa: BLE001 - a probe: any failure means not registered yet
                return False

        self._wait(registered, deadline, nodes[0])

    def _accepts(self, node: int, listener: str) -> bool:
        try:
            wait_for_port("127.0.0.1", self.ports[node][listener], timeout=0.2)
            return True
        except UsageError:
            return False

    def _wait(self, ready: Callable[[], bool], deadline: float, node: int) -> None:
        while not ready():
            if not self.alive(node):
                process = self.processes[node]
                status = process.poll() if process is not None else None
                raise UsageError(f"Kafka node {node} exited with status {status}: "
                                 f"{self.log_tail(node, 1).strip()} (log: {self.log_path(node)})")
            if time.monotonic() > deadline:
                raise UsageError(f"Kafka node {node} not ready after {self.start_timeout:.0f} s (log: {self.log_path(node)})")
            time.sleep(0.2)

    def kill(self, node: int) -> None:
        """SIGKILL one node (its log directory stays; :meth:`start` brings it back)."""
        process = running(self.processes[node])
        if process is not None:
            process.kill()
            process.wait()

    def reset(self) -> "KafkaCluster":
        """Start again from empty log directories, on the same ports (a clean slate for the next
        test when deleting topics and groups is not enough: a killed client's group keeps its
        members until their session times out)."""
        for node in range(self.nodes):
            self.kill(node)
            shutil.rmtree(self.node_dir(node), ignore_errors=True)
        self.cluster_id = cluster_id()
        return self.start()

    def stop(self) -> None:
        """Stop every node: SIGTERM all at once (a node alone would wait for a quorum to shut down
        cleanly), SIGKILL whatever still runs after :attr:`stop_timeout`; then remove the temporary
        directory if this cluster made it."""
        for process in map(running, self.processes):
            if process is not None:
                process.terminate()
        deadline = time.monotonic() + self.stop_timeout
        for node, process in enumerate(self.processes):
            if process is None:
                continue
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log = self._logs[node]
            if log:
                log.close()
                self._logs[node] = None
        if self._own_dir and self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            self.base_dir = None

    def log_tail(self, node: int, lines: int = 40) -> str:
        try:
            return "".join(self.log_path(node).read_text(errors="replace").splitlines(keepends=True)[-lines:])
        except OSError:
            return ""

    def __enter__(self) -> "KafkaCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m wevent.stream.runtime.apache_kafka",
                                     description="Start a local Apache Kafka (KRaft) and print its bootstrap servers.")
    parser.add_argument("--install", action="store_true", help="only fetch the jars into the cache, then exit")
    parser.add_argument("--nodes", type=int, choices=(1, 3), default=1)
    parser.add_argument("--dir", type=Path, help="keep the nodes' data here (default: a temporary directory)")
    parser.add_argument("--version", default=KAFKA_VERSION)
    args = parser.parse_args(argv)
    try:
        if args.install:
            print(install_kafka(args.version, quiet=False))
            return 0
        stopping = []
        signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
        with KafkaCluster(args.nodes, args.dir, version=args.version) as cluster:
            print(cluster.bootstrap, flush=True)
            try:
                while not stopping and all(cluster.alive(n) for n in range(cluster.nodes)):
                    time.sleep(0.5)
            except KeyboardInterrupt:
                pass
            dead = [n for n in range(cluster.nodes) if not cluster.alive(n)]
            if dead:
                print(f"Kafka node {dead[0]} stopped (log: {cluster.log_path(dead[0])})", file=sys.stderr)
                return 1
        return 0
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
