"""The client settings that go with a kind of server, used where the config leaves them null.

``generator.concurrency``, ``generator.timeout_s`` and ``evaluator.judge.concurrency`` are
``null`` in the shipped configs: the values then follow the server, whichever way it was
selected (``generator=vllm``, ``server@generator.server=vllm``, ``server@evaluator.judge.server=vllm``).
vLLM's continuous batching is what makes it fast, so it gets 32 requests in flight; llama-cpp-python's
server answers one request at a time (a second one waiting beside it halves its decoding speed),
so it gets one request in flight per server process (``replicas``, which the client spreads them over);
llama.cpp's own llama-server (``engine``) decodes ``slots`` requests together in each process, so
it gets ``replicas x slots``.
A number set in the config always wins.
"""

from __future__ import annotations

from typing import Any

#: kind -> {"concurrency", "timeout_s"}
CLIENT_DEFAULTS: dict[str, dict[str, Any]] = {
    "llamacpp": {"concurrency": 1, "timeout_s": 120.0},
    "vllm": {"concurrency": 32, "timeout_s": 300.0},
    "external": {"concurrency": 8, "timeout_s": 120.0},
}
#: a server of another kind (a ManagedServer subclass of the user's)
FALLBACK: dict[str, Any] = {"concurrency": 4, "timeout_s": 120.0}


def client_defaults(server: Any) -> dict[str, Any]:
    """The defaults for ``server`` (anything with a ``kind``; a sweep's attached server too).
    llama.cpp: one request in flight per server process (``generator.server.replicas``)."""
    kind = str(getattr(server, "kind", "") or "")
    out = dict(CLIENT_DEFAULTS.get(kind, FALLBACK))
    if kind == "llamacpp":  # each process answers `slots` requests at once (llama-server; else 1)
        slots = max(1, int(getattr(server, "slots", None) or 1))
        out["concurrency"] *= max(1, int(getattr(server, "replicas", None) or 1)) * slots
        out["timeout_s"] *= slots  # a request shares its process with slots - 1 others: up to that much slower
    return out


def endpoints(server: Any) -> list[str]:
    """The server's endpoints: ``base_urls`` where it has several (llama.cpp replicas), else ``base_url``."""
    urls = getattr(server, "base_urls", None)
    return list(urls) if urls else [server.base_url]


def client_setting(name: str, configured: Any, server: Any) -> Any:
    """``configured`` unless it is None, else the server kind's default for ``name``."""
    return configured if configured is not None else client_defaults(server)[name]
