"""What goes to the chat client and what comes back, with no HTTP in it.

* :class:`ChatRequest` (hashable, its ``key_fields`` are what the cache key hashes) and
  :class:`ChatResult` (with what the cache stores of it); ``STRUCTURED_MODES``, the
  ``response_format`` modes tried in order, and :func:`response_format_for`, what a request
  sends in one of them;
* :func:`extract_answer` (the text inside ``<answer>`` tags) and :func:`parse_retry_after`;
* the failure kinds of one attempt the client's retry loop tells apart.

:mod:`ragsweep.rag.generator.client` re-exports all of it: import from either.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from dataclasses import asdict, dataclass
from typing import Any, Mapping

Message = tuple[str, str]
STRUCTURED_MODES = ("json_schema", "json_object", "text")


# --------------------------------------------------------------------------------------------
# requests and results
# --------------------------------------------------------------------------------------------
def _freeze_messages(messages: Any) -> tuple[Message, ...]:
    if isinstance(messages, str):
        return (("user", messages),)
    out = []
    for m in messages:
        if isinstance(m, Mapping):
            role, content = m["role"], m["content"]
        else:
            role, content = m
        if not isinstance(role, str) or not isinstance(content, str):
            raise TypeError(f"a chat message is (role: str, content: str), got {m!r}")
        out.append((role, content))
    if not out:
        raise ValueError("a chat request needs at least one message")
    return tuple(out)


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion, in a form that is hashable and serialisable for cache keys.

    ``messages`` may be given as a string (one user message), ``(role, content)`` pairs or
    ``{"role", "content"}`` dicts; it is stored as a tuple of pairs. ``response_format`` is a
    JSON schema for structured output (or a full OpenAI ``response_format`` dict whose
    ``type`` is ``json_schema``/``json_object``/``text``).
    """

    messages: tuple[Message, ...]
    temperature: float = 0.0
    max_tokens: int = 256
    seed: int | None = 0
    response_format: dict | None = None
    stop: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", _freeze_messages(self.messages))
        if self.stop is not None:
            stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)
            object.__setattr__(self, "stop", stop or None)
        if self.response_format is not None and not isinstance(self.response_format, Mapping):
            raise TypeError("response_format is a JSON schema (a dict)")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")

    @classmethod
    def user(cls, prompt: str, system: str | None = None, **kw: Any) -> "ChatRequest":
        msgs = ([("system", system)] if system else []) + [("user", prompt)]
        return cls(tuple(msgs), **kw)

    def key_fields(self) -> dict[str, Any]:
        """Plain data that identifies this request (what the cache key hashes)."""
        d = asdict(self)
        d["messages"] = [list(m) for m in self.messages]
        d["stop"] = list(self.stop) if self.stop else None
        return d

    def message_dicts(self) -> list[dict[str, str]]:
        return [{"role": r, "content": c} for r, c in self.messages]

    def __hash__(self) -> int:  # response_format is a dict: hash the canonical JSON instead
        return hash(json.dumps(self.key_fields(), sort_keys=True, default=str))


@dataclass
class ChatResult:
    text: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False
    error: str | None = None
    seconds: float = 0.0
    finish_reason: str | None = None
    # this request's own timing (a question's trace): when the attempt that answered was sent (unix
    # seconds, after waiting for a free slot in the client), its round trip, and the server's own
    # processing time where the server reports it (llama.cpp's ``timings``); None when unknown
    started_at: float | None = None
    request_s: float | None = None
    server_s: float | None = None
    skipped: bool = False  # not sent: it could pass the budget (not a failure; never cached)

    @property
    def ok(self) -> bool:
        return self.error is None and self.text is not None

    @classmethod
    def from_cache(cls, value: Mapping[str, Any]) -> "ChatResult":
        return cls(
            text=value["text"],
            prompt_tokens=value.get("prompt_tokens", 0),
            completion_tokens=value.get("completion_tokens", 0),
            seconds=value.get("seconds", 0.0),
            finish_reason=value.get("finish_reason"),
            cached=True,
            request_s=value.get("request_s"),
            server_s=value.get("server_s"),
        )

    def to_cache(self) -> dict[str, Any] | None:
        """What is stored for this result; None for a failure (never stored)."""
        if not self.ok:
            return None
        return {
            "text": self.text,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": self.seconds,
            "finish_reason": self.finish_reason,
            "request_s": self.request_s,
            "server_s": self.server_s,
        }


def response_format_for(req: ChatRequest, mode: str) -> dict | None:
    """The ``response_format`` to send for ``req`` in structured ``mode`` (None: send none)."""
    rf = req.response_format
    if rf is None or mode == "text":
        return None
    kind = rf.get("type")
    full = None
    if kind == "json_schema" and isinstance(rf.get("json_schema"), Mapping):
        full, schema = dict(rf), rf["json_schema"].get("schema")  # a full OpenAI response_format
    elif kind == "json_object":
        schema = rf.get("schema")
    elif kind == "text":
        return None
    else:
        schema = dict(rf)  # a JSON schema
    if mode == "json_schema":
        if full is not None:
            return full
        if schema is None:
            return {"type": "json_object"}
        name = re.sub(r"[^A-Za-z0-9_-]", "_", str(schema.get("title") or "response"))[:64]
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    return {"type": "json_object", **({"schema": schema} if schema else {})}


# --------------------------------------------------------------------------------------------
# answer extraction
# --------------------------------------------------------------------------------------------
def extract_answer(text: str | None, tag: str = "answer") -> str:
    """What stands inside ``<tag>...</tag>``.

    The last complete pair wins; with only an opening tag, the text after the last one; with
    only a closing tag, the text before it; with no tag, the whole text. Always stripped.
    """
    if not text:
        return ""
    t = re.escape(tag)
    pairs = re.findall(rf"<{t}\s*>(.*?)</{t}\s*>", text, flags=re.DOTALL | re.IGNORECASE)
    if pairs:
        return pairs[-1].strip()
    opens = list(re.finditer(rf"<{t}\s*>", text, flags=re.IGNORECASE))
    if opens:
        return text[opens[-1].end() :].strip()
    close = re.search(rf"</{t}\s*>", text, flags=re.IGNORECASE)
    if close:
        return text[: close.start()].strip()
    return text.strip()


# --------------------------------------------------------------------------------------------
# how one attempt failed (the client's retry loop tells these apart)
# --------------------------------------------------------------------------------------------
class _Final(Exception):
    """A failure that retrying cannot fix."""


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None, shared: bool = False, lost: bool = False):
        super().__init__(message)
        self.retry_after = retry_after
        self.shared = shared  # a 429 to a request sent beside others: the client's pace, not the request
        self.lost = lost  # its endpoint refused or dropped the connection: the server's fault, not the request's


class _Skipped(Exception):
    """The attempt was not sent: it could pass the budget."""


class _FormatRejected(Exception):
    """The server answered 400/422 to a request that carried response_format."""


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date)."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            v = float(ms) / 1000.0
            if v >= 0:
                return v
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if ra is None:
        return None
    try:
        v = float(ra)
        return v if v >= 0 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(ra)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _short(exc: BaseException, limit: int = 300) -> str:
    s = str(exc).replace("\n", " ")
    return s if len(s) <= limit else s[:limit] + "..."
