"""``wevent bench central``: BD and BA against a naive per-element Python implementation.

Both implementations run the same mechanism on the same counts with the same derived noise, so
the benchmark also checks that their releases agree before it prints the speed ratio. The naive
one gets its noise from the same per-slot derivation (that cost is the mechanism's, not the
implementation's) and does all per-bin arithmetic in Python loops. ``--noise`` picks exact
discrete noise (the default) or the papers' continuous Laplace.
"""

from __future__ import annotations

import time

import numpy as np

from ..core.central import BudgetAbsorption, BudgetDistribution
from ..cli._common import bin_count, check_cells, epsilon_value, seed, slot_count, window_length
from ..core.noise import NOISE_KINDS
from ..core.randomness import DerivedRandomness, Phase, SecretKey


def register(sub) -> None:
    p = sub.add_parser("central", help="BD/BA speed against a naive per-element Python loop")
    p.add_argument("--slots", type=slot_count, default=100_000, help="slots for the vectorised run (default: 100000)")
    p.add_argument("--naive-slots", type=slot_count, default=10_000, help="slots for the naive run (default: 10000)")
    p.add_argument("--domain", type=bin_count, default=100, help="bins d (default: 100)")
    p.add_argument("--epsilon", type=epsilon_value, default=1.0)
    p.add_argument("--window", type=window_length, default=20)
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--noise", choices=NOISE_KINDS, default="discrete", help="noise kind (default: discrete)")
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
    return 0
