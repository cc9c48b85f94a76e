"""The LLM judge end to end: extraction, checking, TRACe annotator and RAGAS prompts against the
fake OpenAI server (fast), and against the real managed llama.cpp SmolLM2 server (slow)."""

from __future__ import annotations

import json
import math
import re
import sys

import numpy as np
import pytest

from support import FAKE_OPENAI_SERVER
from fake_openai_server import FakeOpenAIServer, ok, status  # noqa: E402
from ragsweep.store.cache import Cache  # noqa: E402
from ragsweep.judge.core import Evaluator
from ragsweep.judge.llm_judge import (
    ANNOTATOR_PROMPT,
    Judge,
    JudgeItem,
    LLMChecker,
    annotator_prompt,
    parse_annotation,
    parse_labels,
)
from ragsweep.judge.pipeline import evaluate_records
from ragsweep.rag.generator.server import ExternalServer
from ragsweep.corpus.text import split_sentences

_W = re.compile(r"\w+")


def _words(text):
    return {w.lower() for w in _W.findall(text)}


def _between(prompt, start, end):
    return prompt.split(start, 1)[1].split(end, 1)[0]


class Scripted:
    """A judge that answers each prompt kind deterministically; ``MALFORMED`` in a checking
    reference gets a non-JSON answer every time."""

    def __init__(self):
        self.kinds: list[str] = []
        self.questions: list[str] = []

    def __call__(self, body, index):
        prompt = body["messages"][-1]["content"]
        if "please extract a KG from the candidate answer" in prompt:  # RefChecker's prompt
            self.kinds.append("extract")
            text = prompt.rsplit("### Candidate Answer:\n", 1)[1].split("\n\n### KG:", 1)[0]  # after the examples
            lines = []
            for s in split_sentences(text):
                w = s.rstrip(".").split()
                t = [w[0], w[1], " ".join(w[2:])] if len(w) > 2 else [s, "is", "stated"]
                lines.append("(" + ", ".join(f'"{p}"' for p in t) + ")")
            return ok("\n".join(lines))  # RefChecker's answer format, one triplet a line
        if prompt.startswith("I have a list of claims that made by a language model"):
            self.kinds.append("check")
            ref = _between(prompt, "### Reference:\n", "\n\n### Claims:")
            claims = _between(prompt, "### Claims:\n", "\n\n\nYour answer").split("\n")
            self.questions.append(_between(prompt, "### Question:\n", "\n\n### Reference:"))
            if "MALFORMED" in ref:
                return ok("Sure! Here is what I think.")
            rw = _words(ref)
            return ok("\n".join("Entailment" if _words(c) <= rw else "Neutral" for c in claims))
        if prompt.startswith("I asked someone to answer a question"):
            self.kinds.append("annotate")
            docs = _between(prompt, "use to refer to it:\n\n'''\n", "\n'''")
            resp = _between(prompt, "not related to the keys in the documents:\n\n'''\n", "\n'''")
            doc_keys = [line.split(". ", 1)[0] for line in docs.splitlines() if line.strip()]
            resp_keys = [line.split(". ", 1)[0] for line in resp.splitlines() if line.strip()]
            return ok(json.dumps({
                "relevance_explanation": "...",
                "all_relevant_sentence_keys": doc_keys[:1],
                "overall_supported_explanation": "...",
                "overall_supported": True,
                "sentence_support_information": [
                    {"response_sentence_key": k, "explanation": "", "supporting_sentence_keys": doc_keys[:1],
                     "fully_supported": True} for k in resp_keys
                ],
                "all_utilized_sentence_keys": doc_keys[:1],
            }))
        if prompt.startswith("Generate a question for the given answer."):
            self.kinds.append("questions")
            n = int(re.search(r"Write (\d+) different questions", prompt).group(1))
            return ok(json.dumps({"questions": [f"Where is Paris {i}?" for i in range(n)]}))
        if prompt.startswith("Please extract relevant sentences"):
            self.kinds.append("context")
            return ok(json.dumps({"sentence_keys": ["0a", "zz"]}))
        raise AssertionError(f"unexpected prompt: {prompt[:80]!r}")


