"""A tiny OpenAI-compatible HTTP server for tests (stdlib only, loopback only).

In a test::

    with FakeOpenAIServer(script=[status(500), ok()]) as fake:
        client = ChatClient(fake.base_url, "fake")
        ...
        assert fake.n_requests == 2

Each POST to ``/v1/chat/completions`` takes the next action of ``script`` (then ``default``),
or whatever ``responder(body, index)`` returns when given. Actions are made by the helpers
below: ``ok``, ``status``, ``rate_limited``, ``hang``, ``close``, ``invalid_json``. ``GET
/v1/models`` and ``GET /health`` always answer. The server is bounded: after ``max_requests``
chat requests it answers 503, and it shuts itself down after ``max_seconds``.

Like a hosted API, it can also check a key (``api_key``: any other bearer token gets 401, on
``/v1/models`` too), limit the rate (``rate_limit=(n, seconds)``: more than n chat requests
started within any such window get 429 with a ``Retry-After`` saying when the window frees up)
lack the model list (``models=False``), and count tokens as a real tokenizer roughly does (``usage``: a function of the request body and
the answer text giving (prompt, completion) tokens; default: words of the JSON messages).

As a script (``python tests/fake_openai_server.py --port P``) it serves ``ok`` answers in the
foreground, which the managed-server tests start as a child process.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


@dataclass
class Action:
    kind: str  # ok | status | hang | close | invalid_json
    text: str | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    delay: float = 0.0


def ok(text: str | None = None, delay: float = 0.0) -> Action:
    """A normal answer; ``text`` defaults to ``"echo: <last user message>"``."""
    return Action("ok", text=text, delay=delay)


def status(code: int, body: Any = None, headers: dict[str, str] | None = None, delay: float = 0.0) -> Action:
    return Action("status", status=code, body=body, headers=dict(headers or {}), delay=delay)


def rate_limited(retry_after: str | float | None = None, retry_after_ms: float | None = None) -> Action:
    headers = {}
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    if retry_after_ms is not None:
        headers["retry-after-ms"] = str(retry_after_ms)
    return status(429, {"error": {"message": "rate limited", "type": "rate_limit"}}, headers)


def hang() -> Action:
    """Accept the request and never answer (until the server stops or ``hang_s`` passes)."""
    return Action("hang")


def close() -> Action:
    """Close the connection without any response."""
    return Action("close")


def invalid_json() -> Action:
    return Action("invalid_json")


def _last_user(body: dict) -> str:
    for m in reversed(body.get("messages") or []):
        if m.get("role") == "user":
            c = m.get("content")
            return c if isinstance(c, str) else json.dumps(c)
    return ""


def completion(body: dict, text: str, usage: Callable[[dict, str], tuple[int, int]] | None = None) -> dict:
    prompt, done = usage(body, text) if usage else (len(json.dumps(body.get("messages", [])).split()), len(text.split()))
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "fake"),
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done},
    }


class FakeOpenAIServer:
    def __init__(
        self,
        script: list[Action] | None = None,
        default: Action | None = None,
        responder: Callable[[dict, int], Action | None] | None = None,
        max_requests: int = 1000,
        max_seconds: float = 60.0,
        hang_s: float = 30.0,
        port: int = 0,
        api_key: str | None = None,
        rate_limit: tuple[int, float] | None = None,
        usage: Callable[[dict, str], tuple[int, int]] | None = None,
        models: bool = True,
    ):
        self.script = list(script or [])
        self.default = default or ok()
        self.responder = responder
        self.max_requests = max_requests
        self.max_seconds = max_seconds
        self.hang_s = hang_s
        self.api_key = api_key
        self.rate_limit = rate_limit
        self.usage = usage
        self.models = models  # False: no GET /v1/models route (404), as on some OpenAI-compatible servers
        self.rejected_keys = 0  # requests refused with 401
        self.rate_limited = 0  # chat requests answered 429 by the rate limit
        self.models_requests = 0  # GET /v1/models
        self._starts: list[float] = []  # when the accepted chat requests of the rate window started
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = _Server(("127.0.0.1", port), _Handler)
        self._httpd.fake = self
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def n_requests(self) -> int:
        with self._lock:
            return len(self.requests)

    def start(self) -> "FakeOpenAIServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        self._timer = threading.Timer(self.max_seconds, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()
        if self._timer is not None and self._timer is not threading.current_thread():
            self._timer.cancel()
        self._httpd.shutdown()
        self._httpd.server_close()

    def serve_forever(self) -> None:
        try:
            self._httpd.serve_forever(poll_interval=0.1)
        finally:
            self._httpd.server_close()

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- behaviour ---------------------------------------------------------------------------
    def key_refused(self, headers: dict[str, str]) -> bool:
        if self.api_key is None or headers.get("authorization") == f"Bearer {self.api_key}":
            return False
        with self._lock:
            self.rejected_keys += 1
        return True

    def _over_rate(self) -> float | None:
        """Seconds until the rate window frees up, when this request is one too many (lock held)."""
        if self.rate_limit is None:
            return None
        n, window = self.rate_limit
        now = time.monotonic()
        self._starts = [t for t in self._starts if now - t < window]
        if len(self._starts) >= n:
            return window - (now - self._starts[0])
        self._starts.append(now)
        return None

    def _next_action(self, body: dict, headers: dict[str, str]) -> tuple[Action, int]:
        with self._lock:
            index = len(self.requests)
            self.requests.append(body)
            self.headers.append(headers)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            wait = self._over_rate()
            if wait is not None:
                self.rate_limited += 1
                return status(429, {"error": {"message": "Rate limit reached", "type": "requests"}},
                              {"Retry-After": f"{max(wait, 0.01):.3f}"}), index
            if index >= self.max_requests:
                return status(503, {"error": {"message": "fake server request budget exhausted"}}), index
            action = None
            if self.responder is not None:
                action = self.responder(body, index)
            if action is None:
                action = self.script.pop(0) if self.script else self.default
            return action, index

    def _done(self) -> None:
        with self._lock:
            self.in_flight -= 1


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    fake: FakeOpenAIServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send_json(self, code: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        raw = json.dumps(payload).encode()
        self._send_raw(code, raw, headers)

    def _send_raw(self, code: int, raw: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(raw)
        self.wfile.flush()

    def _refuse_key(self) -> bool:
        if not self.server.fake.key_refused({k.lower(): v for k, v in self.headers.items()}):
            return False
        self._send_json(401, {"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error",
                                        "code": "invalid_api_key"}})
        return True

    def do_GET(self) -> None:
        if self._refuse_key():
            return
        if self.path.rstrip("/") in ("/v1/models", "/models") and self.server.fake.models:
            with self.server.fake._lock:
                self.server.fake.models_requests += 1
            self._send_json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
        elif self.path.rstrip("/") == "/health":
            self._send_json(200, {"status": "ok"})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send_json(400, {"error": {"message": "request body is not JSON"}})
            return
        if self._refuse_key():
            return
        fake = self.server.fake
        action, _ = fake._next_action(body, {k.lower(): v for k, v in self.headers.items()})
        try:
            if action.delay:
                fake._stopping.wait(action.delay)
            if action.kind == "ok":
                text = action.text if action.text is not None else f"echo: {_last_user(body)}"
                self._send_json(200, completion(body, text, fake.usage))
            elif action.kind == "status":
                payload = action.body if action.body is not None else {"error": {"message": f"HTTP {action.status}"}}
                self._send_json(action.status, payload, action.headers)
            elif action.kind == "invalid_json":
                self._send_raw(200, b'{"id": "chatcmpl-fake", "choices": [ this is not json')
            elif action.kind == "hang":
                fake._stopping.wait(fake.hang_s)
                self.close_connection = True
            elif action.kind == "close":
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            else:  # pragma: no cover
                raise ValueError(f"unknown action {action.kind}")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            fake._done()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--max-seconds", type=float, default=120.0)
    p.add_argument("--startup-delay", type=float, default=0.0, help="sleep before listening")
    p.add_argument("--ignore-sigterm", action="store_true", help="to test the SIGKILL fallback")
    p.add_argument("--second-sigterm", action="store_true",
                   help="leave only on a second SIGTERM, as llama-server with a request in flight")
    args = p.parse_args(argv)
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.second_sigterm:
        seen = []
        signal.signal(signal.SIGTERM, lambda *_: os._exit(1) if seen else seen.append(1))
    time.sleep(args.startup_delay)
    fake = FakeOpenAIServer(port=args.port, max_seconds=args.max_seconds)
    print(f"fake OpenAI server listening on {fake.base_url}", flush=True)
    timer = threading.Timer(args.max_seconds, fake._httpd.shutdown)
    timer.daemon = True
    timer.start()
    fake.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
