"""``wevent bench central``: every central mechanism's time per slot against floors measured beside it.

For every registered central mechanism and ``d`` in ``--domains`` (1, 100 and 10,000 by default),
the microseconds a slot costs through :meth:`~wevent.core.central.CentralMechanism.run` with exact
discrete noise and with the papers' continuous Laplace noise, beside two floors timed in the same
process: numpy's Laplace vector draw of ``d`` values (``default_rng().laplace``: one C call on a
generator already built), and for Uniform, Sample, BD and BA a minimal numpy loop of the same rule
(:func:`minimal_loop`: the release rule with numpy's draws, no checks, no derived noise, no
results). Every figure is the median of ``--runs`` interleaved runs; the ratios are the
mechanism's time over the loop's (or over the draw's where there is no loop).

The noise draws are then timed alone (:func:`draw_times`): nanoseconds per value of a d-vector
of exact discrete noise and of floating-point Laplace noise, both from the server's keystream,
against numpy's Laplace vector draw, at d = 1, 100 and 10,000, and M1's scalar draws.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial

import numpy as np

from ..cli._help import add_command
from ..cli._common import LIMITS, check_cells, epsilon_value, run_count, seed, slot_count, window_length
from ..core.base import REGISTRY
from ..core.central import CentralMechanism
from ..core.noise import NOISE_KINDS
from ..core.randomness import DerivedRandomness, Phase, SecretKey

DRAW_SIZES = (1, 100, 10_000)
DOMAINS = (1, 100, 10_000)
MINIMAL = ("uniform", "sample", "bd", "ba")  # the rules written as a minimal loop here
_COUNTS_PER_RUN = 200_000  # counts a timing steps through, in 20 to 2,000 slots: up to about a second a run


def central_mechanisms() -> list[str]:
    return sorted(name for name, cls in REGISTRY.items() if issubclass(cls, CentralMechanism) and cls.model == "central")


def register(sub) -> None:
    p = add_command(
        sub, "central", summary="every central mechanism's time per slot against numpy floors",
        description="Time every central mechanism's step per slot at a few domain sizes, against numpy floors (the cost of one noise draw and one histogram pass at that size), and print the ratios.",
        examples=[
        ('the default domains, 1, 100 and 10000 bins', 'wevent bench central'),
        ('one quick timing at 100 bins', 'wevent bench central --domains 100 --runs 1')])
    p.add_argument("--domains", type=_domains, default=DOMAINS, metavar="D,D,...",
                   help="bins d to time (default: 1,100,10000)")
    p.add_argument("--slots", type=slot_count, default=None, metavar="N",
                   help=f"slots per timing (default: {_COUNTS_PER_RUN:,} counts' worth, 20 to 2,000 slots)")
    p.add_argument("--runs", type=run_count, default=3,
                   help="interleaved runs of every timing; medians are printed (default: 3)")
    p.add_argument("--epsilon", type=epsilon_value, default=1.0)
    p.add_argument("--window", type=window_length, default=20)
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--draw-epsilon", type=epsilon_value, default=0.0125,
                   help="per-unit epsilon of the timed noise draws (default: 0.0125)")
    p.add_argument("--draw-runs", type=run_count, default=15,
                   help="interleaved runs of the noise-draw timings; medians are printed (default: 15)")
    p.set_defaults(handler=handle)


def _domains(text: str) -> tuple[int, ...]:
    try:
        domains = tuple(int(part) for part in text.split(","))
    except ValueError:
        domains = ()
    if not domains or min(domains) < 1 or max(domains) > LIMITS["domain"]:
        raise argparse.ArgumentTypeError(f"must be bin counts 1..{LIMITS['domain']:,} separated by commas, got {text!r}")
    return domains


def drifting_counts(slots: int, domain: int, seed: int) -> np.ndarray:
    """Poisson counts around slowly drifting per-bin rates (so BD/BA both publish and skip)."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(50, 500, domain)
    phase = rng.uniform(0, 2 * np.pi, domain)
    t = np.arange(slots)[:, None]
    rates = base * (1 + 0.5 * np.sin(2 * np.pi * t / 2000.0 + phase))
    return rng.poisson(rates).astype(float)


