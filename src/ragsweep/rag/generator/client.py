"""The one OpenAI-compatible client through which all generation and all LLM judging go.

* async, with at most ``concurrency`` HTTP requests in flight, spread over one or several
  endpoints of the same model (``base_url`` may be a list: llama.cpp's server processes);
* its own retry loop (the ``openai`` client's retries are switched off): 429 (honouring
  ``retry-after-ms`` / ``Retry-After``, capped at ``max_backoff_s``), 408, 5xx, timeouts,
  connection errors and malformed (non-JSON, choice-less) responses are retried with exponential
  backoff and a jitter that is a hash of the request, so runs are reproducible; any other 4xx is
  final;
* an endpoint that refuses connections after the model answered (a server process that died) is
  held back until it answers again or is given up, its requests sent elsewhere (:mod:`.outage`);
* structured (JSON-schema) output where the server supports it: ``json_schema`` (OpenAI, vLLM)
  -> ``json_object`` + ``schema`` (llama-cpp-python) -> plain text; a 400/422 answer (or any
  error naming ``response_format``: llama-cpp-python says 500) to a request that carried
  ``response_format`` steps down one mode, and the mode that worked is
  remembered in ``self.structured_mode`` for every later request;
* every successful result is cached under ``Cache.key(namespace, model_id, request)``; a
  failure is never cached, so a rerun retries it. A cache hit makes no HTTP request;
* adaptive concurrency (:mod:`ragsweep.rag.generator.limiter`): 429s halve the requests in
  flight and pause new ones for their ``Retry-After``, successes bring them back; a 429 to a
  request sent while others were in flight is the client's pace, not the request: it does not
  count against ``max_retries`` (up to :data:`PACED_429S` of them); at one request in flight it does;
  OpenAI's ``insufficient_quota`` 429 (no credit left) is final;
* a ``budget`` (:mod:`ragsweep.rag.generator.budget`) with a ``price``: each attempt first
  reserves what it could cost at most; one that could pass the budget is not sent
  (``ChatResult.skipped``, counted in ``stats["budget_skipped"]``, not a failure).

A request that still fails after its retries becomes ``ChatResult(text=None, error=...)``,
is counted in ``stats["failures"]`` and logged -- never raised, never turned into text.

The request and result types, ``extract_answer`` and ``parse_retry_after`` live in
:mod:`ragsweep.rag.generator.requests` and are re-exported here.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import threading
import time
import weakref
from collections import Counter
from typing import Any, Mapping, Sequence

from ragsweep.store.cache import Cache
from ragsweep.rag.generator.requests import (  # re-exported: the import paths of before the split
    STRUCTURED_MODES,
    ChatRequest,
    ChatResult,
    Message,
    _Final,
    _FormatRejected,
    _Retryable,
    _Skipped,
    _short,
    extract_answer,
    parse_retry_after,
    response_format_for,
)
from ragsweep.rag.generator.batching import Batching
from ragsweep.rag.generator.budget import OK, WAIT
from ragsweep.rag.generator.outage import LOST_CONNECTIONS, Outages
from ragsweep.rag.generator.limiter import AdaptiveLimit
from ragsweep.rag.generator.price import parse_price, worst_case
from ragsweep.rag.generator.transport import _is_loopback, _LoopState, _openai, server_seconds

__all__ = ["STRUCTURED_MODES", "ChatClient", "ChatRequest", "ChatResult", "Message", "extract_answer",
           "parse_retry_after", "response_format_for"]

log = logging.getLogger(__name__)
#: 429s a request may get while it was sent beside others (each halves the requests in flight) before
#: its 429s count against ``max_retries``: at one request in flight a 429 is the key's answer to it
PACED_429S = 10


# --------------------------------------------------------------------------------------------
# the client
# --------------------------------------------------------------------------------------------
class ChatClient(Batching, Outages):
    """Async OpenAI-compatible chat client with bounded concurrency, retries and a cache.

    ``stats`` (a Counter):
      requests           logical requests asked for (cache hits and duplicates included)
      cache_hits         requests answered from the cache (no HTTP request)
      deduplicated       requests answered by an identical request of the same batch
      calls              HTTP requests sent (first attempts + retries + structured fallbacks)
      retries            calls that repeated a failed attempt
      structured_fallbacks  calls repeated in a simpler response_format mode
      failures           requests that finally failed (never cached)
      rate_limited       HTTP 429 answers (each also a retry, unless it was the last attempt)
      budget_skipped     requests not sent because they could pass the budget
      endpoint_outages   times an endpoint refused or dropped connections until it answered again (or was given up)
      prompt_tokens, completion_tokens   summed over successful calls
      seconds            wall time of the requests that went to the server, backoff included
    """

    def __init__(
        self,
        base_url: str | Sequence[str],
        model: str,
        api_key: str | None = None,
        concurrency: int = 4,
        timeout_s: float = 120,
        max_retries: int = 3,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30,
        cache: Cache | None = None,
        cache_namespace: str = "generation",
        structured_output: bool = True,
        structured_mode: str = "json_schema",
        model_id: Any = None,
        request_defaults: Mapping[str, Any] | None = None,
        progress: bool | None = None,
        price: Any = None,
        budget: Any = None,
        recover_s: float = 300.0,
        endpoint_gone: Any = None,
    ):
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if structured_mode not in STRUCTURED_MODES:
            raise ValueError(f"structured_mode must be one of {STRUCTURED_MODES}, got {structured_mode!r}")
        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        if not urls:
            raise ValueError("base_url: give at least one endpoint")
        self.base_urls = urls
        self.base_url = urls[0]  # named in messages; every endpoint serves the same model
        self.model = model
        self._api_key = api_key or "not-needed"
        self.concurrency = int(concurrency)
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.cache = cache
        self.cache_namespace = cache_namespace
        self.structured_output = structured_output
        # the response_format mode every new request starts with; lowered when a server rejects one
        self.structured_mode = structured_mode if structured_output else "text"
        self.model_id = model_id if model_id is not None else model
        self.request_defaults = dict(request_defaults or {})
        self.progress = progress
        self.price = parse_price(price, "price_per_1k_tokens")
        self.budget = budget if self.price is not None else None  # an unpriced model costs nothing
        self.limit = AdaptiveLimit(self.concurrency)
        self.stats: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._states: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState]" = weakref.WeakKeyDictionary()
        self._closed = False
        self.recover_s = float(recover_s)
        self._reached = False  # an endpoint has answered: a refused connection now is a server that died
        self.endpoint_gone = endpoint_gone

    def __repr__(self) -> str:  # no api key
        return f"ChatClient(base_url={self.base_url!r}, model={self.model!r}, concurrency={self.concurrency})"

    # -- requests ----------------------------------------------------------------------------
    def request(self, messages: Any, **overrides: Any) -> ChatRequest:
        """A ChatRequest with this client's configured sampling defaults (overridable)."""
        return ChatRequest(messages, **{**self.request_defaults, **overrides})

    def cache_key(self, req: ChatRequest) -> str:
        return Cache.key(self.cache_namespace, self.model_id, req.key_fields())

    # -- per-event-loop HTTP client and semaphore ---------------------------------------------
    def _state(self) -> _LoopState:
        if self._closed:
            raise RuntimeError("ChatClient is closed")
        loop = asyncio.get_running_loop()
        st = self._states.get(loop)
        if st is None:
            clients = []
            for url in self.base_urls:
                http_client = None
                if _is_loopback(url):  # never send loopback traffic through an HTTP(S)_PROXY
                    http_client = _openai().DefaultAsyncHttpxClient(trust_env=False)
                clients.append(_openai().AsyncOpenAI(
                    base_url=url,
                    api_key=self._api_key,
                    max_retries=0,
                    timeout=self.timeout_s,
                    http_client=http_client,
                ))
            st = _LoopState.make(clients, self.concurrency)
            self._states[loop] = st
        return st

    async def aclose(self) -> None:
        """Close the HTTP client of the running event loop."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover
            return
        st = self._states.pop(loop, None)
        if st is not None:
            for task in list(st.probes):
                task.cancel()
            for client in st.clients:
                await client.close()

    def close(self) -> None:
        """Forget every HTTP client; those of finished loops are already closed."""
        self._closed = True
        self._states = weakref.WeakKeyDictionary()

    def __enter__(self) -> "ChatClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- counting ----------------------------------------------------------------------------
    def _count(self, **kw: float) -> None:
        with self._lock:
            for k, v in kw.items():
                self.stats[k] += v

    # -- one HTTP attempt --------------------------------------------------------------------
    async def _attempt(self, st: _LoopState, req: ChatRequest, mode: str) -> ChatResult:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": req.message_dicts(),
            "temperature": req.temperature,
            "max_tokens": req.max_tokens,
        }
        if req.seed is not None:
            kwargs["seed"] = req.seed
        if req.stop:
            kwargs["stop"] = list(req.stop)
        rf = response_format_for(req, mode)
        if rf is not None:
            kwargs["response_format"] = rf
        window = await self.limit.enter(st)  # fewer in flight after 429s; waits out a Retry-After
        shared = self.limit.allowed > 1
        self._count(calls=1)
        try:
            slot = await st.slots.get()  # a free endpoint (the only one, unless the model is served several times)
            try:
                sent, t_sent = time.time(), time.perf_counter()  # this request's own start, not the batch's
                resp = await asyncio.wait_for(st.clients[slot].chat.completions.create(**kwargs), self.timeout_s)
                took = time.perf_counter() - t_sent
            except _openai().APITimeoutError:
                raise
            except _openai().APIConnectionError:
                self._lost(st, slot)  # before its slot goes back: held until the endpoint answers again
                raise
            finally:
                st.release(slot)
                await self.limit.leave(st)
        except (asyncio.TimeoutError, _openai().APITimeoutError):
            raise _Retryable(f"timed out after {self.timeout_s:g}s")
        except _openai().APIConnectionError as exc:
            cause = exc.__cause__ or exc
            # refused: nothing listens there (a server process that died); free while another endpoint
            # may answer. A connection dropped mid-request may be the request's doing: a counted retry
            # (ConnectError by name: the openai package's own httpx, or httpx)
            refused = any(k.__name__ == "ConnectError" for k in type(cause).__mro__) and slot in st.down
            raise _Retryable(f"connection error: {type(cause).__name__}: {_short(cause)}", lost=refused)
        except _openai().APIStatusError as exc:
            code = exc.status_code
            msg = f"HTTP {code}: {re.sub(r'^Error code: [0-9]+ - ', '', _short(exc))}"
            # llama-cpp-python answers an unsupported response_format with a 500 naming it
            if rf is not None and (code in (400, 422) or "response_format" in str(exc)):
                raise _FormatRejected(msg)
            if code == 429 and "insufficient_quota" in f"{exc} {getattr(exc, 'body', '')}":  # no credit left (OpenAI)
                raise _Final(f"{msg} (the API account is out of quota: waiting does not help)")
            if code == 429:
                wait = parse_retry_after(exc.response.headers)
                self._count(rate_limited=1)
                self.limit.rate_limited(window, None if wait is None else min(wait, self.max_backoff_s))
                raise _Retryable(msg, wait, shared=shared)
            if code >= 500 or code == 408:
                raise _Retryable(msg, parse_retry_after(exc.response.headers) if code == 503 else None)
            raise _Final(msg)
        except _openai().APIResponseValidationError as exc:
            raise _Retryable(f"malformed response: {_short(exc)}")
        except json.JSONDecodeError as exc:
            raise _Retryable(f"malformed response (invalid JSON): {_short(exc)}")
        choices = getattr(resp, "choices", None)
        if isinstance(resp, (str, bytes)) or not choices:
            raise _Retryable(f"malformed response (no choices): {_short(Exception(repr(resp)[:200]))}")
        try:
            choice = choices[0]
            text = choice.message.content
            finish = getattr(choice, "finish_reason", None)
        except (AttributeError, IndexError, TypeError) as exc:
            raise _Retryable(f"malformed response: {_short(exc)}")
        if text is None:
            raise _Retryable("malformed response (no message content)")
        self.limit.succeeded()
        self._reached = True
        usage = getattr(resp, "usage", None)
        pt = int(getattr(usage, "prompt_tokens", 0) or 0) if usage else 0
        ct = int(getattr(usage, "completion_tokens", 0) or 0) if usage else 0
        return ChatResult(text=text, prompt_tokens=pt, completion_tokens=ct, finish_reason=finish,
                          started_at=sent, request_s=took, server_s=server_seconds(resp))

    async def _paid_attempt(self, st: _LoopState, req: ChatRequest, mode: str) -> ChatResult:
        """One attempt within the budget (:class:`_Skipped` when it could pass it)."""
        held = 0.0 if self.budget is None else await st.in_turn(lambda: self._reserve(req), WAIT)
        if held is None:
            raise _Skipped(self.budget.why())
        result = None
        try:
            result = await self._attempt(st, req, mode)
            return result
        finally:
            self._settle(held, result)

    def _reserve(self, req: ChatRequest) -> Any:
        """What this attempt could cost at most, held in the budget (0.0: no budget); None: refused
        (the budget is reached); ``WAIT``: not before a call in flight settles."""
        if self.budget is None:
            return 0.0
        usd = worst_case(self.price, req.messages, req.max_tokens)
        answer = self.budget.reserve(usd)
        return usd if answer == OK else WAIT if answer == WAIT else None

    def _settle(self, held: float, result: ChatResult | None) -> None:
        if self.budget is not None:
            spent = self.price.usd(result.prompt_tokens, result.completion_tokens) if result is not None else 0.0
            self.budget.settle(held, spent)

    def _backoff(self, key: str, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_backoff_s)
        base = min(self.max_backoff_s, self.backoff_s * (2 ** (retry - 1)))
        frac = int(hashlib.sha256(f"{key}:{retry}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
        return base * (0.5 + 0.5 * frac)  # "equal jitter", deterministic per request and retry

    async def _call(self, req: ChatRequest, key: str) -> ChatResult:
        """The request against the server, with retries; never raises for server trouble."""
        st = self._state()
        t0 = time.perf_counter()
        mode = self.structured_mode if req.response_format is not None else "text"
        retry = paced = lost = 0  # lost: refused/dropped connections (the endpoint's fault); paced: 429s to a request sent beside others (the limit then halves): not its retries
        error = "no attempt made"
        while True:
            try:
                result = await self._paid_attempt(st, req, mode)
            except _Skipped as exc:
                self._count(budget_skipped=1)
                return ChatResult(text=None, error=f"not sent: {exc}", skipped=True, seconds=time.perf_counter() - t0)
            except _FormatRejected as exc:
                nxt = STRUCTURED_MODES.index(mode) + 1
                log.info("server rejected response_format mode %r (%s); trying %r", mode, exc, STRUCTURED_MODES[nxt])
                mode = STRUCTURED_MODES[nxt]
                self._count(structured_fallbacks=1)
                continue
            except _Final as exc:
                error = str(exc)
                break
            except _Retryable as exc:
                error = str(exc)
                if exc.lost and lost < LOST_CONNECTIONS:
                    lost += 1  # its endpoint is held back now: the next attempt goes to another, or waits
                    self._count(retries=1)
                    continue
                if exc.shared and paced < PACED_429S:
                    paced += 1
                elif retry >= self.max_retries:
                    break
                else:
                    retry += 1
                delay = self._backoff(key, max(1, retry), exc.retry_after)
                log.debug("retry %d/%d in %.2fs after %s", retry, self.max_retries, delay, error)
                self._count(retries=1)
                await asyncio.sleep(delay)
                continue
            # success
            if req.response_format is not None and mode != self.structured_mode:
                with self._lock:
                    if STRUCTURED_MODES.index(mode) > STRUCTURED_MODES.index(self.structured_mode):
                        log.warning(
                            "%s does not accept response_format as %r; using %r from now on",
                            self.base_url, self.structured_mode, mode,
                        )
                        self.structured_mode = mode
            result.seconds = time.perf_counter() - t0
            self._count(
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
                seconds=result.seconds,
            )
            return result
        seconds = time.perf_counter() - t0
        attempts = retry + paced + lost + 1
        error = f"{error} (after {attempts} attempt{'s' if attempts > 1 else ''})"
        log.warning("chat request to %s failed: %s", self.base_url, error)
        self._count(failures=1, seconds=seconds)
        return ChatResult(text=None, error=error, seconds=seconds)
