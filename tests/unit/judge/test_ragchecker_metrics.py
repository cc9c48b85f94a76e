"""RAGChecker metrics: golden numbers from RAGChecker's example output, edge cases, properties."""

from __future__ import annotations

import copy
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support import FIXTURES
from ragsweep.judge.ragchecker_metrics import (
    METRIC_GROUPS,
    METRICS,
    N_CLAIMS,
    compute_example_metrics,
    flatten,
)

FIXTURE = FIXTURES / "ragchecker" / "examples_checking_outputs.json"
GOLDEN = json.loads(FIXTURE.read_text(encoding="utf-8"))
E, N, C = "Entailment", "Neutral", "Contradiction"


def aggregate_records(records, round_to=None):
    """RAGChecker's nested aggregate through the one aggregation path (scoring.score_run)."""
    from ragsweep.analysis.scoring import ragchecker_layout, score_run

    return ragchecker_layout(score_run(list(records), ["ragchecker"]), round_to)[0]


def _close(a: float, b: float, tol: float = 0.1) -> bool:
    return abs(a - b) <= tol + 1e-9


def test_fixture_orientation():
    # answer2response / retrieved2response have one entry per RESPONSE claim,
    # response2answer / retrieved2answer one per GT-ANSWER claim; matrix rows are claims.
    for rec in GOLDEN["results"]:
        k = len(rec["retrieved_context"])
        assert len(rec["answer2response"]) == len(rec["response_claims"])
        assert len(rec["response2answer"]) == len(rec["gt_answer_claims"])
        assert len(rec["retrieved2response"]) == len(rec["response_claims"])
        assert len(rec["retrieved2answer"]) == len(rec["gt_answer_claims"])
        assert all(len(row) == k for row in rec["retrieved2response"] + rec["retrieved2answer"])


@pytest.mark.parametrize("index", range(len(GOLDEN["results"])))
def test_per_example_metrics_match_ragchecker(index):
    rec = GOLDEN["results"][index]
    ours = compute_example_metrics(rec)
    for name, expected in rec["metrics"].items():
        assert _close(ours[name], 100 * expected), (name, ours[name], 100 * expected)
    assert ours[N_CLAIMS] == len(rec["response_claims"])
    fractions = compute_example_metrics(rec, scale=1.0)
    assert all(_close(fractions[m], rec["metrics"][m], 1e-12) for m in rec["metrics"])


def test_overall_metrics_match_ragchecker():
    agg = aggregate_records(GOLDEN["results"])
    for group, values in GOLDEN["metrics"].items():
        for name, expected in values.items():
            assert _close(agg[group][name], expected), (group, name, agg[group][name], expected)
    assert agg["overall"][N_CLAIMS] == pytest.approx((11 + 5) / 2)
    rounded = aggregate_records(GOLDEN["results"], round_to=1)
    assert {g: {m: rounded[g][m] for m in v} for g, v in GOLDEN["metrics"].items()} == GOLDEN["metrics"]


def test_layout_and_flatten():
    agg = aggregate_records(GOLDEN["results"])
    assert list(agg) == ["overall", "retriever", "generator"]
    for group, names in METRIC_GROUPS.items():
        assert set(names) <= set(agg[group])
    flat = flatten(agg)
    assert flat["ragchecker/overall/precision"] == agg["overall"]["precision"]
    assert flat["ragchecker/generator/faithfulness"] == agg["generator"]["faithfulness"]
    assert len(flat) == len(METRICS) + 1
    assert flatten({"precision": 1.0, "recall": float("nan")}, "x/", drop_nan=True) == {"x/precision": 1.0}


def _record(a2r, r2a, ret2resp, ret2ans, k=None, gt="the answer"):
    k = k if k is not None else len((ret2resp or ret2ans or [[]])[0])
    return {
        "query_id": "q",
        "query": "q?",
        "gt_answer": gt,
        "response": "r",
        "retrieved_context": [{"doc_id": str(i), "text": f"chunk {i}"} for i in range(k)],
        "response_claims": [f"r{i}" for i in range(len(a2r))],
        "gt_answer_claims": [f"g{j}" for j in range(len(r2a))],
        "answer2response": a2r,
        "response2answer": r2a,
        "retrieved2response": ret2resp,
        "retrieved2answer": ret2ans,
    }


