"""What runs the agents: the Faust worker and everything around it that touches a process or a network.

The Kafka clients' settings and the producers' report sink (:mod:`~.kafka`), the brokers: an
embedded tansu or any Kafka (:mod:`~.broker`), a local Apache Kafka for tests and benchmarks
(:mod:`~.apache_kafka`), the worker's Faust app plumbing (:mod:`~.worker`) and the patches it
needs in Faust (:mod:`~.faust_patches`), its health checks and rate-limited client logs
(:mod:`~.health`), its Prometheus metrics (:mod:`~.prometheus`), the child processes of ``wevent
run`` and of the tests (:mod:`~.child_processes`), ``wevent run``'s orchestration
(:mod:`~.local_run`), reading the public topics (:mod:`~.subscription`) and a replay's error
against its truth (:mod:`~.truth`).

Its modules are the ones that import Faust, a Kafka client or prometheus_client; the processors
they run (:mod:`wevent.stream.agents`) and what they send (:mod:`wevent.stream.wire`) do not.
"""
