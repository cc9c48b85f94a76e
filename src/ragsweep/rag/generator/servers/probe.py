"""The readiness probe of an external endpoint: one request before the first question.

A hosted API that refuses the key answers every request 401 or 403; found at the first question,
that is a whole run of failed questions (and, for the judge, a whole run of paid generations
left unjudged). So before any question, :func:`probe` sends ``GET <base_url>/models`` (free, and
it needs the key) and, where an endpoint has no such route (404/405), one chat request of one
token. A 401/403 stops the run with one line that names the server (generator or judge), its
URL, the environment variable the key was read from and how to set it - never the key. An
endpoint that cannot be reached stops it too. A 429 or a 5xx says nothing about the key: the run
goes on and its own retries deal with them. Managed servers (llama.cpp, vLLM) are started by
ragsweep with its own key and are not probed.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from ragsweep.rag.generator.servers.errors import KeyRejectedError, ServerUnreachableError
from ragsweep.rag.generator.servers.external import redact_url

log = logging.getLogger(__name__)


def needs_probe(server: Any) -> bool:
    """External endpoints only: nothing ragsweep started itself."""
    return str(getattr(server, "kind", "") or "") == "external" and bool(getattr(server, "base_url", None))


def _key_line(role: str, url: str, code: int, env: str | None, config_key: str) -> str:
    if env:
        state = "set" if os.environ.get(env) else "not set"
        return (f"the {role} server at {url} refused its API key (HTTP {code}): the key is read from the "
                f"environment variable {env} ({state} here); set it to a valid key with `export {env}=<your key>` "
                f"(or name another variable with {config_key}.api_key_env=...)")
    return (f"the {role} server at {url} refused the request (HTTP {code}): no API key was sent "
            f"({config_key}.api_key_env is null or its variable is not set); name the environment variable "
            f"that holds the key with {config_key}.api_key_env=MY_KEY and `export MY_KEY=<your key>`")


def probe(server: Any, role: str, config_key: str, model: str | None = None, key_env: str | None = None,
          timeout_s: float = 20.0) -> str:
    """Check that the endpoint of ``server`` accepts its key; returns what was found (logged).

    ``role``: "generator" or "judge"; ``config_key``: where its server is configured
    (``generator.server``, ``evaluator.judge.server``), named in the error's fix; ``key_env``: the
    variable the key is read from, where the server does not say (a judge given by ``base_url``)."""
    import httpx

    from ragsweep.rag.generator.transport import _is_loopback

    base = str(server.base_url).rstrip("/")
    url = redact_url(base)
    env = getattr(server, "api_key_env", None) or key_env
    key = server.api_key  # MissingAPIKeyError (the variable is not set) comes from here, as before
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    model = model or getattr(server, "model_name", None)
    try:
        with httpx.Client(timeout=timeout_s, trust_env=not _is_loopback(base), headers=headers) as http:
            resp = http.get(f"{base}/models")
            how = "GET /models"
            if resp.status_code in (404, 405):  # no model list here: one chat request of one token
                resp = http.post(f"{base}/chat/completions", json={
                    "model": model, "max_tokens": 1, "messages": [{"role": "user", "content": "ping"}]})
                how = "a one-token chat request"
    except httpx.HTTPError as exc:
        raise ServerUnreachableError(
            f"cannot reach the {role} server at {url} ({type(exc).__name__}: {exc}); check {config_key}.base_url "
            "and the network, then run again (no question was tried)") from None
    code = resp.status_code
    if code in (401, 403):
        raise KeyRejectedError(_key_line(role, url, code, env, config_key))
    if code >= 400:
        log.warning("the %s server at %s answered HTTP %d to %s; going on (its retries deal with it)", role, url, code, how)
        return f"HTTP {code}"
    if how == "GET /models" and model:
        try:
            ids = {str(m.get("id")) for m in resp.json().get("data") or []}
        except (ValueError, AttributeError):
            ids = set()
        if ids and model not in ids:
            log.warning("the %s server at %s does not list the model %r (it lists %s); its calls may fail", role, url,
                        model, ", ".join(sorted(ids)[:8]) + (" ..." if len(ids) > 8 else ""))
    log.info("the %s server at %s accepts its key (%s)", role, url, how)
    return "ok"


__all__ = ["needs_probe", "probe"]