class HashEmbedder:
    cache = None

    def encode(self, texts):
        rows = []
        for t in texts:
            v = np.zeros(32)
            for w in _words(t):
                v[sum(map(ord, w)) % 31] += 1.0
            v[31] = 0.01
            rows.append(v / np.linalg.norm(v))
        return np.array(rows)


RECORDS = [
    {
        "query_id": "q1",
        "query": "Where is Paris?",
        "gt_answer": "Paris is in France.",
        "response": "Paris is in France. Paris has museums.",
        "retrieved_context": [
            {"doc_id": "a", "text": "Paris is in France. Paris is large."},
            {"doc_id": "b", "text": "Rome is in Italy."},
        ],
    },
    {
        "query_id": "q2",
        "query": "Where is Rome?",
        "gt_answer": "Rome is in Italy.",
        "response": "Rome is in Italy.",
        "retrieved_context": [{"doc_id": "c", "text": "MALFORMED chunk about Rome."}],
    },
]


def _judge(fake, **kw):
    return Judge(server=ExternalServer(base_url=fake.base_url, model="fake", api_key_env=None),
                 max_retries=0, timeout_s=10, **kw)


def _run_llm(records, judge, cache, trace_mode="entailment", extractor="llm", checker="llm"):
    """evaluate_records with the parts the Evaluator builds, RAGAS on a hash embedder."""
    ev = Evaluator(name="llm", extractor=extractor, checker=checker, trace_mode=trace_mode, judge=judge)
    parts = ev.parts(judge, cache)
    parts["ragas"].embedder = HashEmbedder()
    return evaluate_records(records, cache=cache, **parts)


def _evaluate(fake, cache, trace_mode="annotator"):
    judge = _judge(fake)
    try:
        return _run_llm(
            RECORDS, judge, cache, trace_mode,
            extractor={"_target_": "ragsweep.judge.llm_extractor.LLMExtractor", "claim_format": "triplet"},
            checker={"_target_": "ragsweep.judge.llm_checker.LLMChecker"},
        ), judge
    finally:
        judge.close()


def test_llm_end_to_end_with_a_malformed_answer(tmp_path):
    script = Scripted()
    with FakeOpenAIServer(responder=script) as fake:
        (recs, m), judge = _evaluate(fake, Cache(tmp_path))
        n_first = fake.n_requests
        first_body = fake.requests[0]
    r1, r2 = recs
    assert r1["response_claims"] == [["Paris", "is", "in France"], ["Paris", "has", "museums"]]
    assert r1["gt_answer_claims"] == [["Paris", "is", "in France"]]
    assert r1["answer2response"] == ["Entailment", "Neutral"]
    assert r1["retrieved2response"] == [["Entailment", "Neutral"], ["Neutral", "Neutral"]]
    assert r1["metrics"]["precision"] == 0.5 and r1["metrics"]["faithfulness"] == 0.5
    # the malformed answer: asked 1 + parse_retries (2) times, then counted once; labels None
    assert m["judge/parse_failures"] == 1 and m["judge/parse_retries"] == 2 and m["judge/failures"] == 0
    assert r2["retrieved2response"] == [[None]] and r2["retrieved2answer"] == [[None]]
    assert math.isnan(r2["metrics"]["faithfulness"]) and math.isnan(r2["metrics"]["claim_recall"])
    assert math.isnan(r2["metrics"]["ragas/faithfulness"])
    assert r2["metrics"]["precision"] == 1.0  # answer2response did not need the malformed chunk
    assert not math.isnan(r1["metrics"]["faithfulness"])
    # TRACe annotator (RAGBench prompt) and RAGAS (LLM variants)
    assert r1["trace"]["mode"] == "annotator" and r1["trace"]["all_relevant_sentence_keys"] == ["0a"]
    assert r1["trace"]["relevance_score"] == pytest.approx(1 / 3) and r1["trace"]["adherence_score"] is True
    assert r1["ragas"]["generated_questions"] == ["Where is Paris 0?", "Where is Paris 1?", "Where is Paris 2?"]
    assert r1["metrics"]["ragas/context_relevance"] == pytest.approx(1 / 3)  # "zz" is no sentence
    assert 0 < r1["metrics"]["ragas/answer_relevance"] <= 1
    # counters
    assert m["judge/requests"] == n_first == m["judge/calls"]
    assert m["judge/prompt_tokens"] > 0 and m["judge/completion_tokens"] > 0
    assert sorted(set(script.kinds)) == ["annotate", "check", "context", "extract", "questions"]
    # the checker sees the question and RefChecker's triplet lines, as RAGChecker sends them
    assert set(script.questions) == {"Where is Paris?", "Where is Rome?"}
    # RefChecker's prompts ask for free text: no JSON schema on extraction (structured=false)
    assert "response_format" not in first_body
    assert first_body["temperature"] == 0.0 and first_body["seed"] == 0

    # rerun: everything parsed is cached; only the malformed check is asked again
    script2 = Scripted()
    with FakeOpenAIServer(responder=script2) as fake2:
        (recs2, m2), judge2 = _evaluate(fake2, Cache(tmp_path))
        retried = [b for b in fake2.requests]
    assert script2.kinds == ["check"] * 3 and m2["judge/parse_failures"] == 1
    assert [b["seed"] for b in retried] == [0, 1, 2] and retried[1]["temperature"] == 0.3
    assert "could not be read" in retried[1]["messages"][-1]["content"]
    assert m2["judge/cache_hits"] > 0
    assert recs2[0]["retrieved2response"] == r1["retrieved2response"]


