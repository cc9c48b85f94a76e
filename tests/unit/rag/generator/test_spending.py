"""Prices, budgets and the adaptive limit of the chat client (issue 39), against the fake endpoint."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
from types import SimpleNamespace

import pytest

from fake_openai_server import FakeOpenAIServer, ok, rate_limited, status
from ragsweep.rag.generator.budget import NO, OK, WAIT, Budget, Budgets, SharedBudget, combine
from ragsweep.rag.generator.client import ChatClient, ChatRequest
from ragsweep.rag.generator.limiter import AdaptiveLimit
from ragsweep.rag.generator.price import Price, parse_price, worst_case


def usage(body: dict, text: str) -> tuple[int, int]:
    return 100, 10  # every call: 100 prompt + 10 completion tokens


# -- prices -----------------------------------------------------------------------------------------
def test_a_price_is_a_number_or_prompt_and_completion():
    assert parse_price(None, "x") is None
    assert parse_price(0.5, "x") == Price(0.5, 0.5)
    p = parse_price({"prompt": 0.15, "completion": 0.6}, "generator.price_per_1k_tokens")
    assert p.usd(1000, 500) == pytest.approx(0.15 + 0.3)


@pytest.mark.parametrize("bad, match", [
    ({"prompt": 0.1}, r"generator.price_per_1k_tokens: a mapping needs both prompt and completion"),
    ({"prompt": 0.1, "completion": 1, "cached": 0.05}, "nothing else"),
    (-1, r"generator.price_per_1k_tokens must be a number >= 0"),
    ("cheap", "must be a number"),
    ({"prompt": 0.1, "completion": True}, r"generator.price_per_1k_tokens.completion must be a number"),
])
def test_a_bad_price_names_its_field(bad, match):
    with pytest.raises(ValueError, match=match):
        parse_price(bad, "generator.price_per_1k_tokens")


def test_a_calls_worst_case_is_a_generous_prompt_and_all_of_max_tokens():
    price = Price(1.0, 2.0)
    msgs = (("user", "x" * 300),)
    # 300 characters / 3 + 5 for the message + 3 for the request; 50 completion tokens at most
    assert worst_case(price, msgs, 50) == pytest.approx((108 * 1.0 + 50 * 2.0) / 1000)


# -- budgets ----------------------------------------------------------------------------------------
def test_a_budget_holds_waits_and_then_is_reached_for_good():
    b = Budget(1.0)
    assert b.reserve(0.6) == OK
    assert b.reserve(0.6) == WAIT  # fits what was spent, not beside the call in flight
    b.settle(0.6, 0.2)  # the call cost less than its worst case
    assert b.reserve(0.6) == OK and b.spent == pytest.approx(0.2)
    b.settle(0.6, 0.6)
    assert b.reserve(0.3) == NO and b.reached  # 0.8 + 0.3 > 1
    assert b.reserve(0.01) == NO  # reached: a cheaper call is not picked either
    assert "budget_usd=1 reached ($0.8000 spent)" in b.why()


def test_a_bad_budget_names_its_field():
    with pytest.raises(ValueError, match=r"sweep.budget_usd must be a number >= 0"):
        Budget(-2, "sweep.budget_usd")


def _spend_in_another_process(path: str, n: int, out: "multiprocessing.Queue") -> None:
    b = SharedBudget(path, 1.0)
    answers = []
    for _ in range(n):
        answer = b.reserve(0.1)
        answers.append(answer)
        if answer == OK:
            b.settle(0.1, 0.1)
    out.put(answers)


def test_a_shared_budget_is_one_amount_for_several_processes(tmp_path):
    path = str(tmp_path / "budget.json")
    SharedBudget(path, 1.0)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_spend_in_another_process, args=(path, 8, out)) for _ in range(2)]
    for p in procs:
        p.start()
    answers = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert sum(a.count(OK) for a in answers) == 10  # 10 calls of $0.1 fit in $1, whoever made them
    shared = SharedBudget(path, 1.0)
    assert shared.spent == pytest.approx(1.0) and shared.reached and shared.reserve(0.0001) == NO


def test_a_reservation_of_a_dead_process_is_ignored(tmp_path):
    path = tmp_path / "budget.json"
    SharedBudget(path, 1.0)
    state = json.loads(path.read_text())
    state["held"] = {"999999999": 0.9}  # a job killed with its reservation held
    path.write_text(json.dumps(state))
    assert SharedBudget(path, 1.0).reserve(0.5) == OK


def test_a_run_and_its_sweep_both_hold_a_call():
    run, sweep = Budget(1.0), Budget(0.3, "sweep.budget_usd")
    both = combine(run, None, sweep)
    assert isinstance(both, Budgets) and combine(None) is None
    assert both.reserve(0.5) == NO and sweep.reached and not run.reached
    assert run.reserve(1.0) == OK  # the run's reservation was given back when the sweep refused


# -- the client with a price and a budget -----------------------------------------------------------
def _requests(n: int) -> list[ChatRequest]:
    return [ChatRequest.user(f"question {i}: " + "words " * 50, max_tokens=20) for i in range(n)]


def test_calls_that_could_pass_the_budget_are_not_sent_and_are_no_failures():
    price = Price(1.0, 1.0)
    limit = 0.5  # each call costs 0.11 (100 + 10 tokens), reserves ~0.14 at most
    with FakeOpenAIServer(default=ok("fine"), usage=usage) as fake:
        client = ChatClient(fake.base_url, "fake", concurrency=1, price=price, budget=Budget(limit))
        out = client.chat_many(_requests(10))
    sent = [r for r in out if not r.skipped]
    assert fake.n_requests == len(sent) < 10 and all(r.ok for r in sent)
    skipped = [r for r in out if r.skipped]
    assert skipped and all(r.error.startswith("not sent: budget_usd=0.5 reached") for r in skipped)
    assert out.index(skipped[0]) == len(sent)  # one clean stop: nothing sent after the first refusal
    assert client.stats["failures"] == 0 and client.stats["budget_skipped"] == len(skipped)
    assert client.budget.spent == pytest.approx(0.11 * len(sent)) and client.budget.spent <= limit


def test_calls_in_flight_make_the_next_wait_not_stop():
    """Worst cases of 8 calls in flight pass the budget; what they cost leaves room: all are sent."""
    with FakeOpenAIServer(default=ok("fine", delay=0.05), usage=usage) as fake:
        client = ChatClient(fake.base_url, "fake", concurrency=8, price=Price(1.0, 1.0), budget=Budget(1.0))
        out = client.chat_many(_requests(8))
    assert all(r.ok for r in out) and fake.n_requests == 8 and fake.max_in_flight < 8
    assert client.budget.spent == pytest.approx(0.88)


def test_an_unpriced_model_ignores_the_budget():
    with FakeOpenAIServer(default=ok("fine"), usage=usage) as fake:
        client = ChatClient(fake.base_url, "fake", budget=Budget(0.0))
        assert all(r.ok for r in client.chat_many(_requests(3)))


# -- adaptive concurrency ---------------------------------------------------------------------------
def test_429s_halve_the_limit_once_per_window_and_successes_bring_it_back():
    lim = AdaptiveLimit(8)
    w = lim._window
    lim.rate_limited(w, None)
    lim.rate_limited(w, None)  # sent in the same window: no second halving
    assert lim.allowed == 4 and lim.decreases == 1
    lim.rate_limited(lim._window, None)
    assert lim.allowed == 2 and lim.lowest == 2
    for _ in range(40):
        lim.succeeded()
    assert lim.allowed == 8  # additive increase, up to the ceiling
    lim.rate_limited(lim._window, 0.2)
    assert lim.pause_until > 0


def test_a_retry_after_pauses_every_new_request(monkeypatch):
    from ragsweep.rag.generator import limiter

    waits: list[float] = []

    async def sleep(seconds: float) -> None:  # the pause is asked for, not timed
        waits.append(seconds)
        lim.pause_until = 0.0

    async def go() -> None:
        st = SimpleNamespace(cond=asyncio.Condition(), in_flight=0)
        await lim.enter(st)
        await lim.leave(st)

    monkeypatch.setattr(limiter.asyncio, "sleep", sleep)
    lim = AdaptiveLimit(4)
    lim.rate_limited(lim._window, 30.0)
    asyncio.run(go())
    assert len(waits) == 1 and 29.0 < waits[0] <= 30.0


def test_a_storm_is_paced_without_failing_requests():
    with FakeOpenAIServer(default=ok("fine"), rate_limit=(2, 0.3)) as fake:
        client = ChatClient(fake.base_url, "fake", concurrency=8, max_retries=2, backoff_s=0.05, max_backoff_s=1.0)
        out = client.chat_many(_requests(12))
    assert all(r.ok for r in out) and fake.rate_limited > 0
    assert client.stats["rate_limited"] == fake.rate_limited and client.limit.lowest < 8


def test_a_429_at_one_request_in_flight_counts_against_max_retries():
    with FakeOpenAIServer(default=rate_limited(retry_after=0.01)) as fake:
        client = ChatClient(fake.base_url, "fake", concurrency=1, max_retries=2, backoff_s=0.01)
        (res,) = client.chat_many(_requests(1))
    assert not res.ok and fake.n_requests == 3 and "HTTP 429" in res.error


def test_an_account_out_of_quota_is_final():
    quota = status(429, {"error": {"message": "You exceeded your current quota", "type": "insufficient_quota",
                                   "code": "insufficient_quota"}})
    with FakeOpenAIServer(default=quota) as fake:
        client = ChatClient(fake.base_url, "fake", concurrency=1, max_retries=3, backoff_s=0.01)
        (res,) = client.chat_many(_requests(1))
    assert fake.n_requests == 1 and "out of quota" in res.error


# -- the readiness probe ----------------------------------------------------------------------------
def test_a_refused_key_names_the_server_its_url_and_the_variable_never_the_key(monkeypatch):
    from ragsweep.rag.generator.server import ExternalServer, KeyRejectedError
    from ragsweep.rag.generator.servers.probe import probe

    monkeypatch.setenv("MY_API_KEY", "sk-wrong-123456")
    with FakeOpenAIServer(api_key="sk-right") as fake:
        server = ExternalServer(fake.base_url, "fake", api_key_env="MY_API_KEY")
        with pytest.raises(KeyRejectedError) as err:
            probe(server, "generator", "generator.server")
        assert fake.n_requests == 0 and fake.rejected_keys == 1
    msg = str(err.value)
    assert msg.startswith(f"the generator server at {fake.base_url} refused its API key (HTTP 401)")
    assert "environment variable MY_API_KEY (set here)" in msg and "export MY_API_KEY=<your key>" in msg
    assert "sk-wrong" not in msg and "123456" not in msg


def test_a_good_key_passes_and_an_endpoint_without_a_model_list_gets_one_token(monkeypatch):
    from ragsweep.rag.generator.server import ExternalServer, KeyRejectedError
    from ragsweep.rag.generator.servers.probe import probe

    monkeypatch.setenv("MY_API_KEY", "sk-right")
    server = lambda fake: ExternalServer(fake.base_url, "fake", api_key_env="MY_API_KEY")  # noqa: E731
    with FakeOpenAIServer(api_key="sk-right") as fake:
        assert probe(server(fake), "judge", "evaluator.judge.server") == "ok"
        assert fake.models_requests == 1 and fake.n_requests == 0  # GET /models: free
    with FakeOpenAIServer(api_key="sk-right", models=False) as fake:
        assert probe(server(fake), "judge", "evaluator.judge.server") == "ok"
        assert fake.n_requests == 1 and fake.requests[0]["max_tokens"] == 1  # one chat request of one token
    monkeypatch.setenv("MY_API_KEY", "sk-wrong")
    with FakeOpenAIServer(api_key="sk-right", models=False) as fake:
        with pytest.raises(KeyRejectedError, match="the judge server at .* refused its API key"):
            probe(server(fake), "judge", "evaluator.judge.server")


def test_an_unreachable_endpoint_stops_before_any_question():
    import socket

    from ragsweep.rag.generator.server import ExternalServer, ServerUnreachableError
    from ragsweep.rag.generator.servers.probe import probe

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens once closed
    with pytest.raises(ServerUnreachableError, match=r"cannot reach the judge server at http://127.0.0.1:\d+/v1"):
        probe(ExternalServer(f"http://127.0.0.1:{port}/v1", "m", api_key_env=None), "judge", "evaluator.judge.server")


def test_only_external_endpoints_are_probed():
    from ragsweep.rag.generator.servers.probe import needs_probe

    assert needs_probe(SimpleNamespace(kind="external", base_url="http://x/v1"))
    assert not needs_probe(SimpleNamespace(kind="llamacpp", base_url="http://127.0.0.1:1/v1"))


def test_reservations_are_answered_in_the_order_the_requests_asked():
    """The budget answers requests in turn: while the first waits (calls in flight hold the room), no
    later one may reserve, so a refusal is never followed by a request that asked later being sent.
    (Before, every waiting request polled the budget on its own, and under load a later one could
    reserve first: the test above then failed now and again.)"""
    import asyncio

    from ragsweep.rag.generator.transport import _LoopState

    answers = iter(["WAIT", "WAIT", "OK", "NO", "NO"])
    order = []

    def reserve(i):
        def ask():
            order.append((i, next(answers)))
            return order[-1][1]
        return ask

    async def main():
        st = _LoopState(clients=[], slots=asyncio.Queue())
        got = await asyncio.gather(*(st.in_turn(reserve(i), "WAIT") for i in range(3)))
        return got, st.reserving

    got, left = asyncio.run(main())
    assert order == [(0, "WAIT"), (0, "WAIT"), (0, "OK"), (1, "NO"), (2, "NO")]
    assert got == ["OK", "NO", "NO"] and left == []
