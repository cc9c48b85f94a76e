"""evaluate_records and the Evaluator component, with deterministic stand-ins (no model)."""

from __future__ import annotations

import json
import math
import re
from collections import Counter

import numpy as np
import pytest

from ragsweep.store.cache import Cache
from ragsweep.judge import ragchecker_metrics as rcm
from ragsweep.judge.claims import OfflineExtractor
from ragsweep.judge.core import Evaluator
from ragsweep.judge.pipeline import (
    AnnotatorTrace,
    EntailmentTrace,
    EvaluatorConfigError,
    check_cached,
    claim_sentences,
    evaluate_records,
)
from ragsweep.judge.ragas import Ragas, faithfulness, match_sentences

_W = re.compile(r"\w+")


def _words(text):
    return {w.lower() for w in _W.findall(text)}


class WordChecker:
    """Entailment when every word of the claim occurs in the reference; Contradiction when the
    claim says 'not' and the reference does not; None (a failure) for references with FLAKY."""

    cache_id = {"checker": "words"}

    def __init__(self):
        self.calls = 0
        self.pairs = []

    def check_pairs(self, pairs):
        self.calls += 1
        self.pairs.extend(pairs)
        out = []
        for claim, ref in pairs:
            cw, rw = _words(claim), _words(ref)
            if "flaky" in rw:
                out.append(None)
            elif cw and cw <= rw:
                out.append("Entailment")
            elif "not" in cw and "not" not in rw and (cw - {"not"}) <= rw:
                out.append("Contradiction")
            else:
                out.append("Neutral")
        return out


class HashEmbedder:
    """Deterministic bag-of-words vectors (unit norm)."""

    cache = None

    def encode(self, texts):
        rows = []
        for t in texts:
            v = np.zeros(64)
            for w in _words(t):
                v[sum(map(ord, w)) % 63] += 1.0
            v[63] += 0.01
            rows.append(v / np.linalg.norm(v))
        return np.array(rows)


def _records():
    return [
        {
            "query_id": "q1",
            "query": "Where is Paris and what is Berlin?",
            "gt_answer": "Paris is in France. Berlin is the capital of Germany. Rome is in Italy.",
            "response": "Paris is in France, but Berlin is in Spain. Paris is big and old.",
            "retrieved_context": [
                {"doc_id": "a", "text": "Paris is in France. It is a city."},
                {"doc_id": "b", "text": "Berlin is the capital of Germany."},
                {"doc_id": "c", "text": "Nothing useful here at all."},
            ],
        },
        {
            "query_id": "q2",
            "query": "Is the sky green?",
            "gt_answer": None,
            "response": "The sky is blue today.",
            "retrieved_context": [{"doc_id": "d", "text": "The sky is blue today. Grass is green."}],
        },
    ]


def _run(records=None, checker=None, cache=None, trace_mode="entailment", trace_attribution="entailment",
         prune=True, annotator=None, ragas=True, extractor=None):
    """evaluate_records with its steps built as the Evaluator builds them (the cover rule has its
    own test, so entailment attribution by default)."""
    trace = {
        "entailment": lambda: EntailmentTrace(attribution=trace_attribution, prune=prune),
        "annotator": lambda: AnnotatorTrace(annotator),
        "none": lambda: None,
    }[trace_mode]()
    # the conjunctions rule keeps "Paris is in France, but Berlin is in Spain." as two claims
    recs, counters = evaluate_records(records or _records(), extractor or OfflineExtractor(clause_rule="conjunctions"),
                                      checker or WordChecker(), cache, trace=trace,
                                      ragas=Ragas(embedder=HashEmbedder()) if ragas else None)
    return recs, _aggregated(recs, counters)


def _aggregated(recs, counters):
    """The evaluator's counters and the aggregates of its per-question values, as a run computes
    them (the one aggregation path: :func:`ragsweep.analysis.scoring.score_run`)."""
    from ragsweep.judge.metrics import registry
    from ragsweep.analysis.scoring import score_run

    return {**counters, **score_run(recs, registry.families_in(recs)).metrics}