def test_fully_cached_run_starts_no_server(tmp_path):
    records = [RECORDS[0]]
    with FakeOpenAIServer(responder=Scripted()) as fake:
        judge = _judge(fake)
        _run_llm(records, judge, Cache(tmp_path))
        judge.close()

    class NeverStarted(ExternalServer):
        def start(self):
            raise AssertionError("the judge server was started")

    lazy = Judge(server=NeverStarted(base_url="http://127.0.0.1:9/v1", model="fake", api_key_env=None))
    _, m = _run_llm(records, lazy, Cache(tmp_path))
    assert not lazy.started and m["judge/requests"] == 0 and m["judge/checks"] == 0


def test_http_failures_are_counted_not_labelled(tmp_path):
    with FakeOpenAIServer(default=status(500)) as fake:
        judge = _judge(fake, parse_retries=1)
        labels = LLMChecker(judge=judge).check_pairs([("a", "b"), ("c", "b"), ("d", "e")])
        judge.close()
    assert labels == [None, None, None]
    assert judge.stats["failures"] == 2 and judge.stats["parse_failures"] == 0
    assert judge.stats["requests"] == 2  # no parse re-ask after an HTTP failure


def test_parsers():
    assert parse_labels('{"labels": ["entailment", "Neutral"]}', 2) == ["Entailment", "Neutral"]
    assert parse_labels('{"labels": ["Entailment"]}', 2) is None
    assert parse_labels('{"labels": ["Yes", "No"]}', 2) is None
    assert parse_labels("Entailment", 1) == ["Entailment"]  # RefChecker's answer format
    assert parse_labels("Entailment\nNeutral", 1) is None  # a count mismatch is never padded/cut
    ann = parse_annotation(json.dumps({
        "all_relevant_sentence_keys": ["0a.", "1b"], "all_utilized_sentence_keys": [],
        "overall_supported": False,
        "sentence_support_information": [
            {"response_sentence_key": "a.", "supported_sentence_keys": ["0a"], "fully_supported": True},
            {"response_sentence_key": "b", "supporting_sentence_keys": [], "fully_supported": False},
        ],
    }))
    assert ann["all_relevant_sentence_keys"] == ["0a", "1b"]
    assert ann["unsupported_response_sentence_keys"] == ["b"]
    assert ann["sentence_support_information"][0]["supporting_sentence_keys"] == ["0a"]
    assert parse_annotation('{"all_relevant_sentence_keys": []}') is None
    assert parse_annotation("not json") is None


