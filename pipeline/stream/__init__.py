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
"""
