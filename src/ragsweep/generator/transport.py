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
