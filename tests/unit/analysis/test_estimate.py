"""The estimate before the work (issue 39): generation calls from the cache and the sweep's own
sharing, the judge's calls from its own pipeline run with a counting judge, and a range that holds."""

from __future__ import annotations

import pytest

from fake_openai_server import FakeOpenAIServer, ok
from ragsweep.analysis.estimate import Work, estimate
from ragsweep.analysis.estimate_judge import CountingJudge, Overlay, Scenario, Tally, how_many
from ragsweep.judge.core import Evaluator
from ragsweep.rag.generator.client import ChatRequest
from ragsweep.rag.generator.price import Price
from ragsweep.store.cache import Cache

STATED = {"answer_tokens": None, "claims_per_answer": 1, "claims_range": [1, 10]}
QUESTIONS = [
    ("q1", "When was the Eiffel Tower completed?", "It was completed in 1889.",
     ["The Eiffel Tower is in Paris. It was completed in 1889 for the World's Fair."]),
    ("q2", "What is the highest mountain?", "Mount Everest.",
     ["Mount Everest is the highest mountain above sea level.", "The Nile is a river in Africa."]),
    ("q3", "Which river flows north through Africa?", "The Nile.", ["The Nile is a major north-flowing river."]),
]
ANSWERS = {"q1": "The tower was completed in 1889.", "q2": "Everest is the highest.", "q3": "The Nile flows north."}


def chars4(text: str) -> int:
    return len(text) // 4


def _work(name: str, evaluator=None, judge_price=None, gen_price=Price(1.0, 2.0), tag: str = "") -> Work:
    reqs = [ChatRequest.user(f"{tag}Context: {' '.join(ctx)}\nQuestion: {q}", max_tokens=64) for _, q, _, ctx in QUESTIONS]
    records = [{"query_id": qid, "query": q, "gt_answer": gt,
                "retrieved_context": [{"doc_id": f"{qid}-{i}", "text": t} for i, t in enumerate(ctx)]}
               for qid, q, gt, ctx in QUESTIONS]
    return Work(name=name, model="m", requests=reqs, keys=[Cache.key("generation", "m", r.key_fields()) for r in reqs],
                records=records, answer_of=str.strip, count=chars4, exact=False, max_tokens=64,
                generator_price=gen_price, evaluator=evaluator, judge_price=judge_price)


def test_generation_calls_are_the_requests_neither_cached_nor_asked_by_an_earlier_system(tmp_path):
    cache = Cache(tmp_path)
    a, b, c = _work("a"), _work("b"), _work("c", tag="another prompt: ")
    cache.put("generation", a.keys[0], {"text": "cached", "completion_tokens": 7})
    est = estimate([a, b, c], cache, STATED)
    exp = est.tallies["expected"]["generation"]
    # a: 2 calls (q1 cached); b asks exactly a's requests: nothing new; c: 3 new prompts
    assert exp.calls == 2 + 0 + 3 and exp.cached == 2  # q1 is cached for a and for b
    assert est.metrics()["estimate/generation_calls"] == 5
    low, high = est.tallies["low"]["generation"], est.tallies["high"]["generation"]
    assert low.calls == exp.calls == high.calls and low.usd < exp.usd < high.usd
    # the expected answer: a quarter of max_tokens (none measured), the high one: all of max_tokens
    assert exp.completion_tokens == 5 * 16 and high.completion_tokens == 5 * 64
    assert "an answer: 16 tokens (a quarter of generator.max_tokens" in est.notes[0]


def test_an_answer_is_measured_on_three_cached_answers(tmp_path):
    cache = Cache(tmp_path)
    w = _work("a")
    for k, n in zip(w.keys, (10, 20, 30)):
        cache.put("generation", k, {"text": "x", "completion_tokens": n})
    est = estimate([w, _work("b", tag="new: ")], cache, STATED)
    assert est.tallies["expected"]["generation"].completion_tokens == 3 * 20
    assert "measured on 3 cached answers" in est.notes[0]


def test_per_question_costs_sum_to_the_expected_total(tmp_path):
    est = estimate([_work("a")], Cache(tmp_path), STATED)
    per_q = est.per_question()
    assert set(per_q) == {q for _, q, _, _ in QUESTIONS}
    assert sum(per_q.values()) == pytest.approx(est.usd())
    assert est.largest_call() > max(per_q.values()) / 2  # a worst case is above what a call costs


class Judge:
    """A judge endpoint: one triplet per text to extract, one label per claim."""

    def __init__(self) -> None:
        self.kinds: list[str] = []

    def __call__(self, body: dict, index: int):
        p = body["messages"][-1]["content"]
        if "generate the KG for the following candidate answer" in p:
            self.kinds.append("extract")
            w = p.rsplit("### Candidate Answer:\n", 1)[1].split("\n\n### KG:", 1)[0].rstrip(".").split()
            return ok(f'("{w[0]}", "is", "{" ".join(w[1:]) or "stated"}")')
        self.kinds.append("check")
        claims = [c for c in p.split("### Claims:\n", 1)[1].split("\n\n\nYour answer", 1)[0].split("\n") if c.strip()]
        return ok("\n".join(["Entailment"] * len(claims)))


