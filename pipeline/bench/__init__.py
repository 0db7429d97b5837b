"""Benchmarks run by `wevent bench ...`; each prints ratios against a baseline measured in the same run.

Measurements
------------

All measured on this 2-core machine in a quiet moment. Each prints its baseline, measured in the
same run.

| benchmark | what | result |
|---|---|---|
| `wevent bench central` | every central mechanism (11) at d = 1, 100 and 10,000 through `run`, with discrete and with Laplace noise, beside two floors timed in the same process: numpy's Laplace draw of d values, and a minimal numpy loop of the same rule (Uniform, Sample, BD, BA); then the noise draws alone against numpy's Laplace vector draw | µs per slot at d = 1, discrete noise: Uniform 3.4, Sample 1.3, BD 8.2, BA 5.6 (their minimal loops 1.1, 0.1, 2.7, 2.5); against the loop at d = 100: Uniform 1.9x, BA 1.5x (1.7x with Laplace noise), BD 2.6x (2.1x); at d = 10,000: Uniform 0.7x, BA 0.8x, BD 1.2x (0.8x); PeGaSus, AdaPub and RescueDP take 0.2-0.4 ms a slot at d = 100 and 7-26 ms at d = 10,000; an exact draw at epsilon 0.0125 costs 1.4x numpy's Laplace per value at d = 100 with the compiled fast path (2.8x without numba), 0.5x at d = 10,000, 1.5 µs as a scalar (a load of 3-4 on the machine) |
| `wevent bench local` | LPA at Taobao scale: N = 1,023,154, d = 117 (OUE), T = 1,440, w = 20, eps = 1, every report drawn | 3.3-3.4 s (2.3 ms/slot, 17-18 million reports/s, AES keystream at 12 GB/s); peak RSS 114-118 MB; 38-42x a per-user loop per report (32-38x on the same first 10 slots); sufficient-statistic mode 1.3 s |
| `wevent bench ingest` | reports/s through the embedded broker and a worker: batched binary against one JSON message per report; slot close → release latency | 4.7 million reports/s batched, 350 reports/s as JSON (13,500x); latency p50 162 ms, p99 235 ms |
| `wevent bench ingest --apache-kafka` | the same on a local one-node Apache Kafka (200,000 reports x 10 slots, 5,000 JSON reports, 20 paced slots, machine busy) | Kafka 1.13 million reports/s batched, 315/s JSON, latency p50 74 ms / p99 122 ms; tansu in the same run 2.21 million/s, 307/s, 166 / 234 ms |
| `wevent bench producers` | T-Drive preprocessing per million lines against a csv-module loop; reports/s from the files into the broker | 1.1 s per million lines (13.7x); 971,000 reports/s into the broker, 720,000/s file-to-broker |
| `wevent bench stream` | slot close → release latency and reports/s through broker, worker and (local) a two-shard device fleet, against the same slots through the core alone (releases compared) | 1,023,154 users: central BA p50 164 ms / p99 242 ms, 4.1 million reports/s; local LPA p50 240 ms / p99 680 ms |
| `wevent bench soak` | a worker at full speed (the producer 3 slots ahead, 20,000 reports a slot) for 600 s, on the embedded broker and on a local Apache Kafka (`--broker kafka`); PASS/FAIL: the last minute's release rate at least 90% of the first's, the worker's resident memory up less than 5% from the first minute to the end, no delivery failure (machine shared: load average 2-11) | embedded: all PASS, 11.75 → 11.43 slots/s (97%), worker 223 → 223 MiB (+0.3%), 27,574 of 27,574 messages, 230,000 reports/s, broker +151 MiB a minute (11.5 bytes a report); Kafka: all PASS, 27.2 → 85.0 slots/s (the first minute under the heaviest load), worker 216 → 216 MiB (+0.5%), 108,262 of 108,262 messages, 902,000 reports/s |
| `wevent bench decayed` | inserts/s and queries/s at W = 65,536 against a naive numpy decayed sum | 277-420x faster queries at d = 100; 6-12 µs per insert whatever the block size |

Some of these need context:

- **Central.** At d = 1 and 100 a slot of BD or BA costs the loop's numpy calls plus 2-3 µs of
  Python: M1's result, the decision, the step result and the calls between them. BD also derives
  a new budget's exact exponential at each publication (a decimal ``e^-eps``, about 3 µs), which
  no draw at that budget can do without; with numba, a short vector at that budget builds no
  table (each value's proven cell is computed in the loop), and M1's distance of whole numbers is
  one compiled loop. The gap shrinks as d grows.
- **Local.** The target is 10 s; the run takes 3.3 s here. The floor is the random bytes: one keystream byte per OUE bit, 120 per report (d = 117
  padded to whole words), about 10 ns of the 56 ns a report costs. What helped:
  - AES-128-CTR keystreams (AES-NI, twice PCG64's speed) written into reused buffers;
  - one row of lanes per report, so a request is one keystream fill per block, one in-place
    comparison and one word-wise column count, without strided writes;
  - buffers the allocator can reuse instead of page-faulting.

  What does not help enough on this machine:
  - two threads over the device blocks, 5% (OpenSSL releases the GIL only in part, and the
    comparisons are memory-bound);
  - a sort-free population sampler (marks in a scratch array): faster alone, slower in the run,
    where its random accesses miss the cache that the reports just filled;
  - a smaller surplus of draws in the population sampler, also slower in the run;
  - SFC64 (7% faster than PCG64 per word) and a bit-sliced comparison with 6 random bits
    per OUE bit, whose bit-level scatters cost more than the bytes it saved.

  The baseline is a Python loop over the asked users, each perturbed with numpy, with the ledger
  and the fetching of values vectorised (2.2 µs per report). Against it the run is 38-42x
  faster; the aim of 100x is not reached. The baseline leaves out costs that are not the per-user
  loop's (a ledger in a Python set, each user's value fetched separately).
- **Ingest.** On tansu every record is its own batch and each message rewrites its assembler
  state. JSON-per-report therefore pays a produce round trip per report, while a batch pays it
  once per 65,536 reports.

A local stream's state stays small whatever the population. The population ledger stores, for
each of the last w slots, the users each sample took, as a bitset or as gaps between sorted ids,
whichever is shorter: at most N/8 bytes, 125 KB at a million users. Samples are uniform ranks over
the available ids in increasing order, so they depend only on the set, not on an order. M2 keeps
large values in keys of their own, named by their digest: each is written once and dropped when no
longer needed, so a slot writes only what it sampled, and a restore unpacks nothing until a sample
needs it. Requests and audit lines list users the same way. Parameter changes are detected by
comparing parameter dicts, not by building mechanisms.

Measured at w = 20: with 200,000 users (d = 2), M2's state head is about 2 KB and a slot writes at
most 34 KB (LPA); with 1,023,154 users (d = 117, OUE), no message or table value exceeds 205 KB
(a test asserts 256 KiB), and a slot writes at most 162 KB of mechanism state. `wevent run -m lpa`
over 30 slots takes about 20 s at either size, with a worker of 99 MB / 116 MB and a device fleet
of 88 MB / 196 MB resident.

One `wevent devices` process may serve several local streams of a config: give `--stream` once per
stream, with one `--values` dump for all or one per stream, in order. Each stream keeps its own
ledger file. A shard's ledger holds each charge of the current window as a bitmap of the population
(N/8 bytes): at 1,023,154 users and w = 20, a budget-division stream's charges take 13 MiB per
shard (169 MiB when it also kept the charged ids).

At the papers' scale, the slow tests run through the embedded broker, one worker and a two-shard
fleet serving every stream:

- the nine local mechanisms (LBU, LSP, LBD, LBA, LPU, LPD, LPA, LP-DSAT_w, LP-RescueDP) at 200,000
  users (LNS, Sin, Log; d = 2);
- a Taobao-shaped stream (1,023,154 users, d = 117, OUE; LPA and LBA, every user reporting every
  slot);
- BA and Uniform at 1,000,000 users per slot with d = 10,000.

They use w = 5 for 12 slots (2w and more), or w = 20 for 42 slots with `WEVENT_SCALE_WINDOW=20`
(about 5 minutes). Releases equal `wevent simulate`'s value for value, and `wevent audit` passes.
Peak resident memory (VmHWM, MiB):

| run (w = 5 / w = 20) | worker | broker | fleet shard |
|---|---|---|---|
| 200,000 users, 9 local streams | 115–121 / 127 | 233 / 622 | 93–115 / 114–117 |
| Taobao-shaped, LPA + LBA | 147–151 / 149 | 619 / 1,760 | 133–141 / 168–169 |
| central, 1M reports per slot, d = 10,000 | 222–240 / 515 | 279 / 932 | none |

The central worker's figure grows with its backlog, since the tests queue every slot at once: fed
one 1M-report slot at a time it stayed at 122–137 MiB over 60 slots, and with 60 slots queued at
385 MiB. The embedded broker holds every report in memory (:mod:`wevent.stream.runtime.broker`).

`wevent bench stream` times slots one at a time through the embedded broker, a worker and, for the
local model, a two-shard device fleet: from the watermark that closes a slot to its release on
`releases`, beside the same slots through the core alone (the releases are compared). 40 timed
slots after one warm-up, at a load of about 4 on this 2-core machine:

| stream | p50 / p99 / max | reports/s | pipeline vs core per slot | changelog bytes per slot |
|---|---|---|---|---|
| central BA, 200,000 users, d = 100 | 102 / 274 / 318 ms | 1.41 M | 142 vs 3 ms | 61 KB |
| local LPA, 200,000 users, d = 117 | 140 / 381 / 385 ms | 45,500 | 173 vs 5 ms | 76 KB |
| central BA, 1,023,154 users | 164 / 242 / 251 ms | 4.14 M | 247 vs 14 ms | 1.05 MB |
| local LPA, 1,023,154 users (OUE) | 240 / 680 / 787 ms | 141,600 | 284 vs 16 ms | 348 KB |

Both targets hold: local LPA at a million users p99 <= 2 s, central at a million reports per slot
<= 1 s. Under a load of 8-13 (other work on the machine) the p99s were 833 ms and 960 ms. Central
changelog bytes are nearly all the assembler's (each report batch rewrites its partition's bitset
of seen users); local ones are M2's sampled users (202 KB at a million) and the collector's counts
and who answered (141 KB). What got it there: a 20 ms fetch wait for every consumer of tansu (which
holds an idle fetch for its whole wait), no sort of one-slot batches of increasing users, sorted
merges of seen sets, the device ledger's charges as packed user sets, who answered a round kept by
position among the asked users, and a round's request written once in a key of its own.

What limits the next 10x:

- **Partitions.** The assembler's slot state is a bit per user of its partition, rewritten by every
  batch: at ten million users and two partitions 640 KB per message (a stream over 14.4 million is
  refused), so more `reports` partitions, spread over several workers, since one worker applies
  batches one after another.
- **One M2 and one collector per stream.** Sampling, requests and the support stay on one core.
- **Device fleet shards.** Each shard loads the whole values dump; at ten million users a shard
  should get only its blocks.
"""
