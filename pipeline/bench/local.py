"""``wevent bench local``: LPA at Taobao scale, per-report mode, against a per-user Python loop.

The setting of issue 3 / [S] §7: N = 1,023,154 users, d = 117 categories (Ada picks OUE: 117-bit
reports), T = 1,440 slots, w = 20, epsilon = 1, every report drawn (per-report mode). Users'
values drift through the day (:class:`DriftingCategories`) and are computed only for the users
a request asks, as a device fleet would hold them.

The baseline is the straightforward implementation public LDP code uses: the available users
in a Python set, one running generator, and a Python loop over the asked users that perturbs each
user's one-hot vector with numpy and adds it to the counts. It runs the same mechanism on the same
values over the first ``--naive-slots`` slots; the speed-up compares the two on those slots.
"""

from __future__ import annotations

import dataclasses
import math
import resource
import time
from collections import deque

import numpy as np

from ..core.local import LPA, Devices, choose
from ..core.local.devices import DEFAULT_BLOCK_SIZE
from ..core.local.measures import bits_per_user_per_slot, cfpu
from ..core.randomness import DerivedRandomness, SecretKey


def register(sub) -> None:
    p = sub.add_parser("local", help="LPA at Taobao scale (per-report mode) against a per-user Python loop")
    p.add_argument("--users", type=int, default=1_023_154, help="users N (default: 1023154, Taobao)")
    p.add_argument("--domain", type=int, default=117, help="categories d (default: 117)")
    p.add_argument("--slots", type=int, default=1440, help="slots T (default: 1440, one day of minutes)")
    p.add_argument("--window", type=int, default=20)
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--mode", choices=("report", "sufficient"), default="report", help="simulation mode (default: report)")
    p.add_argument("--block-size", type=int, default=DEFAULT_BLOCK_SIZE)
    p.add_argument("--naive-slots", type=int, default=10, help="slots for the per-user loop (default: 10)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(handler=handle)


class DriftingCategories:
    """Every user has a home and an away category (Zipf-like popularity) and is away for a share of
    each day that rises and falls with the time of day; values are computed per request."""

    def __init__(self, users: int, domain: int, slots: int, seed: int) -> None:
        rng = np.random.default_rng([seed, 7])
        popularity = 1.0 / np.arange(1, domain + 1) ** 1.1
        popularity /= popularity.sum()
        self.users, self.slots = users, slots
        home = rng.choice(domain, users, p=popularity).astype(np.uint32)
        away = rng.choice(domain, users, p=popularity[::-1]).astype(np.uint32)
        phase = rng.integers(0, 2**16, users, dtype=np.uint32)  # when in the day a user is away
        self.packed = home | away << 8 | phase << 16  # one gather per request

    def at(self, slot: int) -> "SlotValues":
        return SlotValues(self, slot)


class SlotValues:
    """The values of one slot, indexable by user ids (an array or a slice) like a numpy array."""

    def __init__(self, source: DriftingCategories, slot: int) -> None:
        self.source = source
        day = slot / source.slots
        self.away_share = np.uint32(2**16 * (0.3 + 0.2 * math.sin(2 * math.pi * day)))
        self.clock = np.uint32(int(2**16 * day * 4) % 2**16)  # four cycles a day

    def __len__(self) -> int:
        return self.source.users

    def __getitem__(self, users) -> np.ndarray:
        packed = self.source.packed[users]
        away = ((packed >> 16) + self.clock) & 0xFFFF < self.away_share  # wraps around the cycle
        return np.where(away, packed >> 8, packed).astype(np.uint8)  # uint8 keeps the low byte


def naive_lpa(values: DriftingCategories, domain: int, epsilon: float, window: int, slots: int, seed: int) -> list:
    """LPA with one Python iteration per asked user (the baseline); returns the reports per slot."""
    rng = np.random.default_rng(seed)
    n = values.users
    unit = n // (2 * window)
    e = math.exp(epsilon)
    q = 1 / (e + 1)
    variance = lambda users: 4 * e / (users * (e - 1) ** 2) + 1 / (domain * users)  # noqa: E731
    available = set(range(n))
    recent: deque = deque()
    last, last_pub, last_units = np.zeros(domain), 0, 0
    reports = []

    def ask(users, slot_values):
        counts = np.zeros(domain)
        for user in users:
            report = rng.random(domain) < q
            report[slot_values[user]] = rng.random() < 0.5
            counts += report
        available.difference_update(users)
        return (counts / len(users) - q) / (0.5 - q)

    for slot in range(1, slots + 1):
        slot_values = values.at(slot)
        group = list(rng.choice(sorted(available), unit, replace=False))
        estimate = ask(group, slot_values)
        dis = float(np.mean((estimate - last) ** 2)) - variance(len(group))
        asked = len(group)
        if slot - last_pub > last_units - 1:
            units = min(slot - (last_pub + last_units - 1), window)
            if dis > variance(units * unit):
                publication = list(rng.choice(sorted(available), units * unit, replace=False))
                last = ask(publication, slot_values)
                group += publication
                last_pub, last_units = slot, units
                asked += len(publication)
        recent.append(group)
        if len(recent) == window:
            available.update(recent.popleft())
        reports.append(asked)
    return reports


def _raw_speed() -> float:
    """Nanoseconds per word of PCG64 output (best of 5 draws of 2^20 words): how fast the machine is now."""
    bits = np.random.PCG64(0)
    best = math.inf
    for _ in range(5):
        start = time.perf_counter()
        bits.random_raw(2**20)
        best = min(best, time.perf_counter() - start)
    return best / 2**20 * 1e9


def handle(args) -> int:
    values = DriftingCategories(args.users, args.domain, args.slots, args.seed)
    randomness = DerivedRandomness(SecretKey.from_seed(args.seed), "bench")
    devices = Devices.from_seed(args.seed, "bench", block_size=args.block_size, mode=args.mode)
    mechanism = LPA(args.epsilon, args.window, args.domain, args.users, randomness=randomness, devices=devices)
    oracle = choose(args.epsilon, args.domain).upper()
    print(f"LPA over {args.slots:,} slots, N = {args.users:,} users, d = {args.domain} ({oracle}), "
          f"epsilon = {args.epsilon:g}, w = {args.window}, {args.mode} mode, blocks of {args.block_size:,} users")
    print(f"machine check: PCG64 random_raw at {_raw_speed():.2f} ns per 64-bit word now "
          "(this shared 2-core machine ranged 2.5-7 ns in testing: compare runs at similar values)")
    naive_slots = min(args.naive_slots, args.slots)
    results, elapsed = [], []  # results without their user arrays: the run keeps only public counts
    start = time.perf_counter()
    for slot in range(1, args.slots + 1):
        result = mechanism.step(values.at(slot))
        results.append(dataclasses.replace(result, users1=None, users2=None))
        elapsed.append(time.perf_counter() - start)
    total = elapsed[-1]
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # before the baseline runs
    reports = sum(r.reports for r in results)
    print(f"wevent   {total:8.2f} s  {1e3 * total / args.slots:7.2f} ms/slot  {reports / total:12,.0f} reports/s  "
          f"publications {sum(r.published for r in results)}, CFPU {cfpu(results, args.users):.4f}, "
          f"bits/user/slot {bits_per_user_per_slot(results, args.users):.4f}")
    print(f"peak memory (RSS of the process after the run): {peak_mb:,.0f} MB")
    start = time.perf_counter()
    naive_reports = naive_lpa(values, args.domain, args.epsilon, args.window, naive_slots, args.seed)
    naive = time.perf_counter() - start
    fast = elapsed[naive_slots - 1]
    fast_reports = sum(r.reports for r in results[:naive_slots])
    per_report = (fast_reports / fast) / (sum(naive_reports) / naive)
    print(f"per-user loop on the first {naive_slots} slots: {naive:.2f} s ({sum(naive_reports):,} reports) against "
          f"{fast:.3f} s ({fast_reports:,} reports) for wevent: speed-up {naive / fast:,.0f}x per slot, "
          f"{per_report:,.0f}x per report")
    return 0
