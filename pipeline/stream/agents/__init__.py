"""The stream processors: pure ``(state, message) -> (state, outputs, events)``, one file each.

:mod:`~.base` holds what every processor shares (:class:`~.base.Processor`, its outputs and
table values, the side keys, the server's keys); one module per processor does the work:
:mod:`~.assemble` (reports into per-partition slot partials), :mod:`~.measure` (M1: the private
dissimilarity), :mod:`~.publish` (M2: decision, release, ledger), :mod:`~.collect` (the local
model's perturbed reports into the oracle's support) and :mod:`~.index` (the decayed range-query
index). :mod:`~.processors` builds the four a worker runs for a config. Each model's logic sits
beside them over :mod:`~.logic`'s base: :mod:`~.central`, :mod:`~.personalized`, :mod:`~.local`.
A processor returns what it saw as :mod:`~.events`; a worker turns a processor's failure into a
dead letter with :mod:`~.failures`.

Nothing here runs a stream: no Faust, no Kafka client, no metrics, no environment. Tests drive
the processors in-process with dicts for tables.
"""
