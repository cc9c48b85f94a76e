"""ChatClient against a scripted fake OpenAI server: retries, timeouts, cache, concurrency."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest
from omegaconf import OmegaConf

from fake_openai_server import (  # noqa: E402
    FakeOpenAIServer,
    close,
    hang,
    invalid_json,
    ok,
    rate_limited,
    status,
)
from ragsweep.store.cache import Cache  # noqa: E402
from ragsweep.rag.generator import (  # noqa: E402
    ChatClient,
    ChatRequest,
    ExternalServer,
    GeneratorConfig,
    LlamaCppServer,
    MissingAPIKeyError,
    VLLMServer,
    build_client,
    build_server,
    extract_answer,
    parse_retry_after,
)


def client_for(fake: FakeOpenAIServer, **kw) -> ChatClient:
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("max_backoff_s", 0.05)
    kw.setdefault("timeout_s", 5)
    return ChatClient(fake.base_url, "fake", progress=False, **kw)


def q(text: str, **kw) -> ChatRequest:
    return ChatRequest.user(text, **kw)


# -- extract_answer ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, expected",
    [
        ("<answer>Paris</answer>", "Paris"),
        ("Reasoning... <answer> Paris </answer>", "Paris"),
        ("<answer>first</answer> then <answer>second</answer>", "second"),
        ("<ANSWER>\nmulti\nline\n</Answer>", "multi\nline"),
        ("thinking <answer>Paris, France", "Paris, France"),
        ("Paris</answer> trailing", "Paris"),
        ("  just text  ", "just text"),
        ("", ""),
        (None, ""),
    ],
)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


def test_extract_answer_other_tag():
    assert extract_answer("<final>42</final><answer>no</answer>", tag="final") == "42"


# -- requests ----------------------------------------------------------------------------------
def test_chat_request_normalised_hashable_and_keyed():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    a = ChatRequest([{"role": "user", "content": "hi"}], stop=["x"], response_format=schema)
    b = ChatRequest((("user", "hi"),), stop=("x",), response_format=dict(schema))
    assert a.messages == (("user", "hi"),) and a.stop == ("x",)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    c = ChatClient("http://127.0.0.1:9/v1", "m")
    assert c.cache_key(a) == c.cache_key(b)
    assert c.cache_key(a) != c.cache_key(ChatRequest("hi", stop=["x"], response_format=schema, seed=1))
    assert ChatRequest("hi").messages == (("user", "hi"),)
    with pytest.raises(ValueError):
        ChatRequest("hi", temperature=-1)
    with pytest.raises(ValueError):
        ChatRequest([])


@pytest.mark.parametrize(
    "headers, expected",
    [
        ({}, None),
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-3"}, None),
    ],
)
def test_parse_retry_after(headers, expected):
    assert parse_retry_after(headers) == expected


def test_parse_retry_after_http_date():
    from email.utils import formatdate

    v = parse_retry_after({"retry-after": formatdate(time.time() + 5, usegmt=True)})
    assert 3 <= v <= 6


def test_backoff_deterministic_exponential_and_capped():
    c = ChatClient("http://127.0.0.1:9/v1", "m", backoff_s=1.0, max_backoff_s=5)
    d = [c._backoff("k", r, None) for r in (1, 2, 3, 4, 5)]
    assert d == [c._backoff("k", r, None) for r in (1, 2, 3, 4, 5)]
    assert 0.5 <= d[0] <= 1 and 1 <= d[1] <= 2 and 2 <= d[2] <= 4 and all(x <= 5 for x in d)
    assert c._backoff("k", 1, 100.0) == 5  # Retry-After capped at max_backoff_s
    assert c._backoff("k", 1, 0.3) == 0.3


# -- retries -----------------------------------------------------------------------------------
def test_retries_5xx_then_succeeds():
    with FakeOpenAIServer(script=[status(500), status(502), ok("fine")]) as fake:
        c = client_for(fake, max_retries=3)
        r = c.chat(q("hi"))
    assert r.ok and r.text == "fine" and not r.cached
    assert fake.n_requests == 3
    assert c.stats["calls"] == 3 and c.stats["retries"] == 2 and c.stats["failures"] == 0
    assert r.prompt_tokens > 0 and r.completion_tokens == 1


def test_429_retry_after_honoured():
    with FakeOpenAIServer(script=[rate_limited(retry_after=1), ok()]) as fake:
        c = client_for(fake, max_backoff_s=10)
        t0 = time.monotonic()
        r = c.chat(q("hi"))
        elapsed = time.monotonic() - t0
    assert r.ok and fake.n_requests == 2 and c.stats["retries"] == 1
    assert 0.95 <= elapsed < 3


def test_429_retry_after_ms_and_cap():
    with FakeOpenAIServer(script=[rate_limited(retry_after_ms=300), rate_limited(retry_after=60), ok()]) as fake:
        c = client_for(fake, max_backoff_s=0.4)
        t0 = time.monotonic()
        r = c.chat(q("hi"))
        elapsed = time.monotonic() - t0
    assert r.ok and fake.n_requests == 3
    assert 0.65 <= elapsed < 2.5  # 0.3 s, then 60 s capped to 0.4 s


def test_retries_are_bounded_then_counted_failure():
    with FakeOpenAIServer(default=status(503)) as fake:
        c = client_for(fake, max_retries=2)
        r = c.chat(q("hi"))
    assert not r.ok and r.text is None and "503" in r.error and "3 attempts" in r.error
    assert fake.n_requests == 3
    assert c.stats["calls"] == 3 and c.stats["retries"] == 2 and c.stats["failures"] == 1


def test_no_retry_on_other_4xx():
    with FakeOpenAIServer(default=status(401, {"error": {"message": "bad key"}})) as fake:
        c = client_for(fake, max_retries=3)
        r = c.chat(q("hi"))
    assert not r.ok and "401" in r.error and fake.n_requests == 1 and c.stats["failures"] == 1


def test_hang_times_out_and_counts_failure():
    with FakeOpenAIServer(default=hang(), hang_s=10) as fake:
        c = client_for(fake, timeout_s=0.3, max_retries=1)
        t0 = time.monotonic()
        r = c.chat(q("hi"))
        elapsed = time.monotonic() - t0
    assert not r.ok and "timed out" in r.error
    assert fake.n_requests == 2 and c.stats["failures"] == 1
    assert elapsed < 2


def test_invalid_json_is_a_failure_after_retries():
    with FakeOpenAIServer(default=invalid_json()) as fake:
        c = client_for(fake, max_retries=1)
        r = c.chat(q("hi"))
    assert not r.ok and "malformed" in r.error and fake.n_requests == 2 and c.stats["failures"] == 1


def test_closed_connection_is_retried():
    with FakeOpenAIServer(script=[close(), ok("after close")]) as fake:
        c = client_for(fake)
        r = c.chat(q("hi"))
    assert r.text == "after close" and fake.n_requests == 2 and c.stats["retries"] == 1


def test_unreachable_server_fails_fast():
    from ragsweep.rag.generator.server import free_port

    c = ChatClient(f"http://127.0.0.1:{free_port()}/v1", "m", backoff_s=0.01, max_retries=1, progress=False)
    r = c.chat(q("hi"))
    assert not r.ok and "connection error" in r.error and c.stats["failures"] == 1


# -- cache ---------------------------------------------------------------------------------------
def test_failure_not_cached_success_cached(tmp_path):
    cache = Cache(tmp_path / "cache")
    req = q("what is cached?")
    with FakeOpenAIServer(default=status(500)) as fake:
        c = client_for(fake, cache=cache, max_retries=0)
        assert not c.chat(req).ok
    assert cache.count() == 0
    with FakeOpenAIServer() as fake:
        c = client_for(fake, cache=cache)
        r1 = c.chat(req)
        assert r1.ok and not r1.cached and fake.n_requests == 1
        assert cache.count("generation") == 1
    with FakeOpenAIServer() as fake:  # a new client, a new server: answered from the cache
        c = client_for(fake, cache=cache)
        r2 = c.chat(req)
        r3 = asyncio.run(c.achat(req))
        assert fake.n_requests == 0
    assert r2.cached and r3.cached and r2.text == r1.text == r3.text
    assert c.stats["cache_hits"] == 2 and c.stats["calls"] == 0


class Killed(Exception):
    """Stands for the signal that ends a run mid-batch."""


def test_each_answer_is_cached_as_it_arrives_so_an_interrupted_batch_keeps_it(tmp_path):
    cache = Cache(tmp_path / "cache")
    reqs = [q(f"question {i}") for i in range(4)]
    with FakeOpenAIServer() as fake:
        c = client_for(fake, cache=cache, concurrency=1)
        real_call, calls = c._call, []

        async def interrupted(req, key):
            calls.append(req)
            if len(calls) == 3:  # the run is killed while the third request is in flight,
                await asyncio.sleep(0.5)  # after the first two have been answered
                raise Killed
            if len(calls) == 4:
                await asyncio.sleep(5)
            return await real_call(req, key)

        c._call = interrupted
        with pytest.raises(Killed):
            c.chat_many(reqs)
        assert cache.count("generation") == 2
        c2 = client_for(fake, cache=cache, concurrency=1)  # the resumed run sends only the other two
        before = fake.n_requests
        res = c2.chat_many(reqs)
        assert [r.text for r in res] == [f"echo: question {i}" for i in range(4)]
        assert [r.cached for r in res] == [True, True, False, False]
        assert fake.n_requests - before == 2 and cache.count("generation") == 4


def test_cache_key_depends_on_model_id_and_namespace(tmp_path):
    cache = Cache(tmp_path / "cache")
    with FakeOpenAIServer() as fake:
        client_for(fake, cache=cache).chat(q("x"))
        client_for(fake, cache=cache, model_id="other-model").chat(q("x"))
        client_for(fake, cache=cache, cache_namespace="judging").chat(q("x"))
        assert fake.n_requests == 3


# -- concurrency and order -----------------------------------------------------------------------
def test_concurrency_bound_and_order_preserved():
    # early requests answer slowly, so completion order differs from input order
    def responder(body, index):
        n = int(body["messages"][-1]["content"][1:])
        return ok(delay=0.25 if n < 3 else 0.05)

    with FakeOpenAIServer(responder=responder) as fake:
        c = client_for(fake, concurrency=3)
        reqs = [q(f"q{i}") for i in range(12)]
        results = c.chat_many(reqs)
    assert [r.text for r in results] == [f"echo: q{i}" for i in range(12)]
    assert fake.max_in_flight == 3
    assert c.stats["requests"] == 12 and c.stats["calls"] == 12


def test_requests_spread_over_several_endpoints_one_at_a_time_each():
    # llama.cpp replicas: two server processes of one model, one request in flight on each. Side by
    # side, proven without a clock: each request waits at a barrier that only a request on the
    # other server can open (a client sending one request at a time would break it)
    meet = threading.Barrier(2, timeout=10)

    def together(body, index):  # noqa: ANN001
        try:
            meet.wait()
        except threading.BrokenBarrierError:
            return status(500, {"error": {"message": "no request in flight on the other server"}})
        return None

    with FakeOpenAIServer(default=ok(), responder=together) as a, FakeOpenAIServer(default=ok(), responder=together) as b:
        c = ChatClient([a.base_url, b.base_url], "fake", concurrency=2, timeout_s=30, max_retries=0, progress=False)
        results = c.chat_many([q(f"q{i}") for i in range(8)])
    assert [r.text for r in results] == [f"echo: q{i}" for i in range(8)]
    assert a.n_requests == 4 and b.n_requests == 4  # each endpoint took its share
    assert a.max_in_flight == 1 and b.max_in_flight == 1  # never two at once on one process
    assert c.base_url == a.base_url and c.base_urls == [a.base_url, b.base_url]
    with pytest.raises(ValueError, match="base_url"):
        ChatClient([], "fake")


def test_llamacpp_client_gets_one_request_in_flight_per_server_process():
    from ragsweep.rag.generator.servers.defaults import client_setting

    class Started(LlamaCppServer):  # as if started: the replicas' endpoints known
        base_urls = ["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1", "http://127.0.0.1:3/v1"]

    # llama-cpp-python's server answers one request at a time (llama-server's slots:
    # tests/unit/rag/generator/servers/test_llama_server.py)
    srv = Started(replicas=3, engine="llama-cpp-python")
    assert client_setting("concurrency", None, srv) == 3
    assert client_setting("concurrency", 1, srv) == 1  # a configured number wins
    assert client_setting("concurrency", None, LlamaCppServer(replicas=1, engine="llama-cpp-python")) == 1


def test_identical_requests_in_a_batch_call_once():
    with FakeOpenAIServer() as fake:
        c = client_for(fake)
        res = c.chat_many([q("same"), q("other"), q("same")])
    assert [r.text for r in res] == ["echo: same", "echo: other", "echo: same"]
    assert fake.n_requests == 2 and c.stats["deduplicated"] == 1


def test_chat_many_inside_a_running_event_loop():
    with FakeOpenAIServer() as fake:
        c = client_for(fake)

        async def caller():
            return c.chat_many([q("a"), q("b")])

        assert [r.text for r in asyncio.run(caller())] == ["echo: a", "echo: b"]
        # and twice more from fresh loops (HTTP clients are per event loop)
        assert c.chat(q("c")).text == "echo: c"
        assert asyncio.run(c.achat(q("d"))).text == "echo: d"


def test_mixed_batch_failures_do_not_block_others():
    def responder(body, index):
        return status(400) if body["messages"][-1]["content"] == "bad" else ok()

    with FakeOpenAIServer(responder=responder) as fake:
        c = client_for(fake)
        res = c.chat_many([q("good"), q("bad"), q("good2")])
    assert [r.ok for r in res] == [True, False, True] and c.stats["failures"] == 1


# -- structured output -------------------------------------------------------------------------
SCHEMA = {"title": "Verdict", "type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}


def test_structured_output_sent_as_json_schema():
    with FakeOpenAIServer(default=ok('{"label": "Entailment"}')) as fake:
        c = client_for(fake)
        r = c.chat(q("judge", response_format=SCHEMA))
        assert r.ok and c.structured_mode == "json_schema"
        rf = fake.requests[0]["response_format"]
    assert rf == {"type": "json_schema", "json_schema": {"name": "Verdict", "schema": SCHEMA}}


def test_structured_output_falls_back_and_remembers():
    def responder(body, index):  # like a server that knows neither json_schema nor json_object
        rf = body.get("response_format")
        if rf and rf["type"] == "json_schema":
            return status(400, {"error": {"message": "response_format json_schema unsupported"}})
        if rf:  # llama-cpp-python says 500 for a response_format it does not know
            return status(500, {"error": {"message": "validation error: body.response_format.type"}})
        return ok("plain")

    with FakeOpenAIServer(responder=responder) as fake:
        c = client_for(fake, max_retries=3)
        r1 = c.chat(q("judge 1", response_format=SCHEMA))
        assert r1.text == "plain" and fake.n_requests == 3
        assert c.structured_mode == "text" and c.stats["structured_fallbacks"] == 2
        r2 = c.chat(q("judge 2", response_format=SCHEMA))
        assert r2.ok and fake.n_requests == 4 and "response_format" not in fake.requests[-1]
        assert c.stats["retries"] == 0


def test_structured_output_json_object_mode_for_llamacpp_style_servers():
    with FakeOpenAIServer() as fake:
        c = client_for(fake, structured_mode="json_object")
        c.chat(q("judge", response_format=SCHEMA))
        assert fake.requests[0]["response_format"] == {"type": "json_object", "schema": SCHEMA}
        c2 = client_for(fake, structured_output=False)
        c2.chat(q("judge 2", response_format=SCHEMA))
        assert "response_format" not in fake.requests[1]


def test_genuine_400_does_not_lower_structured_mode():
    with FakeOpenAIServer(default=status(400)) as fake:
        c = client_for(fake)
        r = c.chat(q("too long", response_format=SCHEMA))
    assert not r.ok and c.structured_mode == "json_schema" and fake.n_requests == 3


# -- configs -------------------------------------------------------------------------------------
def generator_cfg(compose_cfg, name: str = "llamacpp"):
    """conf/generator/NAME.yaml as the app composes it (its server block comes from
    conf/server/ through Hydra defaults), detached and writable like OmegaConf.load's."""
    return OmegaConf.create(OmegaConf.to_container(compose_cfg(f"generator={name}").generator, resolve=True))


