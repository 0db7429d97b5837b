"""The stream configuration's catalogue of mechanisms agrees with the core's registry.

A stream names its model and mechanism; the schema checks them before any mechanism is built, so
it must say what the mechanism classes say: the same names, the same model, and options each of
which is a constructor parameter, or one of the few settings the stream layer itself reads.
"""

import inspect

from wevent.core.registry import mechanisms
from wevent.stream.config_schema import mechanism_schemas

MECHANISMS = mechanism_schemas()

# Read by the stream layer, not passed to the mechanism: a personalized stream's requirements, a
# local stream's device block size and collection deadline.
STREAM_SETTINGS = {"personalized": {"requirements"}, "local": {"block_size", "deadline_seconds"}, "central": set()}


def test_every_schema_entry_is_a_registered_mechanism_of_the_same_model():
    registry = mechanisms()
    assert set(MECHANISMS) == set(registry)
    for name, entry in MECHANISMS.items():
        assert entry.model == registry[name].model, name


def test_every_option_is_a_constructor_parameter_or_a_stream_setting():
    for name, entry in MECHANISMS.items():
        cls = mechanisms()[name]
        parameters = set(inspect.signature(cls).parameters)
        assert set(entry.options) - parameters <= STREAM_SETTINGS[cls.model], name
