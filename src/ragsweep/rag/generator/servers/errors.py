"""The errors of model servers: each a ``RagsweepError``, so the CLI prints one line."""

from __future__ import annotations

from ragsweep.errors import ServerError as _UserServerError


class ServerError(_UserServerError, RuntimeError):
    """A model server could not be started or used (a RagsweepError: the CLI prints one line)."""


class PortInUseError(ServerError):
    pass


class ExecutableNotFoundError(ServerError):
    pass


class ServerStartupError(ServerError):
    pass


class MissingAPIKeyError(ServerError):
    pass


class ModelFileNotFoundError(ServerError, FileNotFoundError):
    pass


class GPUMemoryError(ServerError):
    """The vLLM servers on one GPU would ask for more memory than it has."""


class KeyRejectedError(ServerError):
    """An endpoint refused the API key (HTTP 401/403) at the readiness probe, before any question."""


class ServerUnreachableError(ServerError):
    """An external endpoint could not be reached at the readiness probe, before any question."""
