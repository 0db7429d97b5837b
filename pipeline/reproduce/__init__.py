"""``wevent reproduce``: the tables and figures of the papers, as CSV, PNG and an index.

One module per paper declares its figures as data (:class:`~wevent.reproduce.figures.Figure`)
and how a cell (dataset, x, method, run) is computed; :mod:`~wevent.reproduce.runner` computes
the cells in parallel and caches each one, and :mod:`~wevent.reproduce.outputs` writes the files,
drawn in the styles of :mod:`~wevent.reproduce.style` (which ``wevent plot`` shares). Four papers
are reproduced, and the benchmark of all central mechanisms (:mod:`~wevent.reproduce.benchmark`),
which can run on the user's streams instead of ours (:func:`use_streams`).

The reproduction
----------------

A cell's run is cached in `reproduce/cells` under a digest of its command and seed alone, with
the whole summary and the CPU seconds it took: figures drawing the same command share it (LDP-IDS
Fig. 7 and Table 2 are Figs. 3, 4, 6 and 6(c)'s cells, Du et al.'s BD and BA do not depend on the
ratio of Figs. 12 and 13), an interrupted run resumes, and a rerun computes only what is missing.
Cells go to `--jobs` processes one at a time, in groups of one paper, dataset and run so that a
process keeps the group's stream in memory, the largest groups first; a worker draws each figure
as soon as its last cell is in. The command prints the CPU seconds of the cells it computed, per
paper.

Measured on this machine's 2 cores (`/usr/bin/time -v`, `--jobs 2`, a fresh output directory):

- `--quick`: 25 s at a load of about 3 (the run had 173% of a core), 42 s of CPU, cells 31 s
  (LDP-IDS 12, Du et al. 16, Sun et al. 1, Kellaris et al. 2); 57 s when other work left it 82% of
  one core. Drawing the 23 figures takes about 10 s of CPU.
- full (10 runs, the papers' sizes, `all` with the benchmark): 19 min 24 s on two quiet cores,
  18,980 cells; CPU seconds of the cells: LDP-IDS 883, Du et al. 721, benchmark 456, Sun et al.
  173, Kellaris et al. 16 (the four papers alone about 15 minutes of the two cores); largest
  process 2.0 GB.

What keeps it fast (draws that differ from a per-user simulation's, with the same distribution, are
marked *):

- each distinct command once: 25% fewer LDP-IDS and Du et al. cells;
- exact shortcuts: on the LDP-IDS synthetic binary streams, whose ones sit on uniformly random
  users each slot, `--mode sufficient` draws how many asked users hold 1 (the slot's count for a
  request of everyone, hypergeometric for population division's disjoint samples) instead of
  200,000 values a slot*; PLBU is `wevent simulate -m plbu`, its reports drawn per (slot, type,
  value) by binomials instead of per user in a loop over slots*; HM's sufficient sums draw only
  what the sum needs*;
- work not repeated: a 10,000 x 10,000 dump read once per process, per-type counts by matrix
  products, PBD and PBA without the BD/BA baseline beside them (`--no-baseline`: they are cells of
  their own), release records built only for `--releases`, ledgers charged once, OBS selections of
  recurring budgets remembered, numpy generators positioned instead of built (same draws), Sun et
  al.'s stream and exact answers once per run;
- with the same draws for the same seeds: central runs check a chunk of slots at once and draw the noise it will take ahead, in
  one batch (`run`); a budget seen once builds no noise table; PBD, PBA and PLBU of one cell share
  their per-type counts, a binary histogram by one matrix product; the -Con streams' normals drawn
  once per run's stream, not per cell; one frequency oracle per parameters; EX's ranges tiled
  once.

The LNS walk depends on the seed, so LNS cells vary the stream from run to run. What remains costly: LDP-IDS's population
division (about 0.4 s a cell: the population ledger's sample and the per-user audit over 200,000
users each slot), Du et al.'s PBD (about 0.55 s a cell: OBS over a slot's budgets, which differ
from slot to slot, and the sampling of every slot's own generator), and Sun et al.'s indexes, one
slot at a time over 32,768 slots. A cell's runs are not one vectorised pass: each run's decisions
follow from its own noise slot by slot, so the runs of BD, PBD or LPD could share a pass only with
every mechanism written again for it; what they do share (the data, the per-type counts, the
normals, the oracles) is computed once.
Fig. 10(a)(b) run 20,000 users, a tenth of the paper's: HM's sum has no cheaper exact draw than
every user's value, about 5 s a cell at 200,000 users, an hour of the full run.

Not reproduced: the Taobao figures (LDP-IDS Figs. 9 and 10(c)(d)), whose data is not public in a
form we can read. PeGaSus and FAST in LDP-IDS Fig. 11 run in the central model on the same
streams' counts (the paper's comparison), their MRE floored so that it equals the frequency MRE of
the local methods.

Where the full run agrees with the papers:

- LDP-IDS: population division below budget division in every cell of Figs. 3, 4, 6 and 10;
  LBA < LBD < LBU on every synthetic cell of Figs. 3, 4 and 6(c)(d); LSP lowest in 46 of 50 cells
  of Figs. 3 and 4, growing fastest with sqrt(Q) and b until LPD and LPA overtake it (Fig. 6(c)(d));
  Table 2's synthetic bits within 0.98-1.02 of the printed ones; every extension's population
  version below its budget version (Fig. 11).
- Kellaris et al.: BA below BD on the synthetic streams and on Foursquare (41% in MAE and 42% in
  MRE on average over w; the paper prints 46% and 35% on Rome).
- Du et al.: PBD below BD and PBA below BA in every cell of Figs. 10-13; PBA's average reduction
  against BA on the synthetic streams 36-41% (the paper prints 4-37%).
- Sun et al.: LP three to four orders of magnitude worse than the others; every error grows as
  epsilon falls.

Where it does not, and why as far as we know:

- LDP-IDS: LPA <= LPD <= LPU holds in 11 of Fig. 3's 25 cells: it fails on LNS from epsilon = 1 up,
  at epsilon >= 2 on Log (within one run-to-run spread) and on the real samples, whose populations
  are small (248 taxis, 400 Foursquare users); LBD > LBU on the T-Drive sample at most points of Figs. 3 and 4; the
  real-data bits differ by construction (our d is 6 and 10, the paper's 5 and 77); LSP has one of
  the best ROC areas (Fig. 5) where the paper has it worst (not investigated); on LNS-Con (Fig.
  10(a)) LBD is above LBU and the population methods are within noise of each other, since in some
  runs the walk nears p = 0, where the relative error explodes (run-to-run spread above 100%).
- Kellaris et al.: Uniform beats BA on LNS and Sin at every w (and on Log at small w): these
  streams change by hundreds of users per slot, far more than the noise. Sample is best on the
  samples, nearly static at 1-minute slots, and BD beats BA on T-Drive. The paper has BA best.
- Du et al.: PBA is below PBD in nearly every cell, the real samples included, where the paper has
  PBD best on real data; PBD's reduction against BD on the samples (87-99% on average) exceeds the
  printed 63-71%; PLBU is worst everywhere, TLNS included, where the paper has it better.
  `wevent simulate -m pba` (or `pbd`) with its defaults does not show the printed gains either:
  it is one run read in MRE, where the paper averages 10 runs of a squared error (below).
- Sun et al.: RTP_DMM's error is 1.9-2.4 times EX's at every epsilon and decay where the paper has
  it lower; our EX releases each dyadic block once with Lap(h/eps), likely tighter than the
  paper's EX.

**Du et al. with `wevent simulate`.** The paper's gains are reductions of AMRE (Equation 15, a
mean squared error: the summary's `mse`), the mean of 10 runs at the strictest pair (120, 0.6).
`wevent simulate -m pba --slots 10000 --runs 10 --json` shows them in `error_reduction.mse`; a
default run is one run (seed 0) whose table shows MRE, and does not. Reductions against BA or BD
(%), N = 10,000, every 10-run row the reduction of the means ± the standard deviation of one
run's reduction (`error_reduction_sd`):

| setting | PBA lns | PBA sin | PBA log | PBD lns | PBD sin | PBD log |
|---|---:|---:|---:|---:|---:|---:|
| one run (seed 0), 10,000 slots, MRE | -7.8 | -0.9 | 3.4 | 43.2 | 37.4 | 18.2 |
| one run (seed 0), 10,000 slots, MSE | 15.1 | 5.2 | 17.8 | 53.7 | 77.3 | 72.6 |
| `--runs 10`, 800 slots, MSE | 34.2 ± 18.2 | 39.7 ± 27.2 | 38.9 ± 20.4 | 75.7 ± 33.1 | 89.2 ± 13.4 | 84.5 ± 11.1 |
| `--runs 10`, 10,000 slots, MSE | 34.2 ± 11.7 | 35.5 ± 15.9 | 36.9 ± 12.8 | 73.9 ± 10.9 | 77.5 ± 8.2 | 74.8 ± 8.8 |
| the same, MRE | 21.7 ± 16.0 | 17.3 ± 10.4 | 17.6 ± 9.2 | 55.8 ± 12.6 | 39.2 ± 7.1 | 34.6 ± 9.1 |
| the same on the paper's Bernoulli draws, MSE | 34.3 ± 11.9 | 35.4 ± 14.5 | 36.5 ± 9.8 | 80.9 ± 12.3 | 74.4 ± 6.0 | 74.2 ± 5.5 |
| the same with `--noise laplace`, MSE | 36.0 ± 13.4 | 34.1 ± 16.1 | 37.6 ± 14.5 | 67.9 ± 7.9 | 65.3 ± 7.6 | 66.3 ± 5.0 |
| the same, every user at (120, 0.6), MSE | 36.5 ± 3.6 | 38.8 ± 4.6 | 38.9 ± 4.3 | 66.1 ± 13.4 | 73.3 ± 12.8 | 69.7 ± 11.1 |
| the same with `--threshold scale`, MSE | -3.4 ± 20.9 | -7.1 ± 28.4 | -1.8 ± 22.3 | -37.2 ± 94.9 | -12.7 ± 73.6 | 0.1 ± 51.4 |

- One run is not the mean: each run draws a new mix of 10 requirement groups, and the mix makes
  most of the spread (with seed 0's mix held and only the noise redrawn, PBA's reduction on Sin
  varies by 6 points instead of 14). Seed 0's mix, PBA's worst of seeds 0-9 on LNS and Sin, has a
  tenth of the users at the strictest pair: DC's OBS then picks a threshold above their budget and
  samples them, the sampled histogram is not rescaled (Algorithm 3, line 3), so its distance to
  the last release grows and PBA publishes more often (2,107 publications in 10,000 slots on Sin,
  against 1,686 with seed 2's mix). In 6 of those 10 mixes a fifth or more of the users are at
  the strictest pair, OBS keeps every user, and PBA's run is exactly the run with every user there.
- Read in MRE (or MAE), PBA's reductions are about half of those in MSE, PBD's a half to three
  quarters.
- The data (exact counts or the paper's Bernoulli draws) and the length (800 or 10,000 slots)
  move the mean reductions by less than one run's spread; continuous Laplace noise lowers PBD's
  through BD's error (BD alone over seeds 0-29 on Sin, 10,000 slots: MSE 247,000 ± 115,000 with
  discrete noise, 209,000 ± 61,000 with Laplace; not investigated further).
- The gain is the publish rule, not the personalization: PBD and PBA publish when the
  dissimilarity exceeds sqrt(err), at least the noise's standard deviation sqrt(2)/theta, where BD
  and BA use its scale 1/theta, so they publish less often with larger budgets. With every user at the
  strictest pair it stays; with BD/BA's rule (`--threshold scale`) PBA and PBD are no better than
  BA and BD on average, and PBA with every user at the strictest pair is BA exactly.

`tests/cli/test_simulate_personalized.py` keeps the 10-run gains on Sin and the publish rule's part
in them true at 2,400 slots.
"""

from __future__ import annotations

from . import benchmark, du, kellaris, ldp_ids, sun

# Kellaris et al.'s mechanisms before the benchmark's others: each method's style follows its first
# figure in this order (:func:`~wevent.reproduce.style.catalogue`).
PAPERS = {paper.name: paper for paper in (ldp_ids.PAPER, kellaris.PAPER, benchmark.PAPER, du.PAPER, sun.PAPER)}


def use_streams(streams: dict[str, str] | None) -> None:
    """Run the benchmark on ``streams`` (name -> CSV of counts or dump) instead of our datasets, in this
    process (the runner's worker processes call it too, as they start)."""
    PAPERS[benchmark.PAPER.name] = benchmark.paper(streams) if streams else benchmark.PAPER


__all__ = ["PAPERS", "use_streams"]
