"""``wevent bench decayed``: decayed range queries against a naive decayed window sum.

All implementations ingest the same stream and answer the same queries at the last slot (l
uniform in the window, r uniform in [l, t]: the paper does not give the distribution). The naive baselines keep every
value and compute ``Σ_{i=l..r} p^(t-i) D_i`` per query: with numpy (a slice times a power
vector, O(r-l) vectorised) and as a plain Python loop. The benchmark first checks that the
noise-free release index agrees with the numpy baseline, then prints rates and ratios.
``--flat`` adds RTP_DMM's per-insert time for block sizes 2^10 .. 2^21 (insert time must not grow with L).
``--accuracy`` adds the exact MSE (mean squared standard error, data-independent) of every noise
configuration on the same queries, next to LP-item (Lap(1/ε) on every slot, one reading of the paper's baseline, which it does
not fully specify).
"""

from __future__ import annotations

import time

import numpy as np

from ..cli._help import add_command
from ..core.decayed import RTPDMM, ReleaseIndex
from ..core.randomness import DerivedRandomness, SecretKey
from ..cli._common import (bin_count, check_cells, epsilon_value, probability, seed, slot_count, user_count,
                           window_length)
from .central import drifting_counts


def register(sub) -> None:
    p = add_command(
        sub, "decayed", summary="decayed range queries: inserts/s and queries/s against a naive window sum",
        description='Time the decayed range-query index: inserts and queries per second against a naive sum over the window.',
        examples=[
        ('a smaller window', 'wevent bench decayed --window 4096 --queries 2000'),
        ('with the exact MSE of each noise configuration', 'wevent bench decayed --window 4096 --accuracy')])
    p.add_argument("--window", type=window_length, default=65_536, help="query window W (default: 65536)")
    p.add_argument("--decay", type=probability(open_low=True), default=0.9995, help="decay p (default: 0.9995)")
    p.add_argument("--epsilon", type=epsilon_value, default=1.0)
    p.add_argument("--bins", type=bin_count, default=100, help="bins d per slot (default: 100, as README reports)")
    p.add_argument("--slots", type=slot_count, default=None, help="slots ingested (default: 2W)")
    p.add_argument("--queries", type=user_count, default=20_000, help="queries for the indexes (default: 20000)")
    p.add_argument("--naive-queries", type=user_count, default=500,
                   help="queries for the naive baselines (default: 500)")
    p.add_argument("--flat", action="store_true", help="also time inserts for block sizes 2^10 .. 2^21")
    p.add_argument("--accuracy", action="store_true", help="also print the exact MSE of each noise configuration")
    p.add_argument("--seed", type=seed, default=0)
    p.set_defaults(handler=handle)


def window_queries(t: int, window: int, count: int, seed: int) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    left = rng.integers(max(1, t - window + 1), t + 1, count)
    return [(int(l), int(rng.integers(l, t + 1))) for l in left]


class NaiveNumpy:
    """Every slot kept; a query is one vectorised dot product over its range."""

    def __init__(self, slots: int, bins: int, decay: float) -> None:
        self.history = np.zeros((slots, bins))
        self.powers = np.power(decay, np.arange(slots, dtype=float))
        self.time = 0

    def insert(self, row) -> None:
        self.history[self.time] = row
        self.time += 1

    def query(self, l: int, r: int) -> np.ndarray:
        weights = self.powers[self.time - r : self.time - l + 1][::-1]  # p^(t-l) .. p^(t-r)
        return weights @ self.history[l - 1 : r]


class NaiveLoop:
    """Every slot kept in a list; a query loops over its range in Python (scalar streams)."""

    def __init__(self, decay: float) -> None:
        self.decay = decay
        self.history: list[float] = []

    def insert(self, value: float) -> None:
        self.history.append(value)

    def query(self, l: int, r: int) -> float:
        t, p, total = len(self.history), self.decay, 0.0
        for i in range(l, r + 1):
            total += p ** (t - i) * self.history[i - 1]
        return total


def rates(index, rows, queries, insert) -> tuple[float, float, list]:
    start = time.perf_counter()
    for row in rows:
        insert(index, row)
    inserts = len(rows) / (time.perf_counter() - start)
    start = time.perf_counter()
    answers = [index.query(l, r) for l, r in queries]
    return inserts, len(queries) / (time.perf_counter() - start), answers


