"""The privacy core: numpy only. Mechanisms, oracles, ledgers, metrics and simulation.

Nothing in this package imports Kafka, Faust or Prometheus; the same objects run in batch
simulation and inside the stream processors and give bit-identical releases for the same key.
"""