def test_the_evaluator_returns_per_question_values_and_counters_never_aggregates():
    from ragsweep.judge.metrics import registry

    recs, counters = evaluate_records(_records(), OfflineExtractor(clause_rule="conjunctions"), WordChecker(), None,
                                      trace=EntailmentTrace(attribution="entailment"), ragas=Ragas(embedder=HashEmbedder()))
    assert not [k for k in counters if registry.find(k) is not None]  # no second aggregation path
    assert set(counters) >= {"judge/checks", "evaluator/examples"}
    assert registry.families_in(recs) == {"ragchecker", "trace", "ragas"}
    m = _aggregated(recs, counters)  # score_run: the mean with its interval and count
    assert m["ragchecker/generator/faithfulness"] == pytest.approx((100 / 3 + 100) / 2)
    assert m["ragchecker/generator/faithfulness/n"] == 2 and "ragchecker/generator/faithfulness/ci_low" in m


def _same(a, b):
    return (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)) or a == b


def test_matrices_shape_orientation_and_metrics():
    recs, metrics = _run()
    r = recs[0]
    assert r["response_claims"] == ["Paris is in France", "Berlin is in Spain.", "Paris is big and old."]
    assert r["gt_answer_claims"] == ["Paris is in France.", "Berlin is the capital of Germany.", "Rome is in Italy."]
    n, g, k = 3, 3, 3
    assert len(r["answer2response"]) == n and len(r["response2answer"]) == g
    assert [len(row) for row in r["retrieved2response"]] == [k] * n
    assert [len(row) for row in r["retrieved2answer"]] == [k] * g
    # answer2response[i]: response claim i vs the gt answer
    assert r["answer2response"] == ["Entailment", "Neutral", "Neutral"]
    # response2answer[j]: gt claim j vs the response
    assert r["response2answer"] == ["Entailment", "Neutral", "Neutral"]
    # retrieved2response[i][c]: response claim i vs chunk c
    assert r["retrieved2response"] == [["Entailment", "Neutral", "Neutral"]] + [["Neutral"] * 3] * 2
    # retrieved2answer[j][c]: gt claim j vs chunk c
    assert r["retrieved2answer"] == [
        ["Entailment", "Neutral", "Neutral"],
        ["Neutral", "Entailment", "Neutral"],
        ["Neutral", "Neutral", "Neutral"],
    ]
    m = r["metrics"]
    assert m["precision"] == pytest.approx(1 / 3) and m["recall"] == pytest.approx(1 / 3)
    assert m["claim_recall"] == pytest.approx(2 / 3) and m["context_precision"] == pytest.approx(2 / 3)
    assert m["faithfulness"] == pytest.approx(1 / 3) and m["hallucination"] == pytest.approx(2 / 3)
    assert m["context_utilization"] == pytest.approx(1 / 2) and m["n_response_claims"] == 3
    expected = rcm.compute_example_metrics(r, scale=1.0)
    assert {k: m[k] for k in expected} == pytest.approx(expected, nan_ok=True)
    # aggregates: RAGChecker's 0-100 scale, means over the examples that define them
    assert metrics["ragchecker/overall/precision"] == pytest.approx(100 / 3)
    assert metrics["ragchecker/generator/faithfulness"] == pytest.approx((100 / 3 + 100) / 2)
    for name in ("trace/relevance", "trace/utilization", "trace/completeness", "trace/adherence_rate",
                 "trace/sentence_adherence", "ragas/faithfulness", "ragas/answer_relevance",
                 "ragas/context_relevance", "judge/calls", "judge/cache_hits", "judge/failures",
                 "judge/parse_failures", "judge/prompt_tokens", "judge/completion_tokens"):
        assert name in metrics
    assert metrics["evaluator/examples"] == 2 and metrics["evaluator/examples_with_gt"] == 1