def test_only_entailment_counts():
    rec = _record([E, N, C], [C, E], [[N, C], [C, N], [E, N]], [[N, E], [C, N]])
    m = compute_example_metrics(rec)
    assert m["precision"] == pytest.approx(100 / 3)
    assert m["recall"] == pytest.approx(50)
    assert m["faithfulness"] == pytest.approx(100 / 3)
    assert m["claim_recall"] == pytest.approx(50)
    assert m["context_precision"] == pytest.approx(50)  # chunk 1 entails g0; chunk 0 only contradicts


def test_irrelevant_noise_sensitivity_is_exclusive():
    # chunk 0 relevant (entails g0), chunk 1 irrelevant; both response claims are incorrect.
    # claim r0 is entailed by both chunks -> relevant noise only; r1 only by the irrelevant chunk.
    rec = _record([N, N], [N], [[E, E], [N, E]], [[E, N]])
    m = compute_example_metrics(rec)
    assert m["noise_sensitivity_in_relevant"] == pytest.approx(50)
    assert m["noise_sensitivity_in_irrelevant"] == pytest.approx(50)
    rec = _record([N, N], [N], [[E, E], [E, N]], [[E, N]])
    m = compute_example_metrics(rec)
    assert m["noise_sensitivity_in_relevant"] == pytest.approx(100)
    assert m["noise_sensitivity_in_irrelevant"] == 0


def test_context_utilization():
    # g0 in chunk and in response, g1 in chunk not in response, g2 in response only (not retrieved)
    rec = _record([E], [E, N, E], [[E]], [[E], [E], [N]])
    m = compute_example_metrics(rec)
    assert m["context_utilization"] == pytest.approx(50)
    assert m["claim_recall"] == pytest.approx(200 / 3)


@pytest.mark.parametrize("gt", [None, "", "   ", "missing"])
def test_no_ground_truth_gives_nan_and_is_skipped(gt):
    rec = _record([E, N], [E], [[E], [N]], [[E]], gt=gt)
    if gt == "missing":
        del rec["gt_answer"]
    m = compute_example_metrics(rec)
    for name in METRICS:
        if name == "faithfulness":
            assert m[name] == pytest.approx(50)
        else:
            assert math.isnan(m[name]), name
    assert m[N_CLAIMS] == 2
    # gt-free output files: the gt-side fields may be absent altogether
    for f in ("gt_answer_claims", "answer2response", "response2answer", "retrieved2answer"):
        rec[f] = None
    assert compute_example_metrics(rec)["faithfulness"] == pytest.approx(50)

    golden = compute_example_metrics(GOLDEN["results"][0])
    agg = aggregate_records([GOLDEN["results"][0], rec])
    assert agg["overall"]["precision"] == pytest.approx(golden["precision"])
    assert agg["generator"]["faithfulness"] == pytest.approx((golden["faithfulness"] + 50) / 2)
    assert math.isnan(aggregate_records([rec])["overall"]["recall"])


def test_none_label_makes_affected_metrics_nan():
    base = _record([E, N], [E, N], [[E, N], [N, N]], [[E, N], [N, N]])
    rec = copy.deepcopy(base)
    rec["answer2response"][1] = None  # precision side unknown
    m = compute_example_metrics(rec)
    for name in ("precision", "f1", "hallucination", "self_knowledge",
                 "noise_sensitivity_in_relevant", "noise_sensitivity_in_irrelevant"):
        assert math.isnan(m[name]), name
    for name in ("recall", "claim_recall", "context_precision", "context_utilization", "faithfulness"):
        assert not math.isnan(m[name]), name

    rec = copy.deepcopy(base)
    rec["retrieved2answer"][0][1] = None
    m = compute_example_metrics(rec)
    for name in ("claim_recall", "context_precision", "context_utilization",
                 "noise_sensitivity_in_relevant", "noise_sensitivity_in_irrelevant"):
        assert math.isnan(m[name]), name
    assert m["precision"] == pytest.approx(50) and m["hallucination"] == pytest.approx(50)

    rec = copy.deepcopy(base)
    rec["retrieved2response"][1][0] = None
    m = compute_example_metrics(rec)
    assert math.isnan(m["faithfulness"]) and math.isnan(m["hallucination"])
    assert m["claim_recall"] == pytest.approx(50)


