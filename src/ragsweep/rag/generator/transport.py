"""The HTTP side of :class:`~ragsweep.rag.generator.client.ChatClient`: the lazily imported ``openai``
package, one HTTP client and semaphore per event loop, and loopback detection (no proxy)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit


_WARM = {"id": "warm", "object": "chat.completion", "created": 0, "model": "warm", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop", "logprobs": None}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
_warmed = False


def _openai():  # noqa: ANN202 - the openai package takes seconds to import: only when calling
    import openai

    if not _warmed:
        warm(openai)
    return openai


def warm(openai: Any) -> None:
    """One chat completion through the openai client against an in-memory transport, before any
    real request: the client builds its pydantic models lazily (``DEFER_PYDANTIC_BUILD``) on the
    first response, and an interrupt landing inside that build comes out of pydantic-core as a
    ``SchemaError``. Built here, the requests that follow parse with ready models."""
    global _warmed
    import httpx

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=_WARM)

    with httpx.Client(transport=httpx.MockTransport(answer)) as http:
        client = openai.OpenAI(base_url="http://warm.invalid/v1", api_key="warm", http_client=http, max_retries=0)
        client.chat.completions.create(model="warm", messages=[{"role": "user", "content": "ok"}], max_tokens=1,
                                       temperature=0.0, seed=0, stop=["x"], response_format={"type": "json_object"})
    _warmed = True


def _is_loopback(base_url: str) -> bool:
    host = (urlsplit(base_url).hostname or "").lower()
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


@dataclass
class _LoopState:
    """One event loop's HTTP clients (one per endpoint) and its request slots: ``slots`` holds
    ``concurrency`` endpoint indices, spread round-robin over the endpoints; a request takes one
    (waiting while all are out) and puts it back, so at most ``concurrency`` requests are in flight
    and a server process with one slot never gets a second request while another process idles.
    ``cond`` and ``in_flight``: the waiting of the adaptive limit
    (:class:`ragsweep.rag.generator.limiter.AdaptiveLimit`), which may allow fewer than ``concurrency``."""

    clients: list  # openai.AsyncOpenAI per endpoint (imported lazily)
    slots: asyncio.Queue
    cond: asyncio.Condition = field(default_factory=asyncio.Condition)
    in_flight: int = 0
    #: endpoints that stopped answering (connection refused or dropped), each with the slots held back
    #: from the queue until it answers again: requests go to the other endpoints, or wait
    down: dict = field(default_factory=dict)
    #: endpoints given up for good (their server is not coming back): their slots leave the queue
    gone: set = field(default_factory=set)
    #: requests waiting to reserve their worst-case cost in the budget, in the order they asked: only
    #: the first reserves, so the budget refuses requests in order and none is sent after a refusal
    reserving: list = field(default_factory=list)
    turns: asyncio.Condition = field(default_factory=asyncio.Condition)  # wakes them when the first is done
    probes: set = field(default_factory=set)  # the tasks that watch the down endpoints
    dropped: list = field(default_factory=list)  # slots of gone endpoints taken out of the queue

    async def in_turn(self, reserve: Any, wait: Any) -> Any:
        """``reserve()`` once every request that asked before this one has had its answer, asked again
        every 50 ms while it answers ``wait`` (the calls in flight hold the budget's room)."""
        turn = object()
        self.reserving.append(turn)
        try:
            while True:
                if self.reserving[0] is turn:
                    held = reserve()
                    if held != wait:
                        return held
                    await asyncio.sleep(0.05)
                else:
                    async with self.turns:  # looked at again under the lock: no wake-up missed
                        if self.reserving[0] is not turn:
                            await self.turns.wait()
        finally:
            self.reserving.remove(turn)
            async with self.turns:
                self.turns.notify_all()

    def release(self, slot: int) -> None:
        """A slot back after its request: to the queue, held while its endpoint is down, or dropped
        when its endpoint is gone and another still answers."""
        if slot in self.down:
            self.down[slot].append(slot)
        elif slot in self.gone and len(self.gone) < len(self.clients):
            self.dropped.append(slot)
        else:
            self.slots.put_nowait(slot)

    @property
    def all_gone(self) -> bool:
        return len(self.gone) >= len(self.clients)

    @classmethod
    def make(cls, clients: list, concurrency: int) -> "_LoopState":
        slots: asyncio.Queue = asyncio.Queue()
        for i in range(concurrency):
            slots.put_nowait(i % len(clients))
        return cls(clients, slots)

    @property
    def client(self) -> Any:
        return self.clients[0]


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
