"""User-facing errors outside the privacy core (whose errors are ``ParameterError``), and the exit
statuses every ``wevent`` command ends with.

A supervisor decides from the status alone whether to start a command again:

- :data:`EXIT_DONE` (0): the work is done, or a long-running command was stopped on request;
- :data:`EXIT_INTERNAL` (1): an internal error, a bug;
- :data:`EXIT_USAGE` (2): bad input (a config, an argument, a file, the environment): starting
  again changes nothing until the input is fixed;
- :data:`EXIT_LOST_STATE` (3): the broker lost what was confirmed or committed (an in-memory
  broker restarted): start again from scratch, from what the broker holds now;
- :data:`EXIT_UNAVAILABLE` (75, ``EX_TEMPFAIL`` of sysexits.h): Kafka did not answer within the
  command's limit: the same command may succeed later.
"""

EXIT_DONE = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_LOST_STATE = 3
EXIT_UNAVAILABLE = 75


class UsageError(Exception):
    """A problem the user can fix (input, configuration, environment): printed as one line, exit 2."""


class Unavailable(Exception):
    """Kafka did not answer within the command's limit: printed as one line, exit 75."""


class LostState(Exception):
    """The broker no longer holds what it confirmed or what was committed: one line, exit 3."""
