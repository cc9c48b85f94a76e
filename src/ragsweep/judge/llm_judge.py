"""The LLM judge: one OpenAI-compatible model for claim extraction, entailment checking, the
RAGBench TRACe annotator and the RAGAS prompts.

:class:`Judge` owns the judge's own server and model config (``evaluator.judge``), separate from
the generator's: ``server`` is a Hydra spec (``_target_: ragsweep.rag.generator.server.LlamaCppServer``
/ ``VLLMServer`` / ``ExternalServer``) or an already built server, or ``base_url`` + ``model``
for an external endpoint. A managed server is started on the first request that the cache does
not answer (a fully cached rerun starts nothing) and stopped by :meth:`Judge.close`.

The judge's :class:`~ragsweep.rag.generator.client.ChatClient` has NO cache: an answer is worth
keeping only after it parsed, so the callers cache parsed results (claims, labels,
annotations) themselves and a malformed answer is never stored. :meth:`Judge.ask` sends every
item, parses each answer with the item's parser, and re-asks the ones that did not parse with a
varied request (``seed + attempt``, temperature ``retry_temperature`` when the configured one is
0, and a reminder appended to the prompt) up to ``parse_retries`` times. An answer that still
does not parse counts in ``stats["parse_failures"]``, a request that failed at the HTTP level
(after the client's own retries) in ``stats["failures"]``; either gives ``None`` - never a guessed
label.

:class:`~ragsweep.judge.llm_checker.LLMChecker` checks several claims against one reference per call with JSON-schema output
``{"labels": [...]}`` (exactly one label per claim). :class:`TraceAnnotator` sends the RAGBench
labelling prompt (:mod:`ragsweep.judge.annotator`; Friel et al. 2024, appendix 7.4, quoted verbatim) and parses its JSON.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ragsweep.judge.components import plain
from ragsweep.judge.labels import LABELS, normalize_label

log = logging.getLogger(__name__)

#: the chat client's counters a judge reports (``judge/<name>``)
CLIENT_COUNTERS = ("calls", "retries", "rate_limited", "budget_skipped", "prompt_tokens", "completion_tokens",
                   "structured_fallbacks")
#: Bumped whenever a judge prompt of this module changes (part of the cache keys).
RETRY_REMINDER = (
    "\n\n(Your previous answer could not be read. Answer with the JSON object only, exactly as "
    "specified, and nothing else.)"
)


# --------------------------------------------------------------------------------------------
# parsing helpers
# --------------------------------------------------------------------------------------------
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL | re.IGNORECASE)


def parse_json_object(text: str | None) -> dict | None:
    """The JSON object in a model answer (code fences and text around the object tolerated);
    None when there is none."""
    if not isinstance(text, str) or not text.strip():
        return None
    t = text.strip()
    m = _FENCE.match(t)
    if m:
        t = m.group(1)
    try:
        obj = json.loads(t)
    except json.JSONDecodeError:
        start, end = t.find("{"), t.rfind("}")
        if start < 0 or end <= start:
            return None
        try:
            obj = json.loads(t[start : end + 1])
        except json.JSONDecodeError:
            return None
    return obj if isinstance(obj, dict) else None


def _bad(name: str, why: str, value: Any) -> ValueError:
    return ValueError(f"evaluator.judge.{name} {why}, got {value!r}")


# --------------------------------------------------------------------------------------------
# the judge
# --------------------------------------------------------------------------------------------
@dataclass
class JudgeItem:
    """One judge question: chat messages, the JSON schema of the answer, a parser returning the
    parsed value or None when the answer is unusable, and the completion budget."""

    messages: Sequence[tuple[str, str]]
    schema: dict | None
    parse: Callable[[str], Any]
    max_tokens: int = 512
    owner: str | None = None  # the question it is asked for: a budget stop marks that question not judged


class Judge:
    """The judge model behind an OpenAI-compatible server (see the module doc)."""

    @dataclass
    class Config:
        server: Any = None  # Hydra spec with _target_, or a server object; else base_url + model
        base_url: Any = None  # str | None: an external OpenAI-compatible endpoint
        model: Any = None  # str | None: model name sent in requests (default: the server's)
        api_key_env: Any = "OPENAI_API_KEY"  # str | None, read only with base_url (if set)
        temperature: float = 0.0
        max_tokens: int = 1024  # for the TRACe annotator; extraction/checking set their own
        seed: Any = 0  # int | None
        concurrency: Any = None  # int | None: None = the server kind's (vLLM 32, llama.cpp 1; servers/defaults.py)
        timeout_s: float = 120.0
        max_retries: int = 3  # HTTP-level retries (429/5xx/timeouts), in the ChatClient
        backoff_s: float = 1.0
        max_backoff_s: float = 30.0
        parse_retries: int = 2  # re-asks of an answer that did not parse
        retry_temperature: float = 0.3  # temperature of re-asks when ``temperature`` is 0
        structured_output: bool = True
        price_per_1k_tokens: Any = None  # USD per 1,000 tokens (a number or {prompt, completion}): cost/usd_judge

        def __post_init__(self) -> None:
            from ragsweep.rag.generator.price import parse_price

            self.server = plain(self.server)
            parse_price(plain(self.price_per_1k_tokens), "evaluator.judge.price_per_1k_tokens")
            if self.server is None and not self.base_url:
                raise ValueError(
                    "evaluator.judge.server must be a server spec with a _target_ "
                    "(e.g. ragsweep.rag.generator.server.LlamaCppServer), or give evaluator.judge.base_url"
                )
            if isinstance(self.server, Mapping) and "_target_" not in self.server:
                raise _bad("server", "needs a _target_", self.server)
            for name in ("base_url", "model", "api_key_env"):
                v = getattr(self, name)
                if v is not None and not isinstance(v, str):
                    raise _bad(name, "must be a string or null", v)
            for name in ("temperature", "retry_temperature"):
                v = getattr(self, name)
                if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                    raise _bad(name, "must be a number >= 0", v)
            for name, low in (("max_tokens", 1), ("concurrency", 1), ("max_retries", 0), ("parse_retries", 0)):
                v = getattr(self, name)
                if v is None and name == "concurrency":
                    continue  # the server kind's default
                if isinstance(v, bool) or not isinstance(v, int) or v < low:
                    raise _bad(name, f"must be an integer >= {low}", v)
            if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
                raise _bad("seed", "must be an integer or null", self.seed)
            for name in ("timeout_s", "backoff_s", "max_backoff_s"):
                v = getattr(self, name)
                if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
                    raise _bad(name, "must be a number > 0", v)
            if not isinstance(self.structured_output, bool):
                raise _bad("structured_output", "must be true or false", self.structured_output)

    def __init__(self, **kwargs: Any) -> None:
        from ragsweep.errors import build_config

        self.config = build_config(self.Config, kwargs, "evaluator.judge")
        self._server: Any = None
        self._client: Any = None
        self._owns_server = False
        self._stats: Counter[str] = Counter()
        self.budget: Any = None  # set by the pipeline: the run's (and sweep's) budget, with a price
        self.cut: set[Any] = set()  # owners of the items the budget kept from being asked

    @classmethod
    def from_spec(cls, spec: Any) -> "Judge | None":
        """A Judge from ``evaluator.judge`` (None, a mapping/DictConfig, or a Judge)."""
        if spec is None or isinstance(spec, Judge):
            return spec
        spec = plain(spec)
        if not isinstance(spec, Mapping):
            raise ValueError(f"evaluator.judge must be a mapping or null, got {type(spec).__name__}")
        return cls(**dict(spec))

    def __repr__(self) -> str:
        return f"Judge(server={self.server!r}, model={self.model_name!r})"

    # -- server and identity ----------------------------------------------------------------------
    @property
    def server(self) -> Any:
        if self._server is None:
            spec = self.config.server
            if spec is None:
                from ragsweep.rag.generator.server import ExternalServer

                env = self.config.api_key_env
                # a key only when its variable is set: a local server needs none, and a server
                # that needs one answers 401, which is counted as a judge failure
                env = env if env and os.environ.get(env) else None
                self._server = ExternalServer(
                    base_url=self.config.base_url, model=self.config.model or "default", api_key_env=env
                )
            elif isinstance(spec, Mapping):
                from hydra.utils import instantiate
                from omegaconf import OmegaConf

                self._server = instantiate(OmegaConf.create(dict(spec)), _convert_="all")
                self._server.config_key = "evaluator.judge.server"  # named in its errors (a start's timeout)
            else:
                self._server = spec
        return self._server

    @property
    def model_name(self) -> str:
        return self.config.model or getattr(self.server, "model_name", None) or "default"

    @property
    def identity(self) -> dict[str, Any]:
        """What names this judge in cache keys: the model's identity and the sampling settings
        (not the port, concurrency or timeouts)."""
        srv = self.server
        return {
            "model": getattr(srv, "cache_identity", None) or {"model": self.model_name},
            "model_name": self.model_name,
            "temperature": float(self.config.temperature),
            "seed": self.config.seed,
            "structured_output": self.config.structured_output,
        }

    @property
    def started(self) -> bool:
        return self._client is not None

    def start(self) -> "Judge":
        """Start the server (a managed one only if it is not running yet) and build the client."""
        if self._client is not None:
            return self
        from ragsweep.rag.generator.client import ChatClient
        from ragsweep.rag.generator.servers.defaults import client_setting, endpoints

        srv = self.server
        if hasattr(srv, "start") and not getattr(srv, "running", False):
            log.info("starting the judge server %r", srv)
            srv.start()
            self._owns_server = True
        elif hasattr(srv, "start") and getattr(srv, "kind", "") == "external":
            srv.start()  # checks the API key now rather than at the first request
        cfg = self.config
        self._client = ChatClient(
            base_url=endpoints(srv),
            model=self.model_name,
            api_key=getattr(srv, "api_key", None),
            concurrency=client_setting("concurrency", cfg.concurrency, srv),
            timeout_s=cfg.timeout_s,
            max_retries=cfg.max_retries,
            backoff_s=cfg.backoff_s,
            max_backoff_s=cfg.max_backoff_s,
            cache=None,  # never cache an unparsed answer: parsed results are cached by the callers
            cache_namespace="judge",
            structured_output=cfg.structured_output,
            structured_mode=getattr(srv, "structured_mode", "json_schema"),
            model_id=self.identity,
            price=plain(cfg.price_per_1k_tokens),
            budget=self.budget,
        )
        return self

    def close(self) -> None:
        """Stop the server if this judge started it."""
        client, self._client = self._client, None
        if client is not None:
            for k in CLIENT_COUNTERS:
                self._stats[k] += client.stats.get(k, 0)
            client.close()
        if self._owns_server and self._server is not None:
            self._owns_server = False
            log.info("stopping the judge server %r", self._server)
            self._server.stop()

    def __enter__(self) -> "Judge":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def stats(self) -> Counter:
        """``requests`` (chat requests, re-asks included), ``calls`` (HTTP calls, transport
        retries included), ``failures``, ``parse_failures``, ``parse_retries``,
        ``prompt_tokens``, ``completion_tokens``."""
        out = Counter(self._stats)
        if self._client is not None:
            for k in CLIENT_COUNTERS:
                out[k] += self._client.stats.get(k, 0)
        return out

    # -- asking -----------------------------------------------------------------------------------
    def _request(self, item: JudgeItem, attempt: int) -> Any:
        from ragsweep.rag.generator.client import ChatRequest

        cfg = self.config
        messages = [tuple(m) for m in item.messages]
        temperature = float(cfg.temperature)
        seed = cfg.seed
        if attempt:
            role, content = messages[-1]
            messages[-1] = (role, content + RETRY_REMINDER)
            seed = (seed or 0) + attempt
            if temperature == 0:
                temperature = float(cfg.retry_temperature)
        return ChatRequest(
            messages=tuple(messages),
            temperature=temperature,
            max_tokens=int(item.max_tokens),
            seed=seed,
            response_format=item.schema,
        )

    def ask(self, items: Sequence[JudgeItem], desc: str = "judging") -> list[Any]:
        """The parsed answer of every item, ``None`` where the request failed or the answer did not
        parse after ``parse_retries`` re-asks (both counted)."""
        items = list(items)
        results: list[Any] = [None] * len(items)
        if not items:
            return results
        self.start()
        pending = list(range(len(items)))
        for attempt in range(self.config.parse_retries + 1):
            if not pending:
                break
            if attempt:
                self._stats["parse_retries"] += len(pending)
            outs = self._client.chat_many([self._request(items[i], attempt) for i in pending], desc=desc)
            self._stats["requests"] += len(pending)
            retry = []
            for i, out in zip(pending, outs):
                if out.skipped:  # not sent: the budget is reached (counted by the client, not a failure)
                    self.cut.add(items[i].owner)
                    continue
                if not out.ok:
                    self._stats["failures"] += 1
                    log.warning("judge request failed: %s", out.error)
                    continue
                try:
                    parsed = items[i].parse(out.text)
                except Exception:  # noqa: BLE001 - a parser bug must not pass as a label
                    log.exception("judge answer parser raised")
                    parsed = None
                if parsed is None:
                    retry.append(i)
                else:
                    results[i] = parsed
            pending = retry
        if pending:
            self._stats["parse_failures"] += len(pending)
            log.warning(
                "%d judge answer(s) could not be parsed after %d re-ask(s); their results are "
                "missing (metrics NaN)", len(pending), self.config.parse_retries,
            )
        return results



_MOVED = {
    "CHECK_PROMPT": "llm_checker", "LLMChecker": "llm_checker", "labels_schema": "llm_checker",
    "parse_labels": "llm_checker", "ANNOTATOR_PROMPT": "annotator", "TraceAnnotator": "annotator",
    "annotator_prompt": "annotator", "parse_annotation": "annotator", "format_keyed": "annotator",
}


def __getattr__(name: str) -> Any:
    """The LLM checker and the annotator live in their own modules; their old names here still work."""
    if name in _MOVED:
        import importlib

        return getattr(importlib.import_module(f"ragsweep.judge.{_MOVED[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ANNOTATOR_PROMPT",
    "Judge",
    "JudgeItem",
    "LABELS",
    "LLMChecker",
    "TraceAnnotator",
    "annotator_prompt",
    "labels_schema",
    "normalize_label",
    "parse_annotation",
    "parse_json_object",
    "parse_labels",
]