def test_records_without_gt_get_nan_gt_metrics():
    recs, metrics = _run()
    r = recs[1]
    assert r["gt_answer_claims"] is None
    assert r["answer2response"] is None and r["response2answer"] is None and r["retrieved2answer"] is None
    assert r["retrieved2response"] == [["Entailment"]]
    for name in rcm.METRICS:
        if name == "faithfulness":
            assert r["metrics"][name] == 1.0
        else:
            assert math.isnan(r["metrics"][name]), name
    assert math.isnan(r["metrics"]["trace/relevance"]) and math.isnan(r["metrics"]["trace/completeness"])
    assert r["metrics"]["trace/utilization"] == pytest.approx(0.5)
    # the aggregate of a gt metric comes from the one example with a ground truth
    assert metrics["ragchecker/overall/recall"] == pytest.approx(100 / 3)
    # inputs are not modified
    assert "response_claims" not in _records()[1]


def test_second_run_makes_zero_checker_calls(tmp_path):
    first_checker = WordChecker()
    recs1, m1 = _run(checker=first_checker, cache=Cache(tmp_path))
    assert first_checker.calls == 3  # chunk-level matrices, TRACe sentences, RAGAS joined context
    assert m1["judge/checks"] == len(first_checker.pairs) and m1["judge/cache_hits"] == 0

    class CountingExtractor(OfflineExtractor):
        n = 0

        def extract_many(self, texts, questions=None):
            CountingExtractor.n += len(texts)
            return super().extract_many(texts, questions)

    second = WordChecker()
    recs2, m2 = _run(extractor=CountingExtractor(clause_rule="conjunctions"), checker=second, cache=Cache(tmp_path))
    assert second.calls == 0 and second.pairs == []
    assert CountingExtractor.n == 0
    assert m2["judge/checks"] == 0 and m2["judge/extractions"] == 0 and m2["judge/cache_hits"] > 0
    assert all(_same(m1[k], m2[k]) for k in m1 if not k.startswith("judge/"))
    for a, b in zip(recs1, recs2):
        assert a["retrieved2response"] == b["retrieved2response"] and a["trace"] == b["trace"]


def test_pairs_are_deduplicated_across_the_batch():
    checker = WordChecker()
    recs = _records()
    _run(records=recs + recs, checker=checker, ragas=False)
    assert len(checker.pairs) == len(set(checker.pairs))
    single = WordChecker()
    _run(records=recs, checker=single, ragas=False)
    assert sorted(single.pairs) == sorted(checker.pairs)


def test_failed_labels_give_nan_and_are_retried(tmp_path):
    recs = _records()
    recs[1]["retrieved_context"][0]["text"] = "FLAKY chunk: the sky is blue today."
    out, m = _run(records=recs, cache=Cache(tmp_path))
    r = out[1]
    assert r["retrieved2response"] == [[None]]
    assert math.isnan(r["metrics"]["faithfulness"]) and math.isnan(r["metrics"]["ragas/faithfulness"])
    assert r["trace"]["adherence_score"] is None and math.isnan(r["metrics"]["trace/adherence"])
    assert m["judge/check_failures"] == 1
    assert not math.isnan(out[0]["metrics"]["faithfulness"])
    again = WordChecker()
    _run(records=recs, checker=again, cache=Cache(tmp_path))
    assert again.pairs == [("The sky is blue today.", "FLAKY chunk: the sky is blue today.")]


