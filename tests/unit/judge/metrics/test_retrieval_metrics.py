from __future__ import annotations

import math

import pytest

from ragsweep.judge.metrics.retrieval import (
    count_relevant,
    hit_at_k,
    mrr_at_k,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
    retrieval_metrics,
    retrieval_metrics_per_query,
)
from ragsweep.types import Chunk, Hit, Query, Span


def ch(doc: str, start: int, end: int) -> Chunk:
    return Chunk(f"{doc}:{start}", doc, start, end, "x" * (end - start))


# document d cut into 10-character chunks; another document e
C0, C1, C2, C3, C4 = (ch("d", s, s + 10) for s in range(0, 50, 10))
E0 = ch("e", 0, 10)
CHUNKS = [C0, C1, C2, C3, C4, E0]
S1 = Span("d", 12, 15)  # inside C1
S2 = Span("d", 35, 45)  # across C3 and C4
SPANS = (S1, S2)


def hits(*chunks: Chunk) -> list[Hit]:
    return [Hit(c, 1.0 / r, r) for r, c in enumerate(chunks, start=1)]


RANKED = hits(E0, C1, C0, C4)  # relevant at ranks 2 and 4


def test_recall_is_span_level():
    assert recall_at_k(RANKED, SPANS, 4) == 1.0  # S1 via C1, S2 via C4
    assert recall_at_k(RANKED, SPANS, 2) == 0.5
    assert recall_at_k(RANKED, SPANS, 1) == 0.0
    assert recall_at_k(hits(C3, C4), SPANS, 2) == 0.5  # two chunks of one span count once
    assert recall_at_k(RANKED, (), 4) == 0.0


def test_precision_mrr_hit():
    assert precision_at_k(RANKED, SPANS, 4) == 0.5
    assert precision_at_k(RANKED, SPANS, 2) == 0.5
    assert precision_at_k(RANKED, SPANS, 1) == 0.0
    assert precision_at_k(hits(C1), SPANS, 4) == 0.25  # divided by k, not by the hits returned
    assert mrr_at_k(RANKED, SPANS, 4) == 0.5
    assert mrr_at_k(RANKED, SPANS, 1) == 0.0
    assert hit_at_k(RANKED, SPANS, 1) == 0.0 and hit_at_k(RANKED, SPANS, 2) == 1.0


def test_ndcg_binary_gains():
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    # C1, C3, C4 are the relevant chunks of the whole list: ideal = 3 hits at ranks 1-3
    assert count_relevant(CHUNKS, SPANS) == 3
    ideal3 = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at_k(RANKED, SPANS, 4, n_relevant=3) == pytest.approx(dcg / ideal3)
    assert ndcg_at_k(RANKED, SPANS, 4, n_relevant=3) == pytest.approx(0.498189, abs=1e-6)
    # without the chunk list, R = relevant chunks among the hits given (C1, C4)
    assert ndcg_at_k(RANKED, SPANS, 4) == pytest.approx(dcg / (1 + 1 / math.log2(3)))
    # the ideal is capped at k
    assert ndcg_at_k(hits(C1), SPANS, 1, n_relevant=3) == 1.0
    assert ndcg_at_k(hits(E0, C1), SPANS, 2, n_relevant=3) == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    assert ndcg_at_k(hits(E0), SPANS, 1, n_relevant=0) == 0.0
    assert ndcg_at_k(hits(C1, C3, C4), SPANS, 3, n_relevant=3) == pytest.approx(1.0)


def test_chunks_accepted_in_place_of_hits():
    assert recall_at_k([E0, C1, C0, C4], SPANS, 4) == 1.0
    assert mrr_at_k([E0, C1], SPANS, 2) == 0.5


def test_aggregate_and_per_query():
    queries = [
        Query("q1", "first", relevant=SPANS),
        Query("q2", "second", relevant=(Span("d", 0, 5),)),
        Query("q3", "no labels"),  # skipped
        Query("q4", "no results", relevant=(Span("e", 0, 1),)),  # missing from results: all zeros
    ]
    results = {"q1": RANKED, "q2": hits(C0, C1, C2, C3), "q3": hits(C0)}
    per = retrieval_metrics_per_query(results, queries, 4, chunks=CHUNKS)
    assert set(per) == {"q1", "q2", "q4"}
    assert per["q1"] == {
        "recall@4": 1.0,
        "precision@4": 0.5,
        "mrr@4": 0.5,
        "ndcg@4": pytest.approx(0.498189, abs=1e-6),
        "hit@4": 1.0,
    }
    assert per["q2"] == {"recall@4": 1.0, "precision@4": 0.25, "mrr@4": 1.0, "ndcg@4": 1.0, "hit@4": 1.0}
    assert all(v == 0.0 for v in per["q4"].values())

    agg = retrieval_metrics(results, queries, 4, chunks=CHUNKS)
    assert set(agg) == {"recall@4", "precision@4", "mrr@4", "ndcg@4", "hit@4"}
    assert agg["recall@4"] == pytest.approx(2 / 3)
    assert agg["precision@4"] == pytest.approx(0.75 / 3)
    assert agg["mrr@4"] == pytest.approx(1.5 / 3)
    assert agg["ndcg@4"] == pytest.approx((0.498189 + 1.0) / 3, abs=1e-6)

    assert retrieval_metrics(results, [Query("q", "unlabelled")], 4) == {}
    with pytest.raises(ValueError):
        recall_at_k(RANKED, SPANS, 0)


def test_per_question_retrieval_metrics_at_k_and_at_fixed_cutoffs_up_to_the_depth():
    from ragsweep.pipeline.stages import retrieval_per_question as _retrieval_per_question

    order = [C2, C0, C1, C3, C4, E0]  # the relevant chunk C0 at rank 2
    results = {"q1": [Hit(c, 1.0 - r / 10, r + 1) for r, c in enumerate(order)]}
    queries = [Query("q1", "what", relevant=(Span("d", 0, 5),))]
    per = _retrieval_per_question(results, queries, 6, CHUNKS)["q1"]
    assert set(per) == {f"retrieval/{m}_at_{c}" for m in ("recall", "precision", "mrr", "ndcg", "hit") for c in ("k", "1", "5")}
    assert per["retrieval/hit_at_1"] == 0.0 and per["retrieval/hit_at_5"] == 1.0 and per["retrieval/mrr_at_k"] == 0.5
    assert per["retrieval/precision_at_5"] == pytest.approx(1 / 5) and per["retrieval/precision_at_k"] == pytest.approx(1 / 6)
