"""Adaptive concurrency for a rate-limited endpoint: additive increase, multiplicative decrease.

``concurrency`` is the ceiling. Each HTTP 429 halves the number of requests the client keeps in
flight (once per window: the 429s of requests sent before the last decrease do not halve it
again), down to one; each success adds ``1 / limit``, so the limit climbs back by one per
window of successes. A 429 that says how long to wait (``Retry-After`` / ``retry-after-ms``)
also pauses every new request until then, not only the one that was refused: the limit is the
key's, not the request's. This is how TCP shares a link and what the hosted APIs' own guides
ask of clients; a sweep on a low-tier key slows down to what the key allows instead of failing
questions.

The learned limit lives in the client across batches; the waiting (an ``asyncio.Condition``
and the count in flight) belongs to each event loop (:class:`ragsweep.rag.generator.transport._LoopState`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any


class AdaptiveLimit:
    def __init__(self, ceiling: int):
        self.ceiling = int(ceiling)
        self.limit = float(ceiling)
        self.lowest = int(ceiling)
        self.pause_until = 0.0  # time.monotonic() before which no request is sent
        self.decreases = 0
        self._window = 0  # bumped at each decrease
        self._lock = threading.Lock()

    @property
    def allowed(self) -> int:
        return max(1, int(self.limit))

    async def enter(self, st: Any) -> int:
        """Wait for a place in flight (and for any pause); returns the window it was taken in."""
        while True:
            wait = self.pause_until - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            async with st.cond:
                if st.in_flight < self.allowed:
                    st.in_flight += 1
                    return self._window
                await st.cond.wait()

    async def leave(self, st: Any) -> None:
        async with st.cond:
            st.in_flight -= 1
            st.cond.notify_all()

    def succeeded(self) -> None:
        with self._lock:
            self.limit = min(float(self.ceiling), self.limit + 1.0 / self.limit)

    def rate_limited(self, window: int, retry_after: float | None) -> None:
        """A 429 for a request sent in ``window``; ``retry_after``: the server's wait, capped by the caller."""
        with self._lock:
            if window == self._window:  # the first 429 since the last decrease
                self.limit = max(1.0, self.limit / 2.0)
                self._window += 1
                self.decreases += 1
                self.lowest = min(self.lowest, self.allowed)
            if retry_after:
                self.pause_until = max(self.pause_until, time.monotonic() + retry_after)


__all__ = ["AdaptiveLimit"]