def test_trace_cover_attribution_needs_no_checks():
    entail, cover = WordChecker(), WordChecker()
    a, _ = _run(checker=entail, ragas=False)
    b, m = _run(checker=cover, ragas=False, trace_attribution="cover")
    t = b[0]["trace"]
    assert t["mode"] == "entailment" and t["attribution"] == "cover"
    # response claims: "Paris is in France" -> 0a (holds both its words); "Berlin is in Spain." and
    # "Paris is big and old." share one word with a sentence: not attributed
    assert t["all_utilized_sentence_keys"] == ["0a"]
    assert t["unattributed_response_claims"] == [1, 2]
    # ground truth: "Paris is in France." -> 0a, "Berlin is the capital of Germany." -> 1a, Rome: nowhere
    assert t["all_relevant_sentence_keys"] == ["0a", "1a"] and t["unattributed_gt_answer_claims"] == [2]
    assert (t["relevance_score"], t["utilization_score"], t["completeness_score"]) == (0.5, 0.25, 0.5)
    # support and adherence still come from the chunk-level checks: same as with entailment attribution
    assert t["unsupported_response_sentence_keys"] == a[0]["trace"]["unsupported_response_sentence_keys"]
    assert t["adherence_score"] is a[0]["trace"]["adherence_score"] is False
    # no sentence-level check at all: exactly the RAGChecker matrices' pairs
    assert set(cover.pairs) < set(entail.pairs)
    whole = {c["text"] for r in _records() for c in r["retrieved_context"]}
    whole |= {r["gt_answer"] for r in _records() if r["gt_answer"]} | {r["response"] for r in _records()}
    assert {ref for _, ref in cover.pairs} <= whole
    with pytest.raises(EvaluatorConfigError, match="trace_attribution must be one of cover, entailment"):
        _run(trace_attribution="words")


class KindChecker(WordChecker):
    """WordChecker that also takes ``kind``; answer references entail everything (to tell them apart)."""

    reference_kinds = ("context", "answer")
    cache_id = {"checker": "kinds"}

    def __init__(self):
        super().__init__()
        self.kinds = []

    def check_pairs(self, pairs, kind="context"):
        self.kinds.append((kind, len(pairs)))
        labels = super().check_pairs(pairs)
        return ["Entailment"] * len(pairs) if kind == "answer" else labels


def test_answer_matrices_are_checked_as_answer_kind(tmp_path):
    ck = KindChecker()
    recs, _ = _run(checker=ck, ragas=False, cache=Cache(tmp_path))
    r = recs[0]
    assert r["answer2response"] == ["Entailment"] * 3 and r["response2answer"] == ["Entailment"] * 3
    assert r["retrieved2response"][1] == ["Neutral", "Neutral", "Neutral"]  # "Berlin is in Spain." vs chunks
    assert [k for k, _ in ck.kinds] == ["context", "answer", "context"]  # matrices, answers, TRACe sentences
    # answer labels are cached apart from context labels of the same pair
    again = KindChecker()
    recs2, m2 = _run(checker=again, ragas=False, cache=Cache(tmp_path))
    assert again.kinds == [] and m2["judge/checks"] == 0
    assert recs2[0]["answer2response"] == r["answer2response"]
    # a checker without kinds gets every matrix pair in one batch, unchanged
    plain = WordChecker()
    recs3, _ = _run(checker=plain, ragas=False)
    assert plain.calls == 2 and recs3[0]["answer2response"] == ["Entailment", "Neutral", "Neutral"]


def test_trace_from_entailment_checks():
    recs, _ = _run()
    t = recs[0]["trace"]
    assert t["mode"] == "entailment"
    assert t["documents_sentences"][0] == [["0a", "Paris is in France."], ["0b", "It is a city."]]
    assert t["response_sentences"] == [["a", "Paris is in France, but Berlin is in Spain."], ["b", "Paris is big and old."]]
    assert t["all_utilized_sentence_keys"] == ["0a"]
    assert t["all_relevant_sentence_keys"] == ["0a", "1a"]
    # 4 context sentences (0a 0b 1a 2a): relevance 2/4, utilization 1/4, completeness 1/2
    assert (t["relevance_score"], t["utilization_score"], t["completeness_score"]) == (0.5, 0.25, 0.5)
    assert t["unsupported_response_sentence_keys"] == ["a", "b"] and t["adherence_score"] is False
    assert t["sentence_adherence"] == 0.0
    assert recs[0]["metrics"]["trace/adherence"] == 0.0
    # without pruning every sentence is tested: same keys here, more checks
    pruned, unpruned = WordChecker(), WordChecker()
    a, _ = _run(checker=pruned, ragas=False)
    b, _ = _run(checker=unpruned, ragas=False, prune=False)
    assert [x["trace"] for x in a] == [x["trace"] for x in b]
    assert len(unpruned.pairs) > len(pruned.pairs)
    # a claim entailed by a chunk but by none of its sentences is listed, not attributed
    rec = dict(_records()[1], response="Grass is green the sky is blue today.")
    out, _ = _run(records=[rec], ragas=False)
    assert out[0]["retrieved2response"] == [["Entailment"]]
    assert out[0]["trace"]["unattributed_response_claims"] == [0]
    assert out[0]["trace"]["all_utilized_sentence_keys"] == []
    # trace_mode none: no annotations and no trace metrics
    out, m = _run(trace_mode="none")
    assert "trace" not in out[0] and not any(k.startswith("trace/") for k in m)


