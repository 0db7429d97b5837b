"""``wevent bench central``: BD and BA against a naive per-element Python implementation, then the noise.

Both implementations run the same mechanism on the same counts with the same derived noise, so
the benchmark also checks that their releases agree before it prints the speed ratio. The naive
one gets its noise from the same per-slot derivation (that cost is the mechanism's, not the
implementation's) and does all per-bin arithmetic in Python loops. ``--noise`` picks exact
discrete noise (the default) or the papers' continuous Laplace.

The noise draws are then timed alone (:func:`draw_times`): nanoseconds per value of a d-vector
of exact discrete noise and of floating-point Laplace noise, both from the server's keystream,
against numpy's Laplace vector draw (``default_rng().laplace``, the floor: one C call on a
generator already built), at d = 1, 100 and 10,000, as medians of interleaved runs in this
process, and M1's scalar draws.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

from ..core.central import BudgetAbsorption, BudgetDistribution
from ..cli._common import LIMITS, bin_count, check_cells, epsilon_value, integer, seed, slot_count, window_length
from ..core.noise import NOISE_KINDS
from ..core.randomness import DerivedRandomness, Phase, SecretKey

DRAW_SIZES = (1, 100, 10_000)


def register(sub) -> None:
    p = sub.add_parser("central", help="BD/BA speed against a naive per-element Python loop")
    p.add_argument("--slots", type=slot_count, default=100_000, help="slots for the vectorised run (default: 100000)")
    p.add_argument("--naive-slots", type=slot_count, default=10_000, help="slots for the naive run (default: 10000)")
    p.add_argument("--domain", type=bin_count, default=100, help="bins d (default: 100)")
    p.add_argument("--epsilon", type=epsilon_value, default=1.0)
    p.add_argument("--window", type=window_length, default=20)
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--noise", choices=NOISE_KINDS, default="discrete", help="noise kind (default: discrete)")
    p.add_argument("--draw-epsilon", type=epsilon_value, default=0.0125,
                   help="per-unit epsilon of the timed noise draws (default: 0.0125)")
    p.add_argument("--draw-runs", type=integer(1, LIMITS["runs"]), default=15,
                   help="interleaved runs of the noise-draw timings; medians are printed (default: 15)")
    p.set_defaults(handler=handle)


def drifting_counts(slots: int, domain: int, seed: int) -> np.ndarray:
    """Poisson counts around slowly drifting per-bin rates (so BD/BA both publish and skip)."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(50, 500, domain)
    phase = rng.uniform(0, 2 * np.pi, domain)
    t = np.arange(slots)[:, None]
    rates = base * (1 + 0.5 * np.sin(2 * np.pi * t / 2000.0 + phase))
    return rng.poisson(rates).astype(float)


def naive_run(kind: str, epsilon: float, window: int, counts: np.ndarray, randomness: DerivedRandomness,
              noise: str = "discrete") -> list:
    """The textbook loop: every bin handled one at a time in Python (the baseline)."""
    domain = len(counts[0])
    eps1 = epsilon / (2 * window)
    pool = epsilon - window * eps1  # budgets computed as the mechanisms do, so noise is drawn at equal epsilons
    unit = pool / window
    last = [0.0] * domain
    recent = np.zeros(window - 1)  # BD: publication budgets of the last w-1 slots, a ring indexed by slot
    last_pub, last_units = 0, 1  # BA
    out = []
    for slot, row in enumerate(counts, start=1):
        total = 0.0
        for j in range(domain):
            total += abs(last[j] - row[j])
        if noise == "discrete":
            dis = (int(min(total, 2.0**52)) + randomness.discrete_laplace(slot, Phase.DISSIMILARITY, eps1)) / domain
        else:
            dis = total / domain + randomness.laplace(slot, Phase.DISSIMILARITY, (1.0 / domain) / eps1)
        if kind == "bd":
            eps2 = (pool - float(recent.sum())) / 2
            publish = dis > 1 / eps2
        else:
            nullified = slot - last_pub <= last_units - 1
            units = min(slot - (last_pub + last_units - 1), window)
            eps2 = unit * units
            publish = not nullified and dis > 1 / eps2
        if publish:
            if noise == "discrete":
                draw = randomness.discrete_laplace(slot, Phase.PUBLICATION, eps2, domain).tolist()
                last = [float(int(row[j]) + draw[j]) for j in range(domain)]
            else:
                draw = randomness.laplace(slot, Phase.PUBLICATION, 1 / eps2, domain)
                last = [row[j] + draw[j] for j in range(domain)]
            if kind == "ba":
                last_pub, last_units = slot, units
        if kind == "bd" and window > 1:
            recent[slot % (window - 1)] = eps2 if publish else 0.0
        out.append(list(last))
    return out


def handle(args) -> int:
    check_cells(slots=args.slots, domain=args.domain)
    counts = drifting_counts(args.slots, args.domain, args.seed)
    naive_slots = min(args.naive_slots, args.slots)
    print(f"BD/BA over {args.slots:,} slots, d = {args.domain}, epsilon = {args.epsilon:g}, w = {args.window}, "
          f"{args.noise} noise; "
          f"naive baseline on the first {naive_slots:,} slots")
    print(f"{'mechanism':<10} {'wevent slots/s':>15} {'naive slots/s':>15} {'speed-up':>9} {'published':>10} {'agree':>6}")
    for name, cls in (("bd", BudgetDistribution), ("ba", BudgetAbsorption)):
        randomness = DerivedRandomness(SecretKey.from_seed(args.seed), "bench")
        mechanism = cls(args.epsilon, args.window, args.domain, randomness=randomness, noise=args.noise)
        start = time.perf_counter()
        results = mechanism.run(counts)
        fast = args.slots / (time.perf_counter() - start)
        start = time.perf_counter()
        naive = naive_run(name, args.epsilon, args.window, counts[:naive_slots], randomness, args.noise)
        slow = naive_slots / (time.perf_counter() - start)
        agree = all(np.allclose(r.release, n, rtol=0, atol=1e-9) for r, n in zip(results, naive))
        published = sum(r.published for r in results)
        print(f"{name:<10} {fast:>15,.0f} {slow:>15,.0f} {fast / slow:>8.1f}x {published:>10,} {str(agree):>6}")
        if not agree:
            return 1
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
    draws: dict[tuple[str, int | None], Callable[[int], object]] = {}
    for d in (*DRAW_SIZES, None):
        draws["numpy", d] = lambda slot, d=d: rng.laplace(0.0, scale, d)
        draws["discrete", d] = lambda slot, d=d: randomness.discrete_laplace(slot, Phase.PUBLICATION, epsilon, d)
        draws["laplace", d] = lambda slot, d=d: randomness.laplace(slot, Phase.PUBLICATION, scale, d)
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
