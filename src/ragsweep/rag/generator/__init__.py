"""Generation (and LLM judging): one OpenAI-compatible client, served by llama.cpp, vLLM or an
external endpoint, chosen by the ``generator`` config group.

    server = build_server(cfg.generator).start()       # one server for a whole sweep
    client = build_client(cfg.generator, server, cache)
    results = client.chat_many([client.request(prompt) for prompt in prompts])
    server.stop()
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping, Sequence

from ragsweep.rag.generator.client import (
    ChatClient,
    ChatRequest,
    ChatResult,
    extract_answer,
    parse_retry_after,
)
from ragsweep.rag.generator.server import (
    ExecutableNotFoundError,
    ExternalServer,
    LlamaCppServer,
    ManagedServer,
    MissingAPIKeyError,
    PortInUseError,
    ServerError,
    ServerStartupError,
    VLLMServer,
    find_orphans,
    stop_orphans,
)

__all__ = [
    "ChatClient",
    "ChatRequest",
    "ChatResult",
    "ExecutableNotFoundError",
    "ExternalServer",
    "GeneratorConfig",
    "LlamaCppServer",
    "ManagedServer",
    "MissingAPIKeyError",
    "PortInUseError",
    "ServerError",
    "ServerStartupError",
    "VLLMServer",
    "build_client",
    "build_server",
    "generation_key",
    "generation_keys",
    "model_id",
    "extract_answer",
    "find_orphans",
    "parse_retry_after",
    "stop_orphans",
]


@dataclass
class GeneratorConfig:
    """Schema of one ``conf/generator/*.yaml`` (validated before any work starts)."""

    name: str = "smollm2"
    server: Any = None  # a Hydra ``_target_`` node: LlamaCppServer, VLLMServer, ExternalServer
    temperature: float = 0.0
    max_tokens: int = 256
    seed: Any = 0  # int | None
    concurrency: Any = None  # int | None: None = the server kind's (servers/defaults.py: vLLM 32, llama.cpp 1 per process)
    timeout_s: Any = None  # float | None: None = the server kind's (vLLM 300 s, llama.cpp 120 s)
    max_retries: int = 3
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    structured_output: bool = True
    stop: Any = None  # list[str] | None
    price_per_1k_tokens: Any = None  # a number, or {prompt, completion}: cost/usd_generation (an external API)

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> ValueError:
            return ValueError(f"generator.{name} {why}, got {getattr(self, name)!r}")

        if not isinstance(self.name, str) or not self.name:
            raise bad("name", "must be a non-empty string")
        if self.server is None and self.name != "none":  # generator=none: retrieval only, no server
            raise bad("server", "must be a server spec with a _target_ (or use generator=none for a retrieval-only run)")
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)) or self.temperature < 0:
            raise bad("temperature", "must be a number >= 0")
        for name, low in (("max_tokens", 1), ("concurrency", 1), ("max_retries", 0)):
            v = getattr(self, name)
            if v is None and name == "concurrency":
                continue  # the server kind's default
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise bad(name, f"must be an integer >= {low}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise bad("seed", "must be an integer or null")
        for name in ("timeout_s", "backoff_s", "max_backoff_s"):
            v = getattr(self, name)
            if v is None and name == "timeout_s":
                continue  # the server kind's default
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
                raise bad(name, "must be a number > 0")
        from ragsweep.rag.generator.price import parse_price

        parse_price(self.price_per_1k_tokens, "generator.price_per_1k_tokens")  # a bad price fails before any work
        if self.stop is not None:
            stop = [self.stop] if isinstance(self.stop, str) else list(self.stop)
            if not all(isinstance(s, str) for s in stop):
                raise bad("stop", "must be a string or a list of strings")
            self.stop = stop

    @classmethod
    def from_config(cls, cfg: Any) -> "GeneratorConfig":
        """Validate a DictConfig/dict (unknown keys are errors that name them)."""
        if isinstance(cfg, cls):
            return cfg
        try:
            from omegaconf import DictConfig, OmegaConf

            if isinstance(cfg, DictConfig):
                cfg = OmegaConf.to_container(cfg, resolve=True)
        except ImportError:  # pragma: no cover
            pass
        if not isinstance(cfg, Mapping):
            raise TypeError(f"a generator config is a mapping, got {type(cfg).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise ValueError(
                f"unknown generator config key(s): {', '.join('generator.' + k for k in unknown)} "
                f"(known: {', '.join(sorted(known))})"
            )
        return cls(**dict(cfg))

    def request_defaults(self) -> dict[str, Any]:
        return {
            "temperature": float(self.temperature),
            "max_tokens": int(self.max_tokens),
            "seed": self.seed,
            "stop": tuple(self.stop) if self.stop else None,
        }


def build_server(gen_cfg: Any) -> ManagedServer | ExternalServer:
    """The (not yet started) server of a generator config, via Hydra ``instantiate``."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    spec = gen_cfg.server if not isinstance(gen_cfg, Mapping) else gen_cfg["server"]
    if spec is None or "_target_" not in spec:
        raise ValueError("generator.server needs a _target_ (e.g. ragsweep.rag.generator.server.LlamaCppServer)")
    if not OmegaConf.is_config(spec):
        spec = OmegaConf.create(dict(spec))
    return instantiate(spec, _convert_="all")


def model_id(server: Any) -> Any:
    """What names a server's model in the generation cache keys (not its port, not its process)."""
    return getattr(server, "cache_identity", server.model_name)


def generation_key(server: Any, req: ChatRequest, namespace: str = "generation") -> str:
    """The cache key a :func:`build_client` client of ``server`` stores ``req``'s answer under
    (the server need not be started)."""
    return generation_keys(server, [req], namespace)[0]


def generation_keys(server: Any, reqs: Sequence[ChatRequest], namespace: str = "generation") -> list[str]:
    """:func:`generation_key` of each request, the server's model identity read once (a llama.cpp
    server's takes ~10 ms: its weight format, build record and CPU variant)."""
    from ragsweep.store.cache import Cache

    ident = model_id(server)
    return [Cache.key(namespace, ident, req.key_fields()) for req in reqs]


def build_client(
    gen_cfg: Any, server: Any, cache: Any = None, cache_namespace: str = "generation", progress: bool | None = None,
    budget: Any = None,
) -> ChatClient:
    """A ChatClient for a started ``server`` with the sampling settings of ``gen_cfg`` (its price,
    and ``budget``: what its calls may spend, :mod:`ragsweep.rag.generator.budget`)."""
    from ragsweep.rag.generator.servers.defaults import client_setting, endpoints

    cfg = GeneratorConfig.from_config(gen_cfg)
    return ChatClient(
        base_url=endpoints(server),
        model=server.model_name,
        api_key=server.api_key,
        concurrency=client_setting("concurrency", cfg.concurrency, server),
        timeout_s=client_setting("timeout_s", cfg.timeout_s, server),
        max_retries=cfg.max_retries,
        backoff_s=cfg.backoff_s,
        max_backoff_s=cfg.max_backoff_s,
        cache=cache,
        cache_namespace=cache_namespace,
        structured_output=cfg.structured_output,
        structured_mode=getattr(server, "structured_mode", "json_schema"),
        model_id=model_id(server),
        request_defaults=cfg.request_defaults(),
        progress=progress,
        price=cfg.price_per_1k_tokens,
        budget=budget,
        # a managed server in this process says when one of its processes died for good
        endpoint_gone=getattr(server, "endpoint_gone", None),
    )