def test_claim_sentences():
    resp = "Paris is in France. Berlin is in Germany."
    assert claim_sentences(resp, ["Berlin is in Germany.", "Paris is in France."]) == [1, 0]
    assert claim_sentences(resp, [["Berlin", "lies in", "Germany"], ["Paris", "is in", "France"]]) == [1, 0]
    assert claim_sentences("", ["x"]) == [None]


class StubAnnotator:
    cache_id = {"annotator": "stub"}

    def __init__(self, answers):
        self.answers = answers
        self.seen = []

    def annotate_many(self, examples):
        self.seen.extend(examples)
        return [self.answers.get(q) for _, q, _ in examples]


def test_trace_annotator_mode(tmp_path):
    ann = {
        "all_relevant_sentence_keys": ["0a", "1a", "9z"],
        "all_utilized_sentence_keys": ["0a"],
        "unsupported_response_sentence_keys": ["b"],
        "sentence_support_information": [
            {"response_sentence_key": "a", "supporting_sentence_keys": ["0a"], "fully_supported": True},
            {"response_sentence_key": "b", "supporting_sentence_keys": [], "fully_supported": False},
        ],
        "overall_supported": False,
    }
    stub = StubAnnotator({_records()[0]["query"]: ann})
    recs, m = _run(trace_mode="annotator", annotator=stub, cache=Cache(tmp_path))
    t = recs[0]["trace"]
    assert t["mode"] == "annotator" and t["unknown_keys"] == ["9z"]
    assert (t["relevance_score"], t["utilization_score"], t["completeness_score"]) == (0.5, 0.25, 0.5)
    assert t["adherence_score"] is False and t["sentence_adherence"] == 0.5
    # the second record's annotation failed: NaN, not a guess
    assert recs[1]["trace"]["annotation_failed"] and math.isnan(recs[1]["metrics"]["trace/utilization"])
    assert m["trace/adherence_rate"] == 0.0
    # the judge's own overall verdict is kept and logged
    from ragsweep.judge.metrics import registry

    overall = registry.get("trace/overall_supported").per_question
    assert t["overall_supported"] is False and overall(recs[0]) == 0.0 and math.isnan(overall(recs[1]))
    assert m["trace/overall_supported"] == 0.0 and recs[1]["trace"]["overall_supported"] is None
    assert t["unlabelled_response_sentence_keys"] == []
    # the successful annotation is cached, the failed one asked again
    stub2 = StubAnnotator({})
    _run(trace_mode="annotator", annotator=stub2, cache=Cache(tmp_path))
    assert [q for _, q, _ in stub2.seen] == [_records()[1]["query"]]
    # a response sentence the judge did not label is a judge failure, not "supported"
    partial = dict(ann, unsupported_response_sentence_keys=[], overall_supported=True,
                   sentence_support_information=ann["sentence_support_information"][:1])
    recs3, _ = _run(trace_mode="annotator", annotator=StubAnnotator({_records()[0]["query"]: partial}))
    t3 = recs3[0]["trace"]
    assert t3["unlabelled_response_sentence_keys"] == ["b"] and t3["adherence_score"] is None
    assert math.isnan(t3["sentence_adherence"]) and math.isnan(recs3[0]["metrics"]["trace/adherence"])
    assert t3["utilization_score"] == 0.25  # the key lists it did give still count
    assert overall(recs3[0]) == 1.0
    with pytest.raises(ValueError, match="evaluator.judge must be set for trace_mode annotator"):
        Evaluator(checker=WordChecker(), trace_mode="annotator")


