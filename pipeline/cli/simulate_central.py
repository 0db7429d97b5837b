"""The central-model family of ``wevent simulate``: Uniform, Sample, BD, BA over count histograms."""

from __future__ import annotations

from ..core.base import REGISTRY
from ..core.central import CentralMechanism
from ..core.data import load_input
from ..core.ledger import window_sums
from ..core.metrics import COUNT_MRE_FLOOR
from ..core.randomness import DerivedRandomness, SecretKey
from ..core.simulation import simulate
from ..core.synthetic import synthetic
from ..stream.wire.records import ReleaseRecord
from ._common import progress
from .simulate_family import Outcome


class CentralFamily:
    name = "central"
    mechanisms = ("uniform", "sample", "bd", "ba")

    def add_arguments(self, group) -> None:
        group.add_argument("--budget-shift", action="store_true", help="BD/BA: move budget from the dissimilarity "
                           "to publications when d > 2w (Kellaris §4.5)")
        group.add_argument("--force-first-publish", action="store_true", help="BD/BA: always publish slot 1")
        group.add_argument("--clamp-round", action="store_true", help="post-process releases to non-negative integers")

    def counts(self, args):
        if args.input:
            counts, _ = load_input(args.input)
            return counts
        return synthetic(args.dataset, args.users, args.slots, args.seed).counts.astype(float)

    def build(self, mechanism: str, args, domain_size: int) -> CentralMechanism:
        options = {"clamp_round": args.clamp_round, "noise": args.noise}
        if mechanism in ("bd", "ba"):
            options.update(budget_shift=args.budget_shift, force_first_publish=args.force_first_publish)
        randomness = DerivedRandomness(SecretKey.from_seed(args.seed), args.stream)
        return REGISTRY[mechanism](args.epsilon, args.window, domain_size, randomness=randomness, **options)

    def run(self, mechanism: str, args):
        counts = self.counts(args)
        m = self.build(mechanism, args, counts.shape[1])
        run = simulate(m, counts, progress=lambda rows: progress(rows, args.progress, total=len(counts),
                                                                      desc=mechanism))
        floor = args.mre_floor if args.mre_floor is not None else COUNT_MRE_FLOOR
        records = []
        if args.releases:  # built only when written: they cost as much as a central run
            spend = window_sums([r.budget.total for r in run.results], m.window)
            records = [ReleaseRecord.from_step(args.stream, m, r, s) for r, s in zip(run.results, spend)]
        return Outcome(run.summary(mre_floor=floor), records)


FAMILY = CentralFamily()
