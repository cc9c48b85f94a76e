"""Endpoints that stop answering under a run: the half of
:class:`ragsweep.rag.generator.client.ChatClient` that holds back an endpoint whose server process
died (connections refused or dropped after the model had answered) and watches it until it answers
again (a managed server restarted it on its port) or is given up (``endpoint_gone(i)``: its server
says it will not come back; else after ``recover_s``). Meanwhile its slots are out of the queue:
requests go to the other endpoints of the same model, or wait.
"""

from __future__ import annotations

import asyncio
import logging

from ragsweep.rag.generator.transport import _is_loopback, _LoopState

log = logging.getLogger("ragsweep.rag.generator.client")

#: attempts of one request that met a refused connection, not counted against ``max_retries``:
#: its endpoint is held back until it answers again (a server process restarted), the next attempt goes
#: to another endpoint or waits for it
LOST_CONNECTIONS = 10
#: seconds between two looks at an endpoint that stopped answering
PROBE_S = 0.25


class Outages:
    """Mixed into ``ChatClient`` (which sets ``base_urls``, ``recover_s``, ``endpoint_gone``, ``_reached``)."""

    def _lost(self, st: _LoopState, slot: int) -> None:
        """``slot``'s endpoint refused or dropped a connection: hold its slots back (the requests go
        to the other endpoints, or wait) and watch it until it answers again or is given up."""
        if not self._reached or slot in st.down or slot in st.gone:
            return  # never answered yet: a wrong address, not a server that died (counted retries, then fail)
        st.down[slot] = []
        self._count(endpoint_outages=1)
        log.warning("%s refused or dropped a connection: its requests go to the other endpoints (or wait) until "
                    "it answers again", self.base_urls[slot])
        task = asyncio.get_running_loop().create_task(self._watch_endpoint(st, slot))
        st.probes.add(task)
        task.add_done_callback(st.probes.discard)

    def _gone(self, slot: int) -> bool:
        try:
            return bool(self.endpoint_gone(slot)) if self.endpoint_gone is not None else False
        except Exception:  # noqa: BLE001 - a hint only: the probe and recover_s still decide
            return False

    async def _watch_endpoint(self, st: _LoopState, slot: int) -> None:
        import httpx

        url = self.base_urls[slot].rstrip("/") + "/models"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.recover_s
        async with httpx.AsyncClient(timeout=2.0, trust_env=not _is_loopback(url)) as http:
            while True:
                await asyncio.sleep(PROBE_S)
                if self._gone(slot) or loop.time() > deadline:
                    st.gone.add(slot)
                    log.error("%s did not answer again%s: given up; %s", self.base_urls[slot],
                              "" if self._gone(slot) else f" within {self.recover_s:g}s",
                              "its requests fail" if st.all_gone else "the other endpoints answer its requests")
                    break
                try:
                    if (await http.get(url)).status_code < 500:  # 503: llama-server still loading the model
                        log.warning("%s answers again", self.base_urls[slot])
                        break
                except httpx.HTTPError:
                    pass
        held = st.down.pop(slot, [])
        for token in held:
            st.release(token)
        if st.all_gone:  # nothing answers: the slots taken out for gone endpoints come back, and fail fast
            while st.dropped:
                st.slots.put_nowait(st.dropped.pop())

