"""A mechanism class with one option, defined here, is everywhere once it is registered.

Its declaration is the only place its option is written: `wevent simulate` lists and takes it,
the stream configuration loads a stream of it and refuses a bad value in one line, and the Helm
chart's values schema (generated) says it, with nothing else edited.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from wevent.cli import main
from wevent.core.base import Strategy
from wevent.core.central import Uniform
from wevent.core.options import Option
from wevent.core.registry import REGISTRY
from wevent.stream.config import ConfigError, parse_config
from wevent.stream.helm_schema import helm_schema_text

from tests.stream.harness import InProcessPipeline
from tests.stream.test_config import HELM_SCHEMA


@pytest.fixture
def toy():
    class EveryKth(Uniform):
        """Uniform's release at every k-th slot only; the slots between repeat it and spend nothing."""

        name = "toy-every"
        OPTIONS = {"every": Option.integer("publish at every k-th slot", 1, 100, example=3)}

        def __init__(self, epsilon, window, domain_size, *, every=1, randomness=None, clamp_round=False,
                     noise="discrete", decision_override=None):
            super().__init__(epsilon, window, domain_size, randomness=randomness, clamp_round=clamp_round,
                             noise=noise, decision_override=decision_override)
            self.every = every

        def _publish(self, slot, counts, dissimilarity):
            if (slot - 1) % self.every:
                return self._repeat(slot, Strategy.APPROXIMATE)
            return super()._publish(slot, counts, dissimilarity)

        def _params(self):
            return {**super()._params(), "every": self.every}

    yield EveryKth
    del REGISTRY["toy-every"]


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_wevent_simulate_lists_the_option_with_its_range_and_default_and_runs_it(toy, capsys, tmp_path):
    code, out, _ = run(capsys, "simulate", "--help")
    assert code == 0 and "toy-every" in out
    assert "toy-every: publish at every k-th slot (>= 1 and <= 100; default: 1)" in " ".join(out.split())
    log = tmp_path / "releases.jsonl"
    code, out, _ = run(capsys, "simulate", "-m", "toy-every", "--every", "3", "--slots", "30", "--users", "500",
                       "--json", "--releases", str(log))
    summary = json.loads(out)
    assert code == 0 and summary["mechanism"] == "toy-every" and summary["publications"] == 10  # slots 1, 4, ..., 28
    assert [json.loads(line)["strategy"] for line in log.read_text().splitlines()][:4] == [
        "publish", "approximate", "approximate", "publish"]
    code, _, err = run(capsys, "simulate", "-m", "toy-every", "--every", "0")
    assert code == 2 and err == "wevent simulate: error: --every must be an integer >= 1 and <= 100, got 0\n"


def stream(**options):
    return {"name": "toy", "model": "central", "mechanism": "toy-every", "epsilon": 1.0, "window": 5, "domain": 2,
            "users": 40, "slot_seconds": 60, "start": 1_200_000_000, "options": options}


def test_a_stream_config_of_it_loads_and_refuses_a_bad_value_in_one_line(toy):
    config = parse_config({"seed": 3, "report_partitions": 1, "stream_partitions": 1, "streams": [stream(every=3)]})
    assert config.streams[0].mechanism_options == {"every": 3}
    with pytest.raises(ConfigError) as refused:
        parse_config({"streams": [stream(every=0)]})
    assert str(refused.value) == "stream 'toy': options.every must be >= 1 and <= 100, got 0"
    with pytest.raises(ConfigError, match="options.every must be an integer, got '3'"):
        parse_config({"streams": [stream(every="3")]})
    # and it runs on the processors like any central mechanism: the releases are the core's
    pipeline = InProcessPipeline(config)
    values = np.random.default_rng(0).integers(0, 2, (9, 40))
    spec = config.stream("toy")
    for slot in range(1, 10):
        pipeline.send_slot("toy", spec.slot_start(slot), spec.slot_end(slot), np.arange(40), values[slot - 1])
    pipeline.run()
    from wevent.core.randomness import DerivedRandomness, SecretKey

    core = toy(1.0, 5, 2, every=3, randomness=DerivedRandomness(SecretKey.from_seed(3), "toy"))
    expected = core.run(np.stack([np.bincount(v, minlength=2) for v in values]).astype(float))
    assert [r.release for r in pipeline.releases("toy")] == [r.release.tolist() for r in expected]


def test_the_generated_helm_schema_has_it_with_its_option(toy):
    generated = json.loads(helm_schema_text(HELM_SCHEMA.read_text()))["properties"]["config"]
    items = generated["properties"]["streams"]["items"]
    assert "toy-every" in items["properties"]["mechanism"]["enum"]
    [rule] = [r for r in items["allOf"] if r["if"]["properties"]["mechanism"]["const"] == "toy-every"]
    every = rule["then"]["properties"]["options"]["properties"]["every"]
    assert every == {"description": "publish at every k-th slot", "type": "integer", "minimum": 1, "maximum": 100}
