"""``wevent bench local``: LPA at Taobao scale, per-report mode, against a per-user Python loop.

The setting of LDP-IDS (SIGMOD 2022) Section 7: N = 1,023,154 users, d = 117 categories (Ada picks OUE: 117-bit
reports), T = 1,440 slots, w = 20, epsilon = 1, every report drawn (per-report mode). Users'
values drift through the day (:class:`DriftingCategories`) and are computed only for the users
a request asks, as a device fleet would hold them.

The baseline is the straightforward implementation public LDP code uses: one running generator
and a Python loop over the asked users that perturbs each user's one-hot vector with numpy and
adds it to the counts. Its ledger (a boolean mask, numpy's ``choice``) and the fetching of values
are vectorised, so the ratio is the per-user loop's alone. It runs the same mechanism on the same
values over the first ``--naive-slots`` slots; the speed-up compares reports per second.
"""

from __future__ import annotations

import dataclasses
import math
import resource
import time
from collections import deque

import numpy as np

from ..cli._help import add_command
from ..cli._common import bin_count, check_cells, epsilon_value, seed, slot_count, user_count, window_length
from ..core.local import LPA, Devices, choose
from ..core.local.device_reports import DEFAULT_BLOCK_SIZE
from ..core.local.measures import bits_per_user_per_slot, cfpu
from ..core.randomness import DerivedRandomness, KeyStream, SecretKey


def register(sub) -> None:
    p = add_command(
        sub, "local", summary="LPA at Taobao scale (per-report mode) against a per-user Python loop",
        description='Time LPA at Taobao scale (about a million users, 117 categories) in per-report mode against a per-user Python loop over the same reports, and print the ratio.',
        examples=[
        ('a smaller population, fewer slots', 'wevent bench local --users 100000 --slots 100 --naive-slots 2'),
        ('the sufficient-statistic mode', 'wevent bench local --users 100000 --slots 100 --mode sufficient')])
    p.add_argument("--users", type=user_count, default=1_023_154, help="users N (default: 1023154, Taobao)")
    p.add_argument("--domain", type=bin_count, default=117, help="categories d (default: 117)")
    p.add_argument("--slots", type=slot_count, default=1440, help="slots T (default: 1440, one day of minutes)")
    p.add_argument("--window", type=window_length, default=20)
    p.add_argument("--epsilon", type=epsilon_value, default=1.0)
    p.add_argument("--mode", choices=("report", "sufficient"), default="report", help="simulation mode (default: report)")
    p.add_argument("--block-size", type=user_count, default=DEFAULT_BLOCK_SIZE)
    p.add_argument("--naive-slots", type=slot_count, default=10, help="slots for the per-user loop (default: 10)")
    p.add_argument("--seed", type=seed, default=0)
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
    """LPA with one Python iteration per asked user (the baseline); returns the reports per slot.

    Only the devices loop: the ledger (a boolean mask of available users, sampled by numpy's
    ``choice``) and the fetching of the asked users' values are vectorised, so the ratio measures
    the per-user perturbation loop itself, not slow bookkeeping around it.
    """
    rng = np.random.default_rng(seed)
    n = values.users
    unit = n // (2 * window)
    e = math.exp(epsilon)
    q = 1 / (e + 1)
    variance = lambda users: 4 * e / (users * (e - 1) ** 2) + 1 / (domain * users)  # noqa: E731
    available = np.ones(n, dtype=bool)
    recent: deque = deque()
    last, last_pub, last_units = np.zeros(domain), 0, 0
    reports = []

    def sample(count):
        users = rng.choice(np.flatnonzero(available), count, replace=False)
        available[users] = False
        return users

    def ask(users, slot_values):
        counts = np.zeros(domain)
        for value in slot_values[users].tolist():
            report = rng.random(domain) < q
            report[value] = rng.random() < 0.5
            counts += report
        return (counts / len(users) - q) / (0.5 - q)

    for slot in range(1, slots + 1):
        slot_values = values.at(slot)
        group = sample(unit)
        estimate = ask(group, slot_values)
        dis = float(np.mean((estimate - last) ** 2)) - variance(len(group))
        if slot - last_pub > last_units - 1:
            units = min(slot - (last_pub + last_units - 1), window)
            if dis > variance(units * unit):
                publication = sample(units * unit)
                last = ask(publication, slot_values)
                group = np.concatenate([group, publication])
                last_pub, last_units = slot, units
        recent.append(group)
        if len(recent) == window:
            available[recent.popleft()] = True
        reports.append(len(group))
    return reports


def _keystream_speed() -> float:
    """GB/s of the devices' AES-128-CTR keystream (best of 5 fills of 4 MB): how fast the machine is now."""
    buffer = np.empty(1 << 22, np.uint8)
    best = math.inf
    for block in range(5):
        stream = KeyStream.from_seed(block)
        start = time.perf_counter()
        stream.fill(buffer)
        best = min(best, time.perf_counter() - start)
    return buffer.size / best / 1e9


def handle(args) -> int:
    check_cells(users=args.users, domain=args.domain)
    check_cells(block_size=args.block_size, domain=args.domain)
    values = DriftingCategories(args.users, args.domain, args.slots, args.seed)
    randomness = DerivedRandomness(SecretKey.from_seed(args.seed), "bench")
    devices = Devices.from_seed(args.seed, "bench", block_size=args.block_size, mode=args.mode)
    mechanism = LPA(args.epsilon, args.window, args.domain, args.users, randomness=randomness, devices=devices)
    oracle = choose(args.epsilon, args.domain).upper()
    print(f"LPA over {args.slots:,} slots, N = {args.users:,} users, d = {args.domain} ({oracle}), "
          f"epsilon = {args.epsilon:g}, w = {args.window}, {args.mode} mode, blocks of {args.block_size:,} users")
    print(f"machine check: the devices' AES-128-CTR keystream runs at {_keystream_speed():.1f} GB/s now "
          "(one byte per OUE bit: compare runs at similar values)")
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
    naive_reports = sum(naive_lpa(values, args.domain, args.epsilon, args.window, naive_slots, args.seed))
    naive = time.perf_counter() - start
    fast, fast_reports = elapsed[naive_slots - 1], sum(r.reports for r in results[:naive_slots])
    print(f"per-user loop on the first {naive_slots} slots: {naive:.2f} s, {naive_reports:,} reports, "
          f"{naive_reports / naive:,.0f} reports/s")
    # The loop's cost per report does not depend on the slot, so its rate on the subset stands for
    # the whole run; wevent's first slots also pay one-off costs (scratch buffers growing).
    print(f"speed-up per report: {reports / total / (naive_reports / naive):,.0f}x over the whole run, "
          f"{fast_reports / fast / (naive_reports / naive):,.0f}x on the same first {naive_slots} slots "
          f"({fast:.3f} s, {fast_reports:,} reports)")
    return 0
