"""An external OpenAI-compatible endpoint (OpenAI, a shared vLLM, ...): no process to run; the
API key is read only from an environment variable, and never logged."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ragsweep.rag.generator.servers.errors import MissingAPIKeyError


def redact_url(url: str) -> str:
    """``url`` without user:password."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = f"***@{host}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return url


class ExternalServer:
    """Any OpenAI-compatible endpoint; the API key comes only from an environment variable."""

    kind = "external"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str | None = "OPENAI_API_KEY",
        context_window: int | None = None,
    ):
        self._base_url = base_url.rstrip("/")
        self.model_name = model
        self.api_key_env = api_key_env or None
        self._context_window = context_window
        self.structured_mode = "json_schema"

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def api_key(self) -> str | None:
        if self.api_key_env is None:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise MissingAPIKeyError(
                f"environment variable {self.api_key_env} is not set: the external generator at "
                f"{redact_url(self._base_url)} reads its API key only from there "
                f"(generator.server.api_key_env; null for a server without a key)"
            )
        return key

    @property
    def context_window(self) -> int | None:
        return self._context_window

    @property
    def cache_identity(self) -> Any:
        return {"backend": "external", "model": self.model_name}

    pid = None
    log_path = None
    running = True

    def start(self) -> "ExternalServer":
        self.api_key  # noqa: B018 - fail now, not at the first request
        return self

    def check(self) -> None:
        self.api_key  # noqa: B018 - the key's variable is set

    def stop(self) -> None:
        pass

    def __enter__(self) -> "ExternalServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.kind,
            "base_url": redact_url(self._base_url),
            "model": self.model_name,
            "api_key_env": self.api_key_env,
        }

    def __repr__(self) -> str:
        return f"ExternalServer(base_url={redact_url(self._base_url)!r}, model={self.model_name!r})"
