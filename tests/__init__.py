"""The test suite: run by `make test` (everything) or `make test-quick` (`-m "not slow"`).

What the suite checks
---------------------

`make test` runs everything: pytest with doctests of `pipeline/` and `producers/`, about 3,000
tests, every broker test on tansu and on Apache Kafka, every command of the three guides, and 50
crash trials. It runs them in two pytest-xdist processes, a test file each at a time, the files
on real brokers first so that both processes finish together, because the suite mostly waits on
brokers and child processes: 20 min 46 s of pytest on a fresh clone here (21 min with the
installs), against 38 min in one process (`TEST_PROCESSES=0`). `make test-quick` runs
`-m "not slow"` in about 6 minutes; it still starts real brokers and workers.

- **Paper oracles.** Every worked example and reported figure of the four papers that our code
  can recompute is a test, in `tests/core/central`, `local`, `personalized` and `decayed`.
- **One contract for every mechanism.** Every mechanism says its model in a class attribute and is
  found by name in one registry (`pipeline/core/registry.py`). Its constructor lists its
  parameters, and its docstring states what it spends per window and every choice made where the
  paper is open to reading. A conformance test runs every registered mechanism through the same
  contract: window spend within its bound, identical continuation after a restore, the same
  releases for the same keys, and parameters that rebuild it.
- **Linters.** `make test` runs ruff (its classic default rules over the repository, import order
  in the core) and mypy on `pipeline/core`; a finding fails the suite. A test checks that the core
  imports nothing of Faust, Kafka or Prometheus, and another that no file cites a document the
  repository does not hold.
- **Property-based tests** (hypothesis), over random parameters, streams and scripted decisions:
  window spend ≤ epsilon for every mechanism, per user for personalized and local; BA's units are
  integers; restore at a random slot continues identically; step by step equals batch; no user
  reports twice in a window under population division.
- **Statistical tests** use fixed seeds, with tolerances derived from the variance formulas, each
  stated in a comment.
- **In-process pipeline tests** (`tests/stream`) drive the processors without a broker: parity
  with the core for every model; every bad-input reason; at-least-once redelivery; crashes
  injected between outputs and state, and between the keys one input writes; the query service
  and its restarts; forged releases, dissimilarities, requests and reports; wrong partitions and
  far watermarks; 1, 2 and 10 producers (one slow, one dead, one restarted; JSON and WRB1), each
  report counted, through crashes; the WRB1 specification's vectors; the poison batch of 9,999
  future slots and a 1,000-slot backlog; the audit over mixed phases and broken ledgers; every
  config problem against the typed schema.
- **CLI fuzzing** (`tests/cli/test_fuzz.py`, hypothesis): every subcommand with generated bad
  numbers, files, addresses and ports must exit 2 with one line and no traceback, in bounded
  time (an unreachable Kafka: 75), and say what to install without the `stream` extra; a worker
  and a device fleet started before Kafka wait for it with one line, and stop on SIGTERM with 0.
- **Integration tests** (`tests/integration`) use real brokers and real `wevent worker` and
  `wevent devices` processes. Every broker test runs twice, on a fresh embedded tansu broker and
  on a local Apache Kafka 3.9.1 (KRaft; one node, or three for the fault tests; `make test`
  fetches its jars from Maven Central once), where the clients batch and compress as in
  production. `make test-kafka` runs the Kafka copies alone. Workers started by the tests use a
  10 s consumer-group session (`WEVENT_SESSION_SECONDS`), so a killed worker's partitions move on
  in seconds rather than after Faust's default minute. The papers'-scale runs measure the embedded
  broker and run on tansu only. What they check:
  - BD, BA, PBA, LBA and LPA releases equal `wevent simulate`'s, value for value;
  - 2 and 10 producers of one stream (slow, dead, restarted; JSON and WRB1): every report counted,
    releases equal `wevent simulate`'s on the union of their data;
  - bad input is counted and dead-lettered, and releases equal a clean run's (an LDP report from
    a user who was not asked included);
  - a replay delivers every report exactly as dumped (count and checksum);
  - three SIGKILLs mid-stream, with every slot released exactly once and `wevent audit` passing;
  - no raw value in any message of any topic in LDP mode;
  - devices refusing over-budget requests, keeping their ledger across a SIGKILL, and answering
    a request again, byte for byte, after a kill mid-answer;
  - forged releases and dissimilarities against a real worker;
  - a worker that stays up under the poison batch and a backlog; a full-speed replay of the
    sample equal to `wevent simulate` (slow);
  - the worker's `/livez` and `/readyz` and exit through a broker's death and restart; a worker
    started before its broker (tansu, and Apache Kafka) that waits, saying so once, then comes up
    and releases; `/livez` 200 and `/readyz` 503 through a 30 s Apache Kafka outage, 200 after;
    a replay to a broker killed mid-way fails (75, or 3 when the broker lost what it confirmed);
    `wevent run` ends with one line when its broker dies or reaches its memory limit, or when its
    worker is killed (quoting the worker's last line), and stops every child on SIGTERM and SIGHUP;
    `wevent run` and `wevent bench soak` SIGKILLed leave no process, and the next run deletes their
    directories (never a live run's); `wevent devices` stops on SIGTERM with status 0;
  - a worker's default `/metrics` equal in every series but timings between two runs whose
    messages carry 4 and 380 reports each, and the report counts with `--export-report-counts`;
  - keys: two unseeded runs differ, each child holds only its own secret, and every port is on
    loopback;
  - the query service over HTTP;
  - `wevent run --slots 30 --release-log F` followed by `wevent audit F --release-key HEX` (the key
    the run printed);
  - signed releases: forged releases (unsigned, a byte changed, signed under another key, no
    signature) written before the genuine ones are dropped and counted by `wevent subscribe`,
    which shows the genuine ones; `wevent run` on a Kafka that holds its stream made with other
    parameters or another key stops at once with one line, continues a stream of its own
    parameters and key, and stops with one line on its stream's `config_changed`;
  - 50 random crash trials (worker, replay and device kills) against a clean run (slow);
  - the nine local mechanisms at 200,000 users, a Taobao-shaped stream at 1,023,154 users and the
    central model at 1,000,000 reports per slot, d = 10,000, equal to `wevent simulate` (slow);
  - on Kafka: three workers with one killed and replaced, a scale-out from one to three, one of
    three brokers killed and restarted, a durable single broker killed and restarted,
    exactly-once against at-least-once under worker kills, TLS/SASL with ACLs per role, and Kafka's
    own console clients against the published schemas.
- **Deployment tests** (`tests/deploy`):
  - `docker-compose config`, with every service command parsed by the real CLI;
  - `helm lint --strict` and `helm template` with the real helm (built with Go), with default values
    and every Kafka TLS form, the rendered manifests parsed;
  - `promtool check rules` and `promtool test rules`;
  - a real Prometheus scraping a short run, where every dashboard panel's PromQL must return data;
  - a testcontainers Apache Kafka test, which skips with its reason where no Docker engine runs,
    as here.
"""