def minimal_loop(kind: str, epsilon: float, window: int, counts: np.ndarray, rng: np.random.Generator) -> list:
    """The release rule of ``kind`` (Uniform, Sample, BD or BA at their default options) as a plain
    loop over slots with numpy's Laplace draws: each slot's release, and nothing else."""
    d = counts.shape[1]
    releases, last = [], np.zeros(d)
    if kind in ("uniform", "sample"):
        scale, every = (window / epsilon, 1) if kind == "uniform" else (1.0 / epsilon, window)
        for t, row in enumerate(counts):
            if t % every == 0:
                last = row + rng.laplace(0.0, scale, d)
            releases.append(last)
        return releases
    eps1 = epsilon / (2 * window)
    pool, m1_scale = epsilon / 2, 1.0 / (d * eps1)
    recent, spent = np.zeros(max(window - 1, 1)), 0.0  # BD: the last w-1 publication budgets and their sum
    last_publication, last_units = 0, 1  # BA
    for t, row in enumerate(counts, start=1):
        dis = float(np.abs(last - row).sum()) / d + rng.laplace(0.0, m1_scale)
        if kind == "bd":
            eps2 = (pool - spent) / 2
            publish = dis > 1.0 / eps2
        else:
            units = min(t - (last_publication + last_units - 1), window)
            eps2 = pool / window * units
            publish = t - last_publication > last_units - 1 and dis > 1.0 / eps2
        if publish:
            last = row + rng.laplace(0.0, 1.0 / eps2, d)
            if kind == "ba":
                last_publication, last_units = t, units
        if kind == "bd" and window > 1:
            ring = t % (window - 1)
            spent += (eps2 if publish else 0.0) - recent[ring]
            recent[ring] = eps2 if publish else 0.0
        releases.append(last)
    return releases


