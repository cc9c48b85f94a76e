"""Errors a user can act on. Each message names the file, line or config field and the fix."""


class RagsweepError(Exception):
    """Base class: the CLI prints the message on one line and exits non-zero."""


class ConfigError(RagsweepError):
    """A config field is unknown or has a bad value."""


class DataError(RagsweepError):
    """An input data file is malformed."""


class ServerError(RagsweepError):
    """A model server could not be started, reached or kept alive."""


class FailureRateExceeded(RagsweepError):
    """Too many model calls failed for the run to count as finished."""
