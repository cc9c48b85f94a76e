"""The HTTP side of :class:`~ragsweep.generator.client.ChatClient`: the lazily imported ``openai``
package, one HTTP client and semaphore per event loop, and loopback detection (no proxy)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


def _openai():  # noqa: ANN202 - the openai package takes seconds to import: only when calling
    import openai

    return openai


def _is_loopback(base_url: str) -> bool:
    host = (urlsplit(base_url).hostname or "").lower()
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


@dataclass
class _LoopState:
    client: Any  # an openai.AsyncOpenAI (imported lazily)
    semaphore: asyncio.Semaphore


def server_seconds(resp: Any) -> float | None:
    """The server's own processing time of one answer: llama.cpp reports ``timings`` (``prompt_ms``
    + ``predicted_ms``) beside the OpenAI fields; None from a server that does not."""
    timings = getattr(resp, "timings", None)
    if timings is None:
        timings = (getattr(resp, "model_extra", None) or {}).get("timings")
    if not isinstance(timings, dict):
        return None
    try:
        ms = float(timings.get("prompt_ms") or 0.0) + float(timings.get("predicted_ms") or 0.0)
    except (TypeError, ValueError):
        return None
    return ms / 1000.0 if ms > 0 else None