def slot_times(names: list[str], domains: tuple[int, ...], slots: int | None, runs: int, epsilon: float,
               window: int, key_seed: int) -> dict[tuple[str, str, int], float]:
    """Microseconds per slot, medians of ``runs`` interleaved runs: ``(name, noise, d)`` for every
    mechanism and noise kind, ``("numpy draw", "", d)`` and ``(kind, "minimal loop", d)`` for the floors."""
    timings: dict[tuple[str, str, int], list[float]] = {}
    streams = {d: drifting_counts(slots or min(2_000, max(20, _COUNTS_PER_RUN // d)), d, key_seed) for d in domains}
    rng = np.random.default_rng(key_seed)
    classes = {name: cls for name, cls in REGISTRY.items() if name in names and issubclass(cls, CentralMechanism)}

    def timed(key: tuple[str, str, int], run: Callable[[], object], count: int) -> None:
        start = time.perf_counter()
        run()
        timings.setdefault(key, []).append((time.perf_counter() - start) * 1e6 / count)

    for _ in range(runs):
        for d, counts in streams.items():
            timed(("numpy draw", "", d), lambda: [rng.laplace(0.0, 1.0, d) for _ in range(len(counts))], len(counts))
            for kind in MINIMAL:
                if kind in names:
                    timed((kind, "minimal loop", d), lambda: minimal_loop(kind, epsilon, window, counts, rng), len(counts))
            for name in names:
                for noise in NOISE_KINDS:
                    randomness = DerivedRandomness(SecretKey.from_seed(key_seed), "bench")
                    mechanism = classes[name](epsilon, window, d, randomness=randomness, noise=noise)
                    timed((name, noise, d), lambda: mechanism.run(counts), len(counts))
    return {key: statistics.median(values) for key, values in timings.items()}


def handle(args) -> int:
    if args.slots is not None:
        check_cells(slots=args.slots, domains=max(args.domains))
    names = central_mechanisms()
    times = slot_times(names, args.domains, args.slots, args.runs, args.epsilon, args.window, args.seed)
    print(f"central mechanisms, us per slot (medians of {args.runs} interleaved runs), epsilon = {args.epsilon:g}, "
          f"w = {args.window}; floors in this process: numpy's Laplace draw of d values, and a minimal numpy loop of "
          f"the rule ({', '.join(MINIMAL)}); ratios over the loop, else over the draw")
    print(f"{'d':>7} {'mechanism':<11} {'discrete':>10} {'laplace':>10} {'numpy draw':>11} {'minimal loop':>13} "
          f"{'discrete x':>11} {'laplace x':>10}")
    for d in args.domains:
        draw = times["numpy draw", "", d]
        for name in names:
            loop = times.get((name, "minimal loop", d))
            floor = loop if loop is not None else draw
            exact, floating = times[name, "discrete", d], times[name, "laplace", d]
            shown = f"{loop:>13,.1f}" if loop is not None else f"{'-':>13}"
            print(f"{d:>7,} {name:<11} {exact:>10,.1f} {floating:>10,.1f} {draw:>11,.1f} {shown} "
                  f"{exact / floor:>10.2f}x {floating / floor:>9.2f}x")
    vectors, scalars = draw_times(args.draw_epsilon, args.draw_runs, args.seed)
    print(f"noise draws at epsilon = {args.draw_epsilon:g}, ns per value, medians of {args.draw_runs} interleaved runs; "
          "numpy's Laplace vector draw is the floor")
    print(f"{'d':>8} {'numpy laplace':>14} {'discrete':>10} {'ratio':>7} {'laplace-fp-unsafe':>18} {'ratio':>7}")
    for d in DRAW_SIZES:
        floor, exact, floating = (vectors[kind, d] for kind in ("numpy", "discrete", "laplace"))
        print(f"{d:>8,} {floor:>14,.1f} {exact:>10,.1f} {exact / floor:>6.2f}x {floating:>18,.1f} {floating / floor:>6.2f}x")
    print(f"scalar draw (M1): discrete {scalars['discrete']:,.0f} ns, laplace-fp-unsafe {scalars['laplace']:,.0f} ns, "
          f"numpy laplace {scalars['numpy']:,.0f} ns")
    return 0


def draw_times(epsilon: float, runs: int, key_seed: int) -> tuple[dict, dict]:
    """Nanoseconds per value of each kind of noise draw, medians of ``runs`` interleaved runs.

    ``vectors[kind, d]`` for kind numpy (the floor), discrete and laplace at each of
    :data:`DRAW_SIZES`; ``scalars[kind]`` for one value (``size=None``, M1's draw). Every call
    draws a new slot's noise, as a stream does.
    """
    randomness = DerivedRandomness(SecretKey.from_seed(key_seed), "bench-draws")
    rng = np.random.default_rng(key_seed)
    scale = 1.0 / epsilon

    def numpy_draw(slot: int, d: int | None) -> object:
        return rng.laplace(0.0, scale, d)

    def discrete_draw(slot: int, d: int | None) -> object:
        return randomness.discrete_laplace(slot, Phase.PUBLICATION, epsilon, d)

    def laplace_draw(slot: int, d: int | None) -> object:
        return randomness.laplace(slot, Phase.PUBLICATION, scale, d)

    kinds = {"numpy": numpy_draw, "discrete": discrete_draw, "laplace": laplace_draw}
    draws: dict[tuple[str, int | None], Callable[[int], object]] = {
        (kind, d): partial(draw, d=d) for d in (*DRAW_SIZES, None) for kind, draw in kinds.items()}
    timings: dict[tuple[str, int | None], list[float]] = {key: [] for key in draws}
    slot = 0
    for _ in range(runs):
        for (kind, d), draw in draws.items():
            calls = max(2, 100_000 // ((d or 1) + 99))  # a few milliseconds per timing
            start = time.perf_counter()
            for _ in range(calls):
                slot += 1
                draw(slot)
            timings[kind, d].append((time.perf_counter() - start) * 1e9 / (calls * (d or 1)))
    medians = {key: statistics.median(times) for key, times in timings.items()}
    return ({key: value for key, value in medians.items() if key[1] is not None},
            {kind: value for (kind, d), value in medians.items() if d is None})
