"""The chat client's batch API: results in input order through the cache seam, from sync or async code.

:class:`Batching` is a mixin of :class:`ragsweep.rag.generator.client.ChatClient` (it reads the
client's ``cache``, ``cache_key``, ``_call``, ``_count``, ``aclose`` and ``progress``): a batch
looks its requests up in the cache, sends only the misses (identical requests once), stores each
answer as it arrives, and shows one progress bar.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from dataclasses import replace
from typing import Any, Sequence

from ragsweep.rag.generator.requests import ChatRequest, ChatResult
from ragsweep.store.cache import afetch


class Batching:
    # -- public API --------------------------------------------------------------------------
    async def achat(self, req: ChatRequest) -> ChatResult:
        return (await self._many([req], desc=None))[0]

    def chat(self, req: ChatRequest) -> ChatResult:
        """One request from sync code (no progress bar)."""
        return self._run_sync(self.achat(req))

    def chat_many(self, reqs: Sequence[ChatRequest], desc: str = "generating") -> list[ChatResult]:
        """Results of ``reqs`` in input order; runs from sync code, even inside a running loop."""
        reqs = list(reqs)
        if not reqs:
            return []
        return self._run_sync(self._many(reqs, desc))

    def _run_sync(self, coro: Any) -> Any:
        async def run() -> Any:
            try:
                return await coro
            finally:
                await self.aclose()  # this loop ends here: close its HTTP client with it

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(run())
        # called from async code (a notebook, an async caller): run in a worker thread's own loop
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ragsweep-chat") as pool:
            return pool.submit(asyncio.run, run()).result()

    async def achat_many(self, reqs: Sequence[ChatRequest], desc: str = "generating") -> list[ChatResult]:
        return await self._many(list(reqs), desc)

    async def _many(self, reqs: list[ChatRequest], desc: str | None) -> list[ChatResult]:
        """Results in input order through the cache seam; ``desc``: the progress bar's (None: no bar)."""
        self._count(requests=len(reqs))
        keys = {i: self.cache_key(r) for i, r in enumerate(reqs)}
        fresh: dict[str, ChatResult] = {}  # results of the requests sent now, by key
        bar: Any = None

        async def compute(todo: list[int]) -> dict[int, dict[str, Any] | None]:
            nonlocal bar
            if desc is not None:
                from tqdm.auto import tqdm

                disable = None if self.progress is None else not self.progress
                bar = tqdm(total=len(todo), desc=desc, unit="req", disable=disable, leave=False)
            t0, made = time.perf_counter(), [0]

            async def one(i: int) -> tuple[int, dict[str, Any] | None]:
                res = fresh[keys[i]] = await self._call(reqs[i], keys[i])
                if res.ok and self.cache is not None:
                    # stored as it arrives, not when the whole batch is done: a sweep killed
                    # after 15 of 20 generations finds those 15 in the cache when resumed
                    self.cache.put(self.cache_namespace, keys[i], res.to_cache())
                if bar is not None:
                    made[0] += res.completion_tokens
                    bar.set_postfix_str(f"{made[0] / max(1e-9, time.perf_counter() - t0):.1f} tokens/s", refresh=False)
                    bar.update(1)
                return i, res.to_cache()

            return dict(await asyncio.gather(*(one(i) for i in todo)))

        try:
            stored = await afetch(self.cache, self.cache_namespace, keys, compute, keep=lambda v: v is not None,
                                  stored_by_compute=True)
        finally:
            if bar is not None:
                bar.close()
        results: list[ChatResult] = []
        answered: set[str] = set()
        for i in range(len(reqs)):
            key = keys[i]
            if key not in fresh:
                results.append(ChatResult.from_cache(stored[i]))
                continue
            results.append(fresh[key] if key not in answered else replace(fresh[key]))
            answered.add(key)
        sent = sum(1 for i in keys if keys[i] in fresh)
        self._count(cache_hits=len(reqs) - sent, deduplicated=sent - len(fresh))
        return results