def test_annotator_prompt_is_the_ragbench_prompt():
    prompt = annotator_prompt([[("0a", "Doc {answer} one.")], [("1a", "Doc two.")]], "Q?", [("a", "Resp.")])
    assert prompt.startswith("I asked someone to answer a question based on one or more documents.")
    assert "'''\n0a. Doc {answer} one.\n\n1a. Doc two.\n'''" in prompt  # placeholders inside data stay
    assert "'''\nQ?\n'''" in prompt and "'''\na. Resp.\n'''" in prompt
    assert '"supported_without_sentence"' in ANNOTATOR_PROMPT and "well_known_fact" in ANNOTATOR_PROMPT
    assert ANNOTATOR_PROMPT.rstrip().endswith("supported by the text in the documents.")


def test_judge_items_and_config_errors():
    with pytest.raises(ValueError, match="evaluator.judge.server"):
        Judge()
    with pytest.raises(ValueError, match="evaluator.judge.temprature: unknown field"):
        Judge(base_url="http://x/v1", temprature=0)
    with FakeOpenAIServer(responder=lambda body, i: ok('{"x": 1}')) as fake:
        judge = _judge(fake, parse_retries=0)
        out = judge.ask([JudgeItem([("user", "hi")], None, lambda t: json.loads(t)["x"], 8)])
        judge.close()
    assert out == [1] and judge.stats["requests"] == 1


# --------------------------------------------------------------------------------------------
# the real thing: llama.cpp + SmolLM2-135M (quality aside)
# --------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_real_llamacpp_judge(tmp_path):
    from ragsweep.rag.generator.server import LlamaCppServer

    server = LlamaCppServer(n_ctx=4096, n_threads=2, startup_timeout_s=180, state_dir=tmp_path / "state")
    records = [dict(RECORDS[0], retrieved_context=RECORDS[0]["retrieved_context"][:1])]
    cfg = dict(
        name="llm",
        # small budgets keep this under a minute on 2 cores: answers may be cut and fail to
        # parse, which the assertions below account for (the counting is what is tested)
        extractor={"_target_": "ragsweep.judge.llm_extractor.LLMExtractor", "claim_format": "triplet", "max_tokens": 96},
        checker={"_target_": "ragsweep.judge.llm_checker.LLMChecker", "batch_size": 8},
        judge={"server": server, "max_tokens": 192, "timeout_s": 300, "parse_retries": 0},
        # RAGAS's prompts are tested request by request against the fake server above
        trace_mode="annotator",
        ragas=False,
        n_questions=1,
    )
    try:
        recs, m = Evaluator(**cfg).evaluate(records, cache=Cache(tmp_path / "cache"))
        assert not server.running  # stopped by the evaluator
        r = recs[0]
        # 2 extractions + 1 annotation at least; checks only for parsed claims
        # (RefChecker's free-text prompts: the 135M model's triplets may not parse)
        assert m["judge/requests"] >= 3 and m["judge/calls"] >= m["judge/requests"]
        assert m["judge/prompt_tokens"] > 0
        assert m["judge/parse_failures"] <= m["judge/requests"]
        for field in ("response_claims", "gt_answer_claims"):
            assert r[field] is None or all(isinstance(c, list) and len(c) == 3 for c in r[field])
        for field in ("answer2response", "response2answer"):
            assert r[field] is None or all(lab in (None, "Entailment", "Neutral", "Contradiction") for lab in r[field])
        # NaN exactly where a label is missing
        has_none = r["retrieved2response"] is None or any(lab is None for row in r["retrieved2response"] for lab in row)
        assert math.isnan(r["metrics"]["faithfulness"]) == has_none
        # a rerun with the same cache asks only what failed before (nothing, if nothing failed)
        failed = m["judge/parse_failures"] + m["judge/failures"] + m["judge/extraction_failures"]
        recs2, m2 = Evaluator(**cfg).evaluate(records, cache=Cache(tmp_path / "cache"))
        assert not server.running
        if failed == 0:
            assert m2["judge/requests"] == 0 and m2["judge/checks"] == 0
        assert m2["judge/extractions"] <= m["judge/extraction_failures"]
        # what parsed is read back from the cache; an answer that did not parse is never cached, so
        # when none parsed (the 135M model's output depends on the weight format auto chose) every
        # request is asked again
        parsed = m["judge/requests"] - m["judge/parse_failures"] - m["judge/failures"]
        if parsed > 0:
            assert m2["judge/cache_hits"] > 0
        else:
            assert m2["judge/cache_hits"] == 0 and m2["judge/requests"] == m["judge/requests"]
    finally:
        server.stop()