def test_ragas_offline_substitutes():
    assert faithfulness([True, False, True, True]) == 0.75
    assert math.isnan(faithfulness([])) and math.isnan(faithfulness([True, None])) and math.isnan(faithfulness(None))
    emb = HashEmbedder()
    ex = [{"question": "the sky", "response": "the sky", "sentences": [("0a", "the sky"), ("0b", "zebra quartz")],
           "supported": [True]},
          {"question": "q", "response": "", "sentences": [], "supported": []}]
    res = Ragas(embedder=emb, context_threshold=0.9).score(ex)
    assert res[0]["answer_relevance"] == pytest.approx(1.0) and res[0]["context_relevance"] == 0.5
    assert res[1]["answer_relevance"] == 0.0 and math.isnan(res[1]["context_relevance"])
    recs, m = _run(ragas=False)
    assert not any(k.startswith("ragas/") for k in m) and "ragas/faithfulness" not in recs[0]["metrics"]


def test_ragas_faithfulness_checks_the_whole_joined_context():
    # RAGAS checks each statement against "\n".join(retrieved_contexts): a statement whose
    # words come from two chunks is supported by the joined context, by neither chunk alone
    checker = WordChecker()
    ex = [{"question": "q", "response": "r", "sentences": [("0a", "x")],
           "claims": ["Paris is in France and Rome", "Madrid"], "chunks": ["Paris is in France and", "Rome is old."],
           "supported": [False, False]}]
    res = Ragas(embedder=HashEmbedder()).score(ex, checker=checker)
    assert res[0]["faithfulness"] == 0.5
    assert ("Paris is in France and Rome", "Paris is in France and\nRome is old.") in checker.pairs
    # unknown claims: NaN; without claims/checker the per-chunk flags are the fallback
    assert math.isnan(Ragas(embedder=HashEmbedder()).score([dict(ex[0], claims=None)], checker=checker)[0]["faithfulness"])
    fallback = Ragas(embedder=HashEmbedder()).score([{k: v for k, v in ex[0].items() if k != "claims"}])
    assert fallback[0]["faithfulness"] == 0.0


class _StubJudge:
    """Answers RAGAS's context prompt with fixed JSON, by question."""

    identity = {"judge": "stub"}

    def __init__(self, answers):
        self.answers = answers

    def ask(self, items, desc=""):
        out = []
        for it in items:
            prompt = it.messages[-1][1]
            q = prompt.split("question: ", 1)[1].split("\n", 1)[0]
            out.append(it.parse(self.answers[q]))
        return out


def test_ragas_context_relevance_matches_sentence_text_back():
    sents = [("0a", "Paris is the capital of France."), ("0b", "It has many museums."), ("1a", "Rome is in Italy.")]
    assert match_sentences(["0b.", "paris is the capital of  FRANCE"], sents) == (["0a", "0b"], [])
    assert match_sentences(["Paris is the capital of France. Rome is in Italy."], sents) == (["0a", "1a"], [])
    assert match_sentences(["Insufficient Information"], sents) == ([], [])
    assert match_sentences(["Berlin is in Germany.", "1a"], sents) == (["1a"], ["Berlin is in Germany."])
    answers = {
        "text": json.dumps({"sentence_keys": ["Rome is in Italy."]}),
        "none": json.dumps({"sentence_keys": "Insufficient Information"}),
        "empty": json.dumps({"sentence_keys": []}),
        "garbage": json.dumps({"sentence_keys": ["The Moon is made of cheese."]}),
    }
    ex = [{"question": q, "response": "", "sentences": sents, "supported": []} for q in answers]
    stats = Counter()
    res = Ragas(judge=_StubJudge(answers), embedder=HashEmbedder()).score(ex, stats=stats)
    assert [r["context_relevance"] for r in res[:3]] == [pytest.approx(1 / 3), 0.0, 0.0]
    assert res[0]["context_sentence_keys"] == ["1a"]
    # a reply that matches nothing is a counted failure, never a silent 0
    assert math.isnan(res[3]["context_relevance"]) and stats["ragas_failures"] == 1
    assert res[3]["context_unmatched"] == ["The Moon is made of cheese."]


