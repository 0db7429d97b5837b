"""Watching `wevent run` and the processes it starts from outside, through /proc."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

KEY_VARIABLES = ("WEVENT_NOISE_KEY", "WEVENT_DEVICE_KEY")


def environment(tmpdir: Path, **extra: str) -> dict:
    """This environment without any key, with ``tmpdir`` as the temporary directory (so that a test
    sees exactly the directories its own run leaves behind)."""
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES + ("WEVENT_BOOTSTRAP",)}
    tmpdir.mkdir(exist_ok=True)
    return env | {"TMPDIR": str(tmpdir)} | extra


def wevent_run(arguments: list[str], env: dict, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wevent.cli", "run", *arguments], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout)


def releases(path: Path) -> dict[int, dict]:
    """slot -> release record, from a release log."""
    return {r["slot"]: r for r in map(json.loads, path.read_text().splitlines())}


def children(pid: int) -> dict[int, list[str]]:
    """The live child processes of ``pid`` (pid -> argv), zombies excluded."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            argv = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except OSError:  # the process ended meanwhile
            continue
        state, ppid = text.rpartition(")")[2].split()[:2]
        if int(ppid) == pid and state != "Z":
            found[int(stat.parent.name)] = [a.decode(errors="replace") for a in argv if a]
    return found


def command_of(argv: list[str]) -> str:
    """What a child of `wevent run` is: "broker", or its wevent subcommand ("worker", "devices")."""
    return "broker" if argv[1:2] == ["broker"] else argv[argv.index("wevent.cli") + 1]


def start_run(arguments: list[str], env: dict, directory: Path) -> subprocess.Popen:
    """`wevent run` in the background, its output in ``directory``/stdout and stderr."""
    with open(directory / "stdout", "w") as stdout, open(directory / "stderr", "w") as stderr:
        return subprocess.Popen([sys.executable, "-m", "wevent.cli", "run", *arguments], stdout=stdout,
                                stderr=stderr, env=env, cwd=directory)


def first_release(directory: Path, timeout: float = 120) -> bool:
    return wait_for(lambda: (directory / "stdout").read_text().startswith("taxi"), timeout)


def kill_a_child(directory: Path, kind: str, arguments: list[str]) -> tuple[int, list[str], float, str]:
    """`wevent run` with ``arguments`` until its first release, then SIGKILL its child ``kind``
    ("broker", "worker", "devices"). Returns the run's exit status, the lines it wrote on stderr
    after the kill, the seconds it took to end, and the whole of its stderr; every child must end."""
    run = start_run(arguments, environment(directory / "tmp"), directory)
    err = directory / "stderr"
    started = {}
    try:
        assert first_release(directory), err.read_text()
        started = children(run.pid)
        before = len(err.read_text().splitlines())
        killed = time.monotonic()
        os.kill(next(pid for pid, argv in started.items() if command_of(argv) == kind), signal.SIGKILL)
        try:
            status = run.wait(60)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the run still runs 60 s after its {kind} died; stderr ends with "
                                 f"{err.read_text()[-2000:]}") from None
        seconds = time.monotonic() - killed
        assert wait_for(lambda: not any(alive(pid) for pid in started), 10), \
            {pid: started[pid] for pid in started if alive(pid)}
        return status, err.read_text().splitlines()[before:], seconds, err.read_text()
    finally:
        kill_leftovers(run, started)


def kill_leftovers(run: subprocess.Popen, started) -> None:
    """After a failed test: the run and the children it was seen to start (by their own pids)."""
    if run.poll() is None:
        run.kill()
        run.wait()
    for pid in {*started, *children(run.pid)}:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def process_environment(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.decode(errors="replace").partition("=")[::2] for item in raw.split(b"\0") if item)


def wait_for(predicate, timeout: float, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


def listening_addresses(port: int) -> set[str]:
    """The addresses with a TCP socket listening on ``port`` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("tcp", "tcp6"):
        path = Path("/proc/net") / table
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].rsplit(":", 1)
            if fields[3] == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                raw = b"".join(bytes.fromhex(address[i:i + 8])[::-1] for i in range(0, len(address), 8))
                found.add(str(ipaddress.ip_address(raw)))
    return found


def non_loopback_address() -> str | None:
    """An IPv4 address of this machine other than loopback, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # a UDP "connection" only picks the outgoing address: nothing is sent
            address = s.getsockname()[0]
        except OSError:
            return None
    return None if ipaddress.ip_address(address).is_loopback else address


def refuses(address: str, port: int) -> bool:
    try:
        socket.create_connection((address, port), 2).close()
    except ConnectionRefusedError:
        return True
    return False


def started_ports(stderr_text: str) -> tuple[int, int]:
    """The worker's web port and the truth port, from `wevent run`'s first line."""
    match = re.search(r"worker metrics http://[\d.]+:(\d+)/metrics; error against truth http://[\d.]+:(\d+)/",
                      stderr_text)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def peak_rss_mib(pid: int) -> float:
    """The largest resident set a live process has had so far (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise ValueError(f"/proc/{pid}/status has no VmHWM")


def record_peak_memory(record_property, processes: dict[str, int]) -> None:
    """Each live process's peak RSS (MiB; name -> pid) as a test property and on stdout (seen with ``-s``)."""
    for name, pid in processes.items():
        mib = peak_rss_mib(pid)
        record_property(f"peak_rss_mib_{name}", round(mib))
        print(f"peak RSS {name}: {mib:.0f} MiB")


def window_under_test() -> int:
    """w of the scale tests: 5 (2w + 2 slots keep them cheap), or ``WEVENT_SCALE_WINDOW`` for a run
    at a paper's own window (20 in LDP-IDS), 2w + 2 slots again: about three times as long."""
    return int(os.environ.get("WEVENT_SCALE_WINDOW", "5"))
