"""Errors a user can act on. Each message names the file, line or config field and the fix."""

from __future__ import annotations

import difflib
from dataclasses import fields
from typing import Any


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


def build_config(schema: type, kwargs: dict[str, Any], prefix: str) -> Any:
    """``schema(**kwargs)`` with an unknown field reported by name (and a close match)."""
    names = [f.name for f in fields(schema)]
    unknown = [k for k in kwargs if k not in names]
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(key, names, n=1)
        hint = f" (did you mean {prefix}.{close[0]}?)" if close else ""
        raise ValueError(f"{prefix}.{key}: unknown field{hint}; valid fields are: {', '.join(names)}")
    return schema(**kwargs)