@pytest.mark.parametrize(
    "field, value",
    [("temperature", -0.1), ("max_tokens", 0), ("concurrency", 0), ("max_retries", -1), ("timeout_s", 0), ("seed", 1.5)],
)
def test_generator_config_validation_names_the_field(compose_cfg, field, value):
    cfg = OmegaConf.to_container(generator_cfg(compose_cfg))
    cfg[field] = value
    with pytest.raises(ValueError, match=f"generator.{field}"):
        GeneratorConfig.from_config(cfg)


def test_generator_config_unknown_key(compose_cfg):
    cfg = generator_cfg(compose_cfg)
    cfg.temprature = 0.5
    with pytest.raises(ValueError, match="generator.temprature"):
        GeneratorConfig.from_config(cfg)


@pytest.mark.parametrize("name, cls", [("llamacpp", LlamaCppServer), ("vllm", VLLMServer), ("external", ExternalServer)])
def test_yaml_configs_validate_and_instantiate(compose_cfg, name, cls, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    cfg = generator_cfg(compose_cfg, name)
    gen = GeneratorConfig.from_config(cfg)
    server = build_server(cfg)
    assert type(server) is cls
    d = server.describe()
    assert d["backend"] == server.kind and "sk-test-secret" not in repr(d) + repr(server)
    if name == "llamacpp":
        from ragsweep.rag.generator.servers import format_choice

        monkeypatch.setattr(format_choice, "choose", lambda source, cache_dir=None: "source")  # no measuring here
        assert gen.max_tokens == 128 and server.model_name == "smollm2" and server.n_ctx == 8192
        argv = server.command(1234)
        if server.engine == "llama-server":  # llama.cpp's own server, built beside llama-cpp-python
            assert argv[0].endswith("/llama-server") and argv[argv.index("--parallel") + 1] == str(server.parallel)
        else:
            assert argv[1:4] == ["-m", "ragsweep.rag.generator.servers.cpu_backend", "llama_cpp.server"]
    if name == "vllm":
        assert server.model_name == "Qwen/Qwen2.5-7B-Instruct"


def test_external_server_key_only_from_env(monkeypatch, caplog):
    monkeypatch.delenv("MY_TEST_KEY", raising=False)
    srv = ExternalServer("https://user:pw@example.invalid/v1", model="m", api_key_env="MY_TEST_KEY")
    with pytest.raises(MissingAPIKeyError, match="MY_TEST_KEY"):
        srv.start()
    assert "pw" not in srv.describe()["base_url"]
    assert ExternalServer("http://127.0.0.1:1/v1", model="m", api_key_env=None).api_key is None


def test_build_client_uses_config_and_sends_key_from_env(compose_cfg, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("RAGSWEEP_TEST_KEY", "sk-very-secret")
    cfg = generator_cfg(compose_cfg)
    with FakeOpenAIServer(script=[status(500)]) as fake:
        server = ExternalServer(fake.base_url, model="fake-model", api_key_env="RAGSWEEP_TEST_KEY").start()
        client = build_client(cfg, server, Cache(tmp_path / "c"))
        client.backoff_s = 0.01
        with caplog.at_level(logging.DEBUG):
            r = client.chat(client.request("hello"))
        assert r.ok
        body = fake.requests[-1]
        assert body["model"] == "fake-model" and body["max_tokens"] == 128 and body["temperature"] == 0.0
        assert body["seed"] == 0
        assert fake.headers[-1]["authorization"] == "Bearer sk-very-secret"
    assert "sk-very-secret" not in caplog.text and "sk-very-secret" not in repr(client)
    # the llamacpp generator config leaves concurrency to the server's kind: this one is external (8)
    assert client.concurrency == 8 and client.max_retries == 3


# -- an endpoint that dies under a run (a llama.cpp process killed) ----------------------------------
def test_requests_to_an_endpoint_that_died_go_to_the_live_one():
    # two processes of one model; one dies after both answered: with no retry allowed, every
    # request is still answered, by the live one (before: those sent to the dead one failed)
    with FakeOpenAIServer(default=ok()) as a, FakeOpenAIServer(default=ok()) as b:
        c = ChatClient([a.base_url, b.base_url], "fake", concurrency=2, timeout_s=10, max_retries=0, progress=False)
        assert all(r.ok for r in c.chat_many([q("w0"), q("w1")]))
        a.stop()  # nothing listens on its port now: connections are refused
        results = c.chat_many([q(f"q{i}") for i in range(8)])
        assert [r.text for r in results] == [f"echo: q{i}" for i in range(8)]
        assert c.stats["failures"] == 0 and c.stats["endpoint_outages"] == 1
        assert b.n_requests == 1 + 8


def test_a_single_endpoint_that_comes_back_is_waited_for():
    with FakeOpenAIServer(default=ok()) as a:
        c = ChatClient(a.base_url, "fake", concurrency=2, timeout_s=10, max_retries=0, progress=False)
        assert c.chat(q("warm")).ok
        port = a.port
    back: list[FakeOpenAIServer] = []
    timer = threading.Timer(0.6, lambda: back.append(FakeOpenAIServer(default=ok(), port=port).__enter__()))
    timer.start()  # the server restarted on its port (as ManagedServer's watcher does)
    try:
        t0 = time.monotonic()
        results = c.chat_many([q(f"q{i}") for i in range(3)])
        took = time.monotonic() - t0
    finally:
        timer.join()
        for srv in back:
            srv.stop()
    assert [r.text for r in results] == [f"echo: q{i}" for i in range(3)], [r.error for r in results]
    assert c.stats["failures"] == 0 and c.stats["endpoint_outages"] == 1 and 0.5 < took < 10


def test_an_endpoint_given_up_by_its_server_fails_its_requests_without_waiting():
    with FakeOpenAIServer(default=ok()) as a:
        c = ChatClient(a.base_url, "fake", timeout_s=10, max_retries=1, backoff_s=0.01, progress=False,
                       recover_s=300, endpoint_gone=lambda i: True)
        assert c.chat(q("warm")).ok
    t0 = time.monotonic()
    results = c.chat_many([q("a"), q("b")])
    assert not any(r.ok for r in results) and all("connection error" in r.error for r in results)
    assert c.stats["failures"] == 2 and time.monotonic() - t0 < 5