def _evaluator(url: str) -> Evaluator:
    return Evaluator(name="llm", extractor="llm", checker="llm", trace_mode="none", ragas=False,
                     judge={"base_url": url, "model": "fake", "api_key_env": None, "max_retries": 0})


def test_the_judge_calls_are_what_its_pipeline_then_asks(tmp_path):
    """Answers cached, claims per answer stated as the judge's: the estimated calls are exact."""
    with FakeOpenAIServer(responder=(judge := Judge())) as fake:
        cache = Cache(tmp_path)
        works = [_work("a", _evaluator(fake.base_url), Price(0.5, 1.0)),
                 _work("b", _evaluator(fake.base_url), Price(0.5, 1.0), tag="more context: ")]
        for w in works:
            for key, (qid, *_rest) in zip(w.keys, QUESTIONS):
                cache.put("generation", key, {"text": f"{ANSWERS[qid]} ({w.name})", "completion_tokens": 9})
        est = estimate(works, cache, STATED)
        assert fake.n_requests == 0  # the estimate asked nothing
        for w in works:  # then the real judging, system by system, through the same cache
            records = [{**r, "response": f"{ANSWERS[r['query_id']]} ({w.name})"} for r in w.records]
            w.evaluator.evaluate(records, cache=cache)
    assert est.tallies["expected"]["judge"].calls == len(judge.kinds)
    # extraction: 6 answers + 3 ground truths (shared); checks: one per claim set and reference
    assert judge.kinds.count("extract") == 9
    low, high = est.tallies["low"]["judge"], est.tallies["high"]["judge"]
    assert low.calls <= len(judge.kinds) < high.calls  # 10 claims per answer need 2 checks per reference
    assert low.usd <= est.tallies["expected"]["judge"].usd <= high.usd
    assert est.models == {"generation": "m", "judge": "fake"}


def test_cached_claims_are_measured_and_priced_at_nothing(tmp_path):
    with FakeOpenAIServer(responder=Judge()) as fake:
        cache = Cache(tmp_path)
        w = _work("a", _evaluator(fake.base_url), Price(0.5, 1.0))
        for key, (qid, *_rest) in zip(w.keys, QUESTIONS):
            cache.put("generation", key, {"text": ANSWERS[qid], "completion_tokens": 9})
        w.evaluator.evaluate([{**r, "response": ANSWERS[r["query_id"]]} for r in w.records], cache=cache)
        est = estimate([w], cache, {**STATED, "claims_per_answer": 4})
    assert est.tallies["expected"]["judge"].calls == 0 and est.usd() == 0.0  # everything is cached
    assert any("claims per answer: 1.0, measured on 6 cached extractions" in n for n in est.notes)


def test_the_counting_judge_answers_parse_and_cost_what_is_counted():
    from ragsweep.judge.llm_checker import LLMChecker
    from ragsweep.judge.llm_extractor import LLMExtractor

    class Real:
        config = None
        identity = {"model": "x"}
        model_name = "x"

    tally = Tally()
    scen = Scenario("expected", claims=2.5, answer_tokens=10, label="Entailment", other_share=0.25)
    judge = CountingJudge(Real(), scen, lambda t: len(t) / 4, Price(1.0, 1.0), tally)
    claims = LLMExtractor(judge=judge).extract_many(["An answer.", "Another one."], ["Q?", "Q?"])
    assert all(c is not None and len(c) in (2, 3) for c in claims)
    labels = LLMChecker(judge=judge).check_pairs([(c, "ref", "Q?") for c in claims[0]])
    assert labels == ["Entailment"] * len(claims[0])
    assert tally.calls == 3 and tally.usd == pytest.approx((tally.prompt_tokens + tally.completion_tokens) / 1000)
    assert tally.per_question["Q?"] == pytest.approx(tally.usd)


def test_how_many_spreads_a_fractional_mean_and_the_overlay_writes_nothing(tmp_path):
    counts = [how_many(2.5, f"text {i}") for i in range(400)]
    assert set(counts) == {2, 3} and abs(sum(counts) / len(counts) - 2.5) < 0.1
    cache = Cache(tmp_path)
    cache.put("claims", "k1", ["real"])
    view = Overlay(cache)
    view.put("claims", "k2", ["made up"])
    assert view.get_many("claims", ["k1", "k2", "k3"]) == {"k1": ["real"], "k2": ["made up"]}
    assert cache.count() == 1
