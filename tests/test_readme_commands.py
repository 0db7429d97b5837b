"""README's commands run as written: every ```sh, ```bash and ```shell block of README.md,
docker/README.md and helm/README.md runs as a user would run it, and exits 0.

Each block runs on its own in ``bash -e -o pipefail``, in a temporary directory that holds a
symbolic link to every top-level entry of the checkout (so `docker/config/streams.toml` and
`producers/fixtures` resolve, and whatever a block writes lands in the temporary directory), with
this environment's ``wevent`` first on the path and no ``WEVENT_*`` variable inherited. The
comment on the line before a block says how it runs:

* ``<!-- not run: REASON -->``: the block cannot run here (a Docker engine, a cluster, a dataset
  download, the full reproduction); the test skips it with that reason.
* ``<!-- beside: wevent run -->``: the block is typed in another terminal while ``wevent run``
  goes on: the test starts ``wevent run`` and gives the block ``WEVENT_BOOTSTRAP`` and
  ``WEVENT_RELEASE_PUBLIC_KEY`` from the ``wevent subscribe`` line the run prints.
* ``<!-- kafka -->``: the block runs against a Kafka of one's own, ``$WEVENT_BOOTSTRAP``: here
  the local Apache Kafka of the integration tests.

Every other block runs as it is. Python blocks of README.md run as doctests.
"""

from __future__ import annotations

import doctest
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDES = ("README.md", "docker/README.md", "helm/README.md")
SHELLS = ("sh", "bash", "shell")
BLOCK_SECONDS = 300  # the longest block (a local-model run, the reproduction of one paper) takes about a minute
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.M | re.S)
MARKER = re.compile(r"<!-- (not run: (?P<reason>.+?)|beside: wevent run|kafka) -->\s*$")


@dataclass(frozen=True)
class Block:
    guide: str
    line: int
    language: str
    text: str
    marker: str  # the comment before it, or ""

    @property
    def id(self) -> str:
        return f"{self.guide}:{self.line}"


def blocks(language: tuple[str, ...]) -> list[Block]:
    found = []
    for guide in GUIDES:
        text = (ROOT / guide).read_text()
        for match in FENCE.finditer(text):
            if match.group(1) not in language:
                continue
            before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marker = before if MARKER.search(before) else ""
            found.append(Block(guide, text.count("\n", 0, match.start()) + 1, match.group(1), match.group(2), marker))
    return found


def test_every_command_block_is_labelled():
    """A block without a language would escape this test: every fence names its language."""
    for guide in GUIDES:
        for match in FENCE.finditer((ROOT / guide).read_text()):
            assert match.group(1), f"{guide}: a ``` block without a language: {match.group(2)[:60]!r}"


def test_the_guides_have_commands_of_every_kind():
    found = blocks(SHELLS)
    assert len(found) >= 15
    assert {b.marker.split(":")[0] for b in found} >= {"", "<!-- not run", "<!-- beside", "<!-- kafka -->"}


@pytest.fixture
def checkout_dir(tmp_path: Path) -> Path:
    for entry in ROOT.iterdir():
        if entry.name not in (".git", ".venv") and not entry.name.startswith(".pytest"):
            (tmp_path / entry.name).symlink_to(entry)
    return tmp_path


def user_environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEVENT_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def run_block(block: Block, cwd: Path, env: dict[str, str]) -> None:
    try:
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.text], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=BLOCK_SECONDS)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{block.id} did not finish in {BLOCK_SECONDS} s:\n{block.text}\n{exc.stderr}")
    assert done.returncode == 0, f"{block.id} exited {done.returncode}:\n{block.text}\n{done.stdout}\n{done.stderr}"


def skip_if_not_run(block: Block) -> None:
    found = MARKER.search(block.marker)
    if found and found.group("reason"):
        pytest.skip(f"{block.id}: not run: {found.group('reason')}")


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in blocks(SHELLS) if "beside" not in b.marker and "kafka" not in b.marker],
                         ids=lambda b: b.id)
def test_block_runs(block: Block, checkout_dir: Path):
    skip_if_not_run(block)
    run_block(block, checkout_dir, user_environment())


class BackgroundRun:
    """``wevent run`` as a user starts it in one terminal; its ``wevent subscribe`` line gives the
    address and key the other terminal uses."""

    PRINTED = re.compile(r"follow it from another terminal: (wevent subscribe .*)$", re.M)

    def __init__(self, cwd: Path) -> None:
        self.log = cwd / "run.err"
        with open(self.log, "w") as err:
            self.process = subprocess.Popen(["wevent", "run", "--quiet"], cwd=cwd, env=user_environment(),
                                            stdout=subprocess.DEVNULL, stderr=err)

    def subscribe_command(self, timeout: float = 120.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.PRINTED.search(self.log.read_text())
            if found:
                return shlex.split(found.group(1))
            assert self.process.poll() is None, f"wevent run ended:\n{self.log.read_text()}"
            time.sleep(0.2)
        pytest.fail(f"wevent run printed no subscribe line in {timeout} s:\n{self.log.read_text()}")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in blocks(SHELLS) if "beside" in b.marker], ids=lambda b: b.id)
def test_block_beside_a_run(block: Block, checkout_dir: Path):
    run = BackgroundRun(checkout_dir)
    try:
        command = run.subscribe_command()
        options = dict(zip(command[2::2], command[3::2]))
        env = user_environment(WEVENT_BOOTSTRAP=options["--bootstrap"],
                               WEVENT_RELEASE_PUBLIC_KEY=options["--release-key"])
        run_block(block, checkout_dir, env)
        # the printed line itself, as pasted, with a limit so that it ends
        run_block(Block(block.guide, block.line, "sh", shlex.join(command) + " --limit 1", ""), checkout_dir,
                  user_environment())
    finally:
        run.stop()


@pytest.fixture(scope="module")
def guide_kafka(tmp_path_factory):
    """A Kafka of the guide's own, as a reader starts with: the blocks create its topics in their
    order, and no other test's topics are there."""
    from wevent.stream.runtime.apache_kafka import KafkaCluster

    with KafkaCluster(1, tmp_path_factory.mktemp("guide-kafka")) as cluster:
        yield cluster


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in blocks(SHELLS) if "kafka" in b.marker], ids=lambda b: b.id)
def test_block_on_kafka(block: Block, checkout_dir: Path, guide_kafka):
    run_block(block, checkout_dir, user_environment(WEVENT_BOOTSTRAP=guide_kafka.bootstrap))


def test_readme_python_blocks_run_as_doctests():
    python = blocks(("python",))
    assert [b.guide for b in python] and all(b.guide == "README.md" for b in python)
    for block in python:
        test = doctest.DocTestParser().get_doctest(block.text, {}, block.id, "README.md", block.line)
        assert test.examples, f"{block.id}: a python block without examples"
        report: list[str] = []
        result = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS).run(test, out=report.append)
        assert result.failed == 0, "".join(report)
