"""Each question's own timings (issue #26 item 5): the generator measures every request of a batch
on its own (its own send and answer, not the batch's start), and a question's MLflow trace lays
out those timings (not the whole run's) and carries the system's name as a tag."""

from __future__ import annotations

import time

import pytest

from fake_openai_server import FakeOpenAIServer, ok  # noqa: E402
from ragsweep.rag.generator import ChatClient, ChatRequest  # noqa: E402
from ragsweep.rag.generator.transport import server_seconds  # noqa: E402


def test_each_request_of_a_batch_is_timed_on_its_own():
    """Three requests through one client slot, 0.3 s each: each is timed from its own send, so the
    last does not count the time it waited for the first two (the old timing did)."""
    with FakeOpenAIServer(default=ok(delay=0.3)) as fake:
        client = ChatClient(fake.base_url, "fake", progress=False, concurrency=1, timeout_s=10)
        t0 = time.time()
        outs = client.chat_many([ChatRequest([("user", f"question {i}")]) for i in range(3)])
    assert all(o.ok for o in outs) and all(o.request_s >= 0.29 and o.started_at >= t0 - 0.01 for o in outs)
    order = sorted(outs, key=lambda o: o.started_at)
    for a, b in zip(order, order[1:]):  # sent one after the other, each after the previous answer
        assert b.started_at >= a.started_at + a.request_s - 0.01
    last = order[-1]
    # `seconds` (the cost figures) still counts the wait for the slot; the request's own time does not
    assert last.seconds - last.request_s >= 0.55
    assert last.request_s < last.seconds - 0.5


def test_the_servers_own_time_is_read_where_reported():
    class Resp:  # llama.cpp adds `timings` beside the OpenAI fields
        model_extra = {"timings": {"prompt_ms": 120.0, "predicted_ms": 380.0}}

    assert server_seconds(Resp()) == pytest.approx(0.5)
    assert server_seconds(object()) is None


def _record(started_at: float, server_s: float, request_s: float, prompt_s: float = 0.002, cached: bool = False) -> dict:
    return {"query_id": "6401197308716204890", "query": "q?", "gt_answer": "a", "response": "a",
            "retrieved_context": [{"doc_id": "d", "text": "t"}], "metrics": {"ragchecker/overall/f1": 50.0},
            "timings": {"prompt_s": prompt_s},
            "generation": {"model": "m", "latency_s": 240.0, "started_at": started_at, "request_s": request_s,
                           "server_s": server_s, "cached": cached}}


def test_a_trace_has_the_questions_own_timings_and_its_system():
    pytest.importorskip("mlflow")
    from ragsweep.tracking.trace_build import SYSTEM_TAG, build_trace

    sent = 1_700_000_000.0
    # latency_s (240 s: the whole batch, queue included) is not the question's time
    info, spans = build_trace(_record(sent, server_s=1.5, request_s=2.0), experiment_id="1", run_id="r",
                              judge="offline", t0_ns=0, system="bm25-k3")
    by = {s["name"]: s for s in spans}
    gen = by["generate"]
    assert (gen["end_time_unix_nano"] - gen["start_time_unix_nano"]) / 1e9 == pytest.approx(1.5)
    # the server's own work ends when the answer came: sent + round trip
    assert gen["end_time_unix_nano"] / 1e9 == pytest.approx(sent + 2.0)
    assert info.execution_duration == pytest.approx(1502, abs=1)  # prompt + generation, in ms
    assert info.request_time == pytest.approx((sent + 0.5 - 0.002) * 1000, abs=1)
    assert info.tags[SYSTEM_TAG] == "bm25-k3" and info.trace_metadata["ragsweep.query_id"] == "6401197308716204890"
    root = by["ragsweep.question"]
    assert root["end_time_unix_nano"] - root["start_time_unix_nano"] == pytest.approx(1.502e9, abs=1e6)
    # retrieval and judging are batched: no time of their own, said so on the span
    assert by["retrieve"]["start_time_unix_nano"] == by["retrieve"]["end_time_unix_nano"]
    assert "batched" in by["evaluate"]["attributes"]["ragsweep.timing"]
    # two questions of the same run have different durations
    other, _ = build_trace(_record(sent + 2, server_s=0.4, request_s=0.5), experiment_id="1", run_id="r",
                           judge="offline", t0_ns=0, system="bm25-k3")
    assert other.execution_duration != info.execution_duration


def test_a_cached_generation_took_no_time_in_this_run():
    pytest.importorskip("mlflow")
    from ragsweep.tracking.trace_build import build_trace

    info, spans = build_trace(_record(1.0, server_s=3.0, request_s=3.0, cached=True), experiment_id="1", run_id="r",
                              judge="offline", t0_ns=5_000_000_000)
    gen = next(s for s in spans if s["name"] == "generate")
    assert gen["end_time_unix_nano"] - gen["start_time_unix_nano"] <= 1_000
    assert '3.0' in gen["attributes"]["ragsweep.original_s"]
    assert info.execution_duration < 10
