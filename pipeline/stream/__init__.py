"""The stream layer: the privacy core run over Kafka by Faust workers.

Three packages, each importing only those before it: :mod:`~wevent.stream.wire` (what travels:
reports, messages, records, seals, topics, the tables' keys), :mod:`~wevent.stream.agents` (the
processors, pure ``(state, message) -> (state, outputs, events)``, and each model's logic) and
:mod:`~wevent.stream.runtime` (the Faust worker, the Kafka clients and brokers, health,
Prometheus, processes). Beside them, between the wire and the agents, the configuration: a
config file's streams (:mod:`~wevent.stream.config`, :mod:`~wevent.stream.config_schema` over
:mod:`~wevent.stream.config_kinds`), the chart's values schema generated from them
(:mod:`~wevent.stream.helm_schema`), a stream's query index settings
(:mod:`~wevent.stream.query_settings`), what a process takes from its environment, read once at
the edge and passed in (:mod:`~wevent.stream.settings`), and the offline audit of published
records (:mod:`~wevent.stream.audit`). ``tests/test_layers.py`` keeps the order.

How a slot becomes a release
----------------------------

```
producers (feeds)                                       devices (local model)
    │ batched binary reports + watermarks                   ▲ ldp.requests        │ ldp.reports (perturbed)
    ▼                                                        │                    ▼
 reports ──► assemble ──► slots ──► measure (M1) ──► dissimilarity ──► publish (M2) ──► releases, audit
 (by user)   per partition          per stream   ▲                     per stream           │
                                                 └──────────── releases (M1 learns r_t) ────┘
                                     collect (local model): ldp.requests + ldp.reports → supports
```

- **Assembler** (one per `reports` partition): validates reports, keeps one report per user per
  slot, counts them into a partial histogram, and closes a slot when the partition's watermark
  (the least of its live producers': see :mod:`wevent.stream.wire.reports`) passes its end plus
  the allowed lateness. Reports are decoded with one `frombuffer` per batch of up to 65,536 and
  counted with one `bincount`: no Python loop per report. It counts only the
  users its partition owns: user index mod the number of `reports` partitions. That is the
  contract every producer follows (`report_partition` in `pipeline/stream/wire/reports.py` states it for
  producers in other languages), so no user is counted twice in a slot however a producer routes
  its reports; others are refused as `wrong_partition`.
- **M1** (per stream) merges the partitions' partials and computes the private dissimilarity
  against the last release, only once release t-1 is known. In the local model it turns the
  phase-1 support into the dissimilarity.
- **M2** (per stream) holds the mechanism and its ledger, decides, publishes, and writes its state
  (the ledger) to its table *before* the release leaves. In the local model it runs the
  request/response protocol: it samples users, sends `ldp.requests`, and publishes from the
  phase-2 support.
- **Collector** (local model) sums perturbed reports per (slot, phase) into the oracle's additive
  support until every asked user answered or the deadline passed (missing users are counted);
  reports from users who were not asked, second reports, reports for closed rounds and reports the
  request's oracle cannot produce are counted and dead-lettered.

- **Query service**: an agent indexes each stream (`query` in its config) and `GET /query` answers
  decayed range queries with standard errors; requests are routed to the worker that owns the stream.

Threat model
------------

Who is trusted, and with what:

- **Central and personalized models**: the server (the workers, their keys and the broker they
  use) is trusted with raw values; that is the model. Producers are trusted to report their own
  users' values, not to route them: the assembler enforces the partition contract.
- **Local model**: nobody but the device. The server sees only perturbed reports, and each
  device's ledger holds its user to epsilon per window whatever the server asks: a server that
  signs too many requests gets refusals, not reports. Every asked user answers; presence is
  reported through the oracle like any value: a user without a value in a slot answers in the
  devices' last category, "absent" (a frequency stream's devices answer in `domain + 1`
  categories, and its releases have `domain` bins, the absent one's estimate dropped), and is
  charged like everyone else, so the number and timing of the answers never depend on raw data.
  A mean (`hm`) has no category to spare: a mean stream's fleet refuses to start on a dump without
  every user's value in every slot. A device answers a request from random bytes bound to that
  request: a repeat gets the same reports, another request never the same bytes.
- **Anyone who can write to the broker** (tansu has no authentication; Kafka without ACLs) is
  trusted with nothing. Workers and devices act only on messages sealed by the other side.
- **Readers** of `releases` and `audit` see exactly what is published: private releases, the
  ledger's budgets, and for local streams which users were asked (never a value).
- **Whoever can scrape a worker's `/metrics`** sees no function of raw data by default: counts of
  messages (report batches, dead letters by reason: one per message and reason, however many of
  its reports), slots, releases and their budgets, and timings. How many reports a stream accepted
  and rejected is a function of the raw data (a slot's count of reports is its histogram's total,
  which the releases show only with noise), so `wevent_reports_accepted_total` and
  `wevent_reports_rejected_total` are served only with `wevent worker --export-report-counts`, to
  be scraped only by those trusted with the raw data (the server's operators, in the central and
  personalized models). The releases' error against the truth is served by replays only, on
  loopback (`--truth-port`). A device fleet's counters (`wevent devices --metrics-port`) include
  its refusals by reason, `no_value` among them: which users hold no value is the devices' data,
  for the devices' operator. Timings (latencies, processing time per message) grow with a
  message's size; like traffic analysis, they are out of scope.

What each boundary checks:

| boundary | checks |
|---|---|
| config → worker | one typed schema: types, finite ranges, per-mechanism options; one line, no start |
| `reports` → assembler | decoding, stream, user and value ranges, slot time, partition ownership, one report per user per slot, lateness, horizon, watermark jumps |
| `slots`, `dissimilarity` → M1, M2 | a MAC bound to topic and stream under a sub-key of the server's secret; slot ranges |
| `releases` → M1 | the server's Ed25519 signature, bound to topic and stream; slot ranges |
| `releases`, `audit` → readers | the server's Ed25519 signature, checked with `WEVENT_RELEASE_PUBLIC_KEY`: `wevent subscribe`, `wevent audit` and `wevent run` drop and count what does not verify |
| `ldp.requests` → devices | the server's Ed25519 signature; budget in (0, epsilon]; slot not stale nor too far ahead; one request per (slot, phase); the user's window spend, kept on disk |
| `ldp.reports` → collector | the devices' Ed25519 signature; asked users only, once each; exactly the reports the request's oracle can produce (its `possible`) |
| dead letters | counts, reasons and, for trusted central streams, a sample of rejected reports; bytes of unknown streams and anything of a local stream only as a keyed digest |
| CLI and HTTP | arguments by type and range before any work; every port on loopback unless opened |
| `wevent audit` | every window of every group or user from the ledger records, which must be finite, non-negative and consistent |

Weakened by choice: a central or personalized stream configured with `noise =
"laplace-fp-unsafe"` adds the papers' floating-point Laplace noise, whose low-order bits leak the
value it was added to (Mironov 2012: a release can be a double that the neighbouring input never
produces), so its releases are not epsilon-DP against a reader who inspects their bits. The
default, `discrete`, has no such leak. The config must spell the risk out: plain `laplace` is
refused in a stream, and it stays only in `wevent simulate` and `wevent reproduce`, for parity
with the papers' figures.

Out of scope: a compromised server in the central model (it holds the raw data); the
confidentiality and availability of the broker (anyone who can reach it can read `reports` or
flood a topic, or write forgeries that readers must drop: use the broker's TLS, authentication
and ACLs); proof that the audit records are the server's true accounting (their signature says
the server wrote them; the audit checks the server's own ledger, it does not attest it); readers
that skip verification (`--no-verify`, or a consumer that ignores `signature`), who can be shown
a forged release; untruthful or fake devices poisoning a local
estimate; timing and traffic analysis (which devices answer when); and authentication of the
HTTP ports, which are on loopback by default.

**The running error against ground truth** is served by the replay (`wevent run`, `wevent
replay --truth-port`), never by a worker, which must not export any function of raw data.
"""