def test_empty_denominators_follow_ragchecker():
    m = compute_example_metrics(_record([], [E, N], [], [[E], [N]], k=1))
    assert m["precision"] == 0 and m["f1"] == 0 and m["faithfulness"] == 0 and m[N_CLAIMS] == 0
    m = compute_example_metrics(_record([E], [N], [[N]], [[N]]))
    assert m["context_utilization"] == 0  # nothing recalled
    assert m["context_precision"] == 0


def test_no_retrieved_chunks_uses_appendix_b():
    m = compute_example_metrics(_record([E, N, N], [E], [[], [], []], [[]], k=0))
    assert m["faithfulness"] == 0
    assert m["hallucination"] == pytest.approx(200 / 3)
    assert m["self_knowledge"] == pytest.approx(100 / 3)
    assert m["claim_recall"] == 0


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("answer2response", [E], "answer2response: expected a list of 2 labels, got 1"),
        ("retrieved2response", [[E], [E]], "retrieved2response[0]: expected a list of 2 labels"),
        ("retrieved2answer", [[E, E]], "retrieved2answer: expected 2 rows"),
        ("response2answer", [E, "entailment"], "response2answer[1]: label 'entailment'"),
    ],
)
def test_malformed_matrices_raise(field, value, message):
    rec = _record([E, N], [E, N], [[E, N], [N, N]], [[E, N], [N, N]])
    rec[field] = value
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        compute_example_metrics(rec)


# --- properties, against a literal set-based reading of Appendix B ----------------------------

labels = st.sampled_from([E, N, C])


@st.composite
def records(draw):
    n_resp, n_gt, k = (draw(st.integers(0, 6)) for _ in range(3))
    a2r = draw(st.lists(labels, min_size=n_resp, max_size=n_resp))
    r2a = draw(st.lists(labels, min_size=n_gt, max_size=n_gt))
    row = st.lists(labels, min_size=k, max_size=k)
    ret2resp = draw(st.lists(row, min_size=n_resp, max_size=n_resp))
    ret2ans = draw(st.lists(row, min_size=n_gt, max_size=n_gt))
    return _record(a2r, r2a, ret2resp, ret2ans, k=k)


def _appendix_b(rec):
    m = range(len(rec["response_claims"]))
    g = range(len(rec["gt_answer_claims"]))
    chunks = range(len(rec["retrieved_context"]))
    correct = {i for i in m if rec["answer2response"][i] == E}
    in_chunk = {i: {c for c in chunks if rec["retrieved2response"][i][c] == E} for i in m}
    gt_in_chunk = {j: {c for c in chunks if rec["retrieved2answer"][j][c] == E} for j in g}
    covered = {j for j in g if rec["response2answer"][j] == E}
    r_chunks = set().union(*gt_in_chunk.values()) if gt_in_chunk else set()
    recalled = {j for j in g if gt_in_chunk[j]}

    def frac(sub, whole):
        return 100 * len(sub) / len(whole) if whole else 0.0

    p, r = frac(correct, m), frac(covered, g)
    ns_rel = {i for i in m if i not in correct and in_chunk[i] & r_chunks}
    return {
        "precision": p,
        "recall": r,
        "f1": 2 * p * r / (p + r) if p and r else 0.0,
        "claim_recall": frac(recalled, g),
        "context_precision": frac(r_chunks, chunks),
        "context_utilization": frac(recalled & covered, recalled),
        "noise_sensitivity_in_relevant": frac(ns_rel, m),
        # with no gt claims RAGChecker's code gives 0 (not the literal formula's share): see
        # test_noise_sensitivity_without_gt_claims_is_ragcheckers
        "noise_sensitivity_in_irrelevant": frac(
            {i for i in m if i not in correct and in_chunk[i] - r_chunks and i not in ns_rel}, m
        ) if g else 0.0,
        "hallucination": frac({i for i in m if i not in correct and not in_chunk[i]}, m),
        "self_knowledge": frac({i for i in m if i in correct and not in_chunk[i]}, m),
        "faithfulness": frac({i for i in m if in_chunk[i]}, m),
    }


