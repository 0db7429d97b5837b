"""What travels between producers, workers, devices and subscribers, and what the changelogs hold.

One module per kind of thing on the wire: the :mod:`~.format` every message shares (its version,
and the error of bytes that are none), the producers' :mod:`~.reports` (the WRB1 batches, JSON
reports and watermarks), the workers' internal and LDP :mod:`~.messages`, the public
:mod:`~.records` (release, audit, dead letter), the :mod:`~.seals` that authenticate them, the
:mod:`~.topics` they go on, the table :mod:`~.keys` the changelogs are written under, and the
JSON :mod:`~.schemas` of the public messages for clients in other languages.

Nothing here runs a stream: no Faust, no Kafka client, no metrics, no environment. Producers,
workers, devices and the CLI all import it; it imports only the privacy core, numpy and
cryptography.
"""
