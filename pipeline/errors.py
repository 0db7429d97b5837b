"""User-facing errors outside the privacy core (whose errors are ``ParameterError``)."""


class UsageError(Exception):
    """A problem the user can fix (input, configuration, environment): printed as one line."""