@settings(max_examples=300, deadline=None)
@given(records())
def test_matches_literal_appendix_b_and_partitions(rec):
    m = compute_example_metrics(rec)
    ref = _appendix_b(rec)
    for name in METRICS:
        assert m[name] == pytest.approx(ref[name]), name
        assert 0 <= m[name] <= 100
    if rec["response_claims"]:
        # every response claim is faithful, a hallucination or self-knowledge ...
        assert m["faithfulness"] + m["hallucination"] + m["self_knowledge"] == pytest.approx(100)
    if rec["response_claims"] and rec["gt_answer_claims"]:
        # ... and every incorrect one is relevant noise, irrelevant noise or a hallucination
        # (not without gt claims, where RAGChecker's code zeroes both noise sensitivities)
        incorrect = (m["noise_sensitivity_in_relevant"] + m["noise_sensitivity_in_irrelevant"]
                     + m["hallucination"])
        assert incorrect == pytest.approx(100 - m["precision"])


def _ragchecker_noise_sensitivity(rec):
    """RAGChecker's ``evaluate_noise_sensitivity`` (amazon-science/RAGChecker
    ``ragchecker/computation.py`` at 6091f08c00e676e87a970f2aeb4a23a484746348, Apache-2.0),
    transcribed line for line on plain numpy as the reference implementation."""
    import numpy as np

    def to_bool(res):
        if isinstance(res, str):
            return res == "Entailment"
        return np.array([to_bool(r) for r in res])

    retrieved2response = to_bool(rec["retrieved2response"])
    answer2response = to_bool(rec["answer2response"])
    retrieved2answer = to_bool(rec["retrieved2answer"])
    if len(answer2response) > 0 and len(retrieved2response[0]) > 0 and len(retrieved2answer) > 0:
        relevant_retrieved = np.max(retrieved2answer, axis=0, keepdims=True)
        relevant_faithful = np.max(relevant_retrieved & retrieved2response, axis=1)
        irrelevant_retrieved = ~np.max(retrieved2answer, axis=0, keepdims=True)
        irrelevant_faithful = np.max(irrelevant_retrieved & retrieved2response, axis=1)
        irrelevant_faithful &= ~relevant_faithful
        incorrect = ~answer2response
        return float(np.mean(relevant_faithful & incorrect)), float(np.mean(irrelevant_faithful & incorrect))
    return 0.0, 0.0


@pytest.mark.parametrize("index", range(len(GOLDEN["results"])))
def test_noise_sensitivity_without_gt_claims_is_ragcheckers(index):
    # RAGChecker's example records with a ground truth that yields no claims: every chunk is
    # irrelevant, but RAGChecker's code gives 0 to both noise sensitivities (its guard
    # len(retrieved2answer) > 0 fails) - and so does ragsweep
    rec = copy.deepcopy(GOLDEN["results"][index])
    rec.update(gt_answer_claims=[], response2answer=[], retrieved2answer=[])
    rec.pop("metrics", None)
    ours = compute_example_metrics(rec, scale=1.0)
    rel, irr = _ragchecker_noise_sensitivity(rec)
    assert (ours["noise_sensitivity_in_relevant"], ours["noise_sensitivity_in_irrelevant"]) == (rel, irr) == (0.0, 0.0)
    # the same records with their claims agree with the transcription too (and with the file)
    full = GOLDEN["results"][index]
    rel, irr = _ragchecker_noise_sensitivity(full)
    ours = compute_example_metrics(full, scale=1.0)
    assert ours["noise_sensitivity_in_relevant"] == pytest.approx(rel)
    assert ours["noise_sensitivity_in_irrelevant"] == pytest.approx(irr)
    # a response that some chunk entails and the gt does not: still 0, not the share of such claims
    assert any(any(lab == E for lab in row) for row in rec["retrieved2response"])
    assert any(lab != E for lab in rec["answer2response"])
