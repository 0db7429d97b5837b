"""``run`` over a stream gives what ``step`` slot by slot gives: the same releases, decisions and budgets,
for every central mechanism and both noises, across the chunks whose noise it draws ahead."""

import numpy as np
import pytest

import wevent.core.personalized  # noqa: F401  registers pbd and pba
from wevent.core.base import REGISTRY
from wevent.core.central import CentralMechanism, _base
from wevent.core.randomness import DerivedRandomness, SecretKey
from wevent.core.validation import ParameterError

CENTRAL = sorted(name for name, cls in REGISTRY.items() if issubclass(cls, CentralMechanism) and cls.model == "central")


def counts(slots: int, d: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rates = rng.uniform(20, 400, d) * (1 + 0.5 * np.sin(np.arange(slots)[:, None] / 15.0 + rng.uniform(0, 6, d)))
    return rng.poisson(rates).astype(float)


def mechanism(name: str, d: int, noise: str) -> CentralMechanism:
    return REGISTRY[name](1.0, 7, d, randomness=DerivedRandomness(SecretKey.from_seed(2)), noise=noise)


@pytest.mark.parametrize("noise", ["discrete", "laplace"])
@pytest.mark.parametrize("name", CENTRAL)
def test_run_is_step_by_step(name, noise, monkeypatch):
    monkeypatch.setattr(_base, "_CHUNK_VALUES", 48)  # chunks of 16 and 1 slots: the stream crosses many
    for d in (1, 3):
        stream = counts(90, d, seed=d)
        one_by_one = mechanism(name, d, noise)
        expected = [one_by_one.step(row) for row in stream]
        for given in (stream, iter(stream.tolist())):  # a matrix, or any iterable of rows
            results = mechanism(name, d, noise).run(given)
            assert len(results) == len(expected)
            for got, want in zip(results, expected):
                assert np.array_equal(got.release, want.release) and not got.release.flags.writeable
                assert (got.slot, got.strategy, got.eps1, got.eps2) == (want.slot, want.strategy, want.eps1, want.eps2)
                assert got.dissimilarity == want.dissimilarity and got.threshold == want.threshold


def test_run_continues_where_step_left_off():
    stream = counts(40, 4, seed=5)
    whole = mechanism("bd", 4, "discrete").run(stream)
    split = mechanism("bd", 4, "discrete")
    first = [split.step(row) for row in stream[:13]]
    assert [r.release.tolist() for r in first + split.run(stream[13:])] == [r.release.tolist() for r in whole]


@pytest.mark.parametrize("bad, message", [([[1.0, 2.0], [1.0, np.nan]], "finite"), ([[1.0, 2.0], [1.5, 2.0]], "whole"),
                                          ([[1.0, 2.0], [1.0, 2.0, 3.0]], "2 bins")])
def test_run_rejects_what_step_rejects(bad, message):
    with pytest.raises(ParameterError, match=message):
        mechanism("uniform", 2, "discrete").run(bad)


def test_a_restored_release_that_is_not_whole_is_refused_for_discrete_noise():
    m = mechanism("ba", 2, "discrete")
    state = m.state_dict()
    state["dynamic"]["last_release"] = np.array([1.0, 2.5])
    with pytest.raises(ParameterError, match="whole"):
        type(m).from_state(state, m.randomness)


@pytest.mark.parametrize("noise", ["discrete", "laplace"])
@pytest.mark.parametrize("name", ["pbd", "pba"])
def test_personalized_run_is_step_by_step(name, noise, monkeypatch):
    """The personalized mechanisms' run checks their (types, d) matrices a chunk at a time and draws DC's
    noise ahead: the same results as step."""
    monkeypatch.setattr(_base, "_CHUNK_VALUES", 40)
    rng = np.random.default_rng(3)
    sizes = np.array([40, 60, 50])
    stream = np.stack([rng.multinomial(size, [0.6, 0.4], size=70) for size in sizes], axis=1)  # (slots, types, d)

    def build():
        return REGISTRY[name]([4, 8, 6], [0.6, 1.0, 0.8], sizes, 2, noise=noise,
                              randomness=DerivedRandomness(SecretKey.from_seed(5)))

    one_by_one = build()
    expected = [one_by_one.step(row) for row in stream]
    results = build().run(stream)
    assert [r.release.tolist() for r in results] == [r.release.tolist() for r in expected]
    assert [(r.strategy, r.type_eps2.tolist(), r.dissimilarity) for r in results] == \
        [(r.strategy, r.type_eps2.tolist(), r.dissimilarity) for r in expected]
    with pytest.raises(ParameterError, match="registered"):
        build().run(stream + 100)