def handle(args) -> int:
    window, bins = args.window, args.bins
    slots = args.slots or 2 * window
    check_cells(slots=slots, bins=bins)
    counts = drifting_counts(slots, bins, args.seed)
    rows = counts[:, 0].tolist() if bins == 1 else list(counts)
    queries = window_queries(slots, window, args.queries, args.seed + 1)
    naive_queries = queries[: args.naive_queries]
    randomness = DerivedRandomness(SecretKey.from_seed(args.seed), "bench")
    print(f"decayed range queries: W = {window:,}, p = {args.decay:g}, d = {bins}, {slots:,} slots; "
          f"{len(queries):,} queries (naive: {len(naive_queries):,}) with l uniform in the window, r uniform in [l, t]")

    results = {}
    naive = NaiveNumpy(slots, bins, args.decay)
    results["naive numpy (dot over the range)"] = rates(naive, rows, naive_queries, NaiveNumpy.insert)
    if bins == 1:
        results["naive Python loop"] = rates(NaiveLoop(args.decay), rows, naive_queries[:100], NaiveLoop.insert)
    release_index = ReleaseIndex(window, args.decay, bins=bins)
    results["release index (mode A)"] = rates(release_index, rows, queries, lambda ix, row: ix.insert(row, 1.0))
    for variant in ("paper", "cai"):
        rtp = RTPDMM(args.epsilon, window, args.decay, bins=bins, lambda_variant=variant, randomness=randomness)
        results[f"RTP_DMM ({variant} Λ)"] = rates(rtp, rows, queries, RTPDMM.insert)

    expected = results["naive numpy (dot over the range)"][2]
    got = [answer for answer, _ in results["release index (mode A)"][2][: len(expected)]]
    scale = np.abs(counts).sum(axis=0).max()  # the size of the prefixes the index subtracts
    agree = all(np.allclose(g, e, rtol=0, atol=1e-9 * scale) for g, e in zip(got, expected))

    base_inserts, base_queries, _ = results["naive numpy (dot over the range)"]
    print(f"{'implementation':<34} {'inserts/s':>11} {'queries/s':>11} {'insert ratio':>13} {'query ratio':>12}")
    for name, (inserts, queries_per_s, _) in results.items():
        print(f"{name:<34} {inserts:>11,.0f} {queries_per_s:>11,.0f} {inserts / base_inserts:>12.3g}x "
              f"{queries_per_s / base_queries:>11.3g}x")
    print(f"ratios are against the naive numpy baseline; mode A agrees with it: {agree}")
    if args.flat:
        flat_inserts(args.decay, args.epsilon, randomness)
    if args.accuracy:
        accuracy(window, args.decay, args.epsilon, queries, slots, randomness)
    return 0 if agree else 1


def flat_inserts(decay: float, epsilon: float, randomness: DerivedRandomness, inserts: int = 1 << 14) -> None:
    """RTP_DMM's per-insert time should not grow with the block size L (O(1) insert)."""
    data = np.random.default_rng(0).poisson(20, inserts).astype(float).tolist()
    print(f"RTP_DMM per-insert time over {inserts:,} inserts, W = L:")
    print(f"{'L':>9} {'us/insert':>10}")
    for height in range(11, 23):
        size = 1 << (height - 1)
        index = RTPDMM(epsilon, size, decay, randomness=randomness)
        start = time.perf_counter()
        for value in data:
            index.insert(value)
        print(f"{size:>9,} {(time.perf_counter() - start) / inserts * 1e6:>10.2f}")


def accuracy(window: int, decay: float, epsilon: float, queries, drawn_at: int, randomness: DerivedRandomness) -> None:
    """Mean exact variance over the queries: the MSE each configuration would show (our measure, not the paper's)."""
    print(f"exact MSE over the same {len(queries):,} queries (epsilon = {epsilon:g}, event level):")
    print(f"{'configuration':<34} {'L':>7} {'MSE':>10}")
    zeros = [0.0] * window
    for block_size in sorted({window, max(1, window // 2)}, reverse=True):
        for variant in ("none", "paper", "cai"):
            for mode in ("exact", "paper_literal"):
                index = RTPDMM(epsilon, window, decay, block_size=block_size, lambda_variant=variant,
                               noise_mode=mode, randomness=randomness)
                print(f"{'RTP_DMM ' + variant + ' Λ, ' + mode:<34} {block_size:>7,} {mse(index, zeros, queries, drawn_at):>10.1f}")
    lp_item = ReleaseIndex(window, decay)  # every slot released with its own Lap(1/ε): variance 2/ε²
    print(f"{'LP-item':<34} {'-':>7} {mse(lp_item, zeros, queries, drawn_at, variance=2 / epsilon**2):>10.1f}")


def mse(index, zeros, queries, drawn_at: int, **insert) -> float:
    for value in zeros[index.slot :]:
        index.insert(value, **insert)
    t_shift = len(zeros) - drawn_at  # the queries were drawn at slot drawn_at; this index is at len(zeros)
    return float(np.mean([index.query(l + t_shift, r + t_shift)[1][0] ** 2 for l, r in queries]))