def test_check_cached_blank_reference_and_bad_labels():
    checker = WordChecker()
    assert check_cached(checker, [("a claim", "   "), ("a claim", "a claim")]) == ["Neutral", "Entailment"]
    assert checker.pairs == [("a claim", "a claim")]

    class Bad:
        def check_pairs(self, pairs):
            return ["Yes"] * len(pairs)

    with pytest.raises(ValueError, match="label 'Yes'"):
        check_cached(Bad(), [("a", "b")])
    stats = Counter()
    check_cached(WordChecker(), [("x", "y")], None, stats)
    assert stats["checks"] == 1


# --------------------------------------------------------------------------------------------
# the Evaluator component and its YAML files
# --------------------------------------------------------------------------------------------
def test_evaluator_config_validation():
    with pytest.raises(ValueError, match="evaluator.trace_mode"):
        Evaluator(trace_mode="sometimes")
    with pytest.raises(ValueError, match="evaluator.judge must be set for the extractor"):
        Evaluator(extractor="llm")
    with pytest.raises(ValueError, match="evaluator.judge must be set for the checker, trace_mode annotator"):
        Evaluator(checker="llm", trace_mode="annotator")
    with pytest.raises(ValueError, match="evaluator.extractor.claim_formt: unknown field"):
        Evaluator(extractor={"_target_": "ragsweep.judge.llm_extractor.LLMExtractor", "claim_formt": "triplet"},
                  judge={"base_url": "http://x/v1"})
    with pytest.raises(ValueError, match="evaluator.checker: no checker 'magic'; known: llm, nli, offline"):
        Evaluator(checker="magic")
    with pytest.raises(ValueError, match="evaluator.checker needs a _target_"):
        Evaluator(checker={"mode": "offline"})
    with pytest.raises(ValueError, match="evaluator.checker.threshold"):
        Evaluator(checker={"_target_": "ragsweep.judge.offline.OfflineChecker", "threshold": 3})
    with pytest.raises(ValueError, match="evaluator.judge.parse_retries"):
        Evaluator(checker="llm", judge={"base_url": "http://x/v1", "parse_retries": -1})
    with pytest.raises(ValueError, match="evaluator.judge.server"):
        Evaluator(checker="llm", judge={"model": "m"})
    with pytest.raises(ValueError, match="evaluator.ragaz: unknown field"):
        Evaluator(ragaz=True)


def test_none_evaluator_returns_records_unchanged():
    ev = Evaluator(name="none")
    recs = _records()
    out, metrics = ev.evaluate(recs, cache=None)
    assert out == recs and metrics == {}
    assert ev.families == ()  # a run with evaluator=none aggregates no answer-metric family


@pytest.mark.parametrize("option", ["offline", "llm", "nli", "none"])
def test_yaml_options_compose_validate_and_instantiate(compose_cfg, option):
    from hydra.utils import instantiate

    from ragsweep.pipeline.config import check_node

    cfg = compose_cfg(f"evaluator={option}")
    data = {k: v for k, v in cfg.evaluator.items() if k != "_target_"}
    from omegaconf import OmegaConf

    check_node("evaluator", Evaluator.Config, OmegaConf.to_container(OmegaConf.create(data), resolve=True))
    ev = instantiate(cfg.evaluator)  # Hydra builds nested _target_ objects (checker, judge server) too
    assert isinstance(ev, Evaluator) and ev.config.name == option
    if option == "llm":
        assert ev.config.judge["server"].__class__.__name__ == "LlamaCppServer"
        assert not ev.config.judge["server"].running  # built, not started


