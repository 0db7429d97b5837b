"""wevent: w-event differentially private statistics over endless streams.

The house
---------

**One import name.** The distribution installs one package, `wevent`, over the repository's
three folders: `pipeline/` is `wevent`, `producers/` is `wevent.producers` and `topologies/` is
`wevent.topologies` (pyproject.toml's `package-dir`), with a `py.typed` marker; `wevent
--version` prints the release.

**Layers.** `pipeline/core` is the privacy core (numpy only): one algorithm per file, each
mechanism saying its model in a class attribute, found by name in one registry. `pipeline/stream`
holds the stream layer in three packages: `wire/` (what travels: report batches and watermarks,
internal messages, public records, seals, topics, the tables' keys, the JSON schemas),
`agents/` (the processors, pure `(state, message) -> (state, outputs, events)`, one file each,
and each model's logic) and `runtime/` (the Faust worker's plumbing and patches, the Kafka
clients and brokers, health, Prometheus, child processes and `local_run.py`, what `wevent run`
starts and stops), with the configuration beside them (`config.py`, `config_schema.py`, `config_kinds.py`,
`helm_schema.py`).
`pipeline/cli` only parses arguments and reports. `topologies/app.py` is the Faust app, declaring
its topics, tables and agents, and only `wevent worker` imports it. `tests/test_layers.py` keeps
it that way: core < wire < configuration < agents < runtime < producers < CLI, bench and
reproduce, no import upwards and no import cycle; the core imports no stream, CLI, Faust, Kafka
or Prometheus code, the wire and the agents no Faust, Kafka or Prometheus code. The environment
(keys, Kafka settings, the worker's defaults) is read once, by `wevent`'s `main`, into a
`Settings` (`pipeline/stream/settings.py`) that each command passes on; the core, the wire, the
configuration and the agents never read it.
"""

__version__ = "0.1.0"