def test_evaluator_stops_the_managed_judge_server_also_on_error(tmp_path, monkeypatch):
    from ragsweep.rag.generator.server import ManagedServer

    script = str(FAKE_OPENAI_SERVER)

    def server():
        return ManagedServer(lambda port: [sys.executable, script, "--port", str(port), "--max-seconds", "60"],
                             model_name="fake", startup_timeout_s=30, state_dir=tmp_path / "state")

    # the fake answers "echo: <prompt>": RefChecker's reading takes the prompt's example triplets
    # as claims (as RefChecker would), but no check answer has one label per claim: the checks
    # fail, are counted, and the metrics are NaN
    srv = server()
    ev = Evaluator(name="llm", extractor="llm", checker="llm", ragas=False,
                   judge={"server": srv, "parse_retries": 0, "max_retries": 0})
    recs, m = ev.evaluate([RECORDS[0]], cache=Cache(tmp_path / "cache"))
    assert not srv.running and srv.pid is not None  # started, then stopped
    assert m["judge/parse_failures"] > 0 and m["judge/check_failures"] > 0
    assert math.isnan(recs[0]["metrics"]["precision"]) and math.isnan(recs[0]["metrics"]["faithfulness"])

    def boom(*args, **kwargs):
        raise RuntimeError("TRACe exploded")

    from ragsweep.judge.trace_steps import EntailmentTrace

    monkeypatch.setattr(EntailmentTrace, "annotate", boom)
    srv2 = server()
    ev2 = Evaluator(name="llm", extractor="offline", checker="llm", ragas=False,
                    judge={"server": srv2, "parse_retries": 0, "max_retries": 0})
    with pytest.raises(RuntimeError, match="TRACe exploded"):
        ev2.evaluate([RECORDS[0]], cache=None)
    assert srv2.pid is not None and not srv2.running  # the checks started it; the error stopped it


def test_checker_shows_the_question_and_triplets_as_refchecker_does():
    script = Scripted()
    with FakeOpenAIServer(responder=script) as fake:
        judge = _judge(fake)
        checker = LLMChecker(judge=judge)
        labels = checker.check_pairs([
            (["Paris", "is in", "France"], "Paris is in France.", "Where is Paris?"),
            ("Paris has museums", "Paris is in France.", "Where is Paris?"),
            (["Rome", "is in", "Italy"], "Rome is in Italy."),  # no question: the slot stays empty
        ] + [(f"claim {i}", "Paris is in France.", "Where is Paris?") for i in range(5)])
        bodies = list(fake.requests)
        judge.close()
    assert labels[:3] == ["Entailment", "Neutral", "Entailment"]
    prompts = [b["messages"][-1]["content"] for b in bodies]
    assert any('### Claims:\n("Paris", "is in", "France")\nParis has museums\nclaim 0' in p for p in prompts)
    assert sorted(script.questions) == ["", "Where is Paris?", "Where is Paris?"]
    # 7 claims against the first reference: 5 + 2 per call (RAGChecker's joint_check_num = 5)
    assert len(bodies) == 3 and sorted(b["max_tokens"] for b in bodies) == [110, 120, 150]
    assert all("response_format" not in b for b in bodies)