def test_evaluator_with_stand_ins_and_object_specs(tmp_path):
    ev = Evaluator(name="custom", extractor={"_target_": "ragsweep.judge.claims.OfflineExtractor",
                                             "clause_rule": "conjunctions"}, checker=WordChecker(),
                   ragas=False)
    recs, m = ev.evaluate(_records(), cache=Cache(tmp_path))
    m = _aggregated(recs, m)
    assert ev.families == ("ragchecker", "trace")
    assert recs[0]["answer2response"] == ["Entailment", "Neutral", "Neutral"]
    assert m["ragchecker/overall/precision"] == pytest.approx(100 / 3)


@pytest.mark.slow
def test_offline_evaluator_end_to_end_without_network(tmp_path, monkeypatch, compose_cfg):
    from ragsweep.judge import offline

    import json
    import socket

    from hydra.utils import instantiate

    overrides = ["evaluator=offline"]
    if not offline.PARAMS_PATH.exists():  # the trained head is shipped separately: use a simple one
        head = {"features": ["rec_all", "cos_sent"], "mean": [0.5, 0.5], "scale": [0.25, 0.25],
                "coef": [2.0, 2.0], "intercept": 0.0, "threshold": 0.5}
        params = tmp_path / "params.json"
        params.write_text(json.dumps({"models": {"full": head, "lexical": head}}))
        overrides.append(f"evaluator.checker.params={params}")

    def no_network(self, address):
        raise AssertionError(f"network connection attempted to {address!r}")

    cfg = compose_cfg(*overrides)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    ev = instantiate(cfg.evaluator)
    recs, m = ev.evaluate(_records(), cache=Cache(tmp_path / "cache"))
    m = _aggregated(recs, m)
    assert m["judge/calls"] == 0 and m["judge/checks"] > 0
    assert 0 <= m["ragchecker/overall/precision"] <= 100
    assert 0 <= m["ragas/answer_relevance"] <= 1 and 0 <= m["ragas/context_relevance"] <= 1
    recs2, m2 = instantiate(cfg.evaluator).evaluate(_records(), cache=Cache(tmp_path / "cache"))
    assert m2["judge/checks"] == 0 and m2["judge/extractions"] == 0
    assert [r["retrieved2response"] for r in recs] == [r["retrieved2response"] for r in recs2]


@pytest.mark.slow
def test_nli_checker_reads_label_order_and_fails_clearly_offline(tmp_path, monkeypatch):
    from ragsweep.judge.nli import NLIChecker, NLIModelError
    from support.nli_model import tiny_nli_model

    tiny_nli_model(tmp_path, winner=1, id2label={0: "CONTRADICTION", 1: "ENTAILMENT", 2: "NEUTRAL"})

    pairs = [("Paris is in France.", "Paris is a city in France."), ("x", "y")]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a local cross-encoder folder needs no hub
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    nli = NLIChecker(model=str(tmp_path), device="cpu")
    assert nli.check_pairs(pairs) == ["Entailment", "Entailment"]
    assert nli.cache_id["model"] == str(tmp_path)
    # ... and as a user selects it: evaluator=nli evaluator.checker.model=PATH
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from ragsweep.judge import components
    from support import CONF

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            cfg = compose("config", overrides=["evaluator=nli", f"evaluator.checker.model={tmp_path}"])
    finally:
        GlobalHydra.instance().clear()
    composed = components.build("checker", cfg.evaluator.checker)
    assert composed.config.model == str(tmp_path) and composed.check_pairs(pairs) == ["Entailment", "Entailment"]
    remapped = NLIChecker(model=str(tmp_path), device="cpu", label_map={0: "entailment", 1: "neutral", 2: "contradiction"})
    assert remapped.check_pairs(pairs) == ["Neutral", "Neutral"]
    with pytest.raises(ValueError, match="evaluator.checker.model .* 'maybe'"):
        NLIChecker(model="m", label_map={0: "maybe"})

    missing = NLIChecker(model="cross-encoder/surely-not-a-cached-model-xyz", device="cpu")
    with pytest.raises(NLIModelError, match=r"evaluator.checker.model: cannot load .*HF_HUB_OFFLINE=1"):
        missing.check_pairs(pairs)
