"""Retrieval metrics from span relevance (pure functions).

A query's relevance is a set of character spans ``(doc_id, start, end)``; a retrieved chunk is
*relevant* when it overlaps at least one span (:func:`ragsweep.types.is_relevant`). Hits are
taken in list order (rank 1 first); only the first ``k`` count.

- ``recall@k``    = fraction of the query's relevant *spans* that overlap at least one of the
  top-k chunks (span-level, so it does not depend on how many chunks a span was cut into).
- ``precision@k`` = relevant chunks among the top-k / k (``k`` as asked, as in trec_eval).
- ``mrr@k``       = 1 / rank of the first relevant chunk in the top-k, 0 when there is none.
- ``ndcg@k``      = binary-gain nDCG: DCG = sum over relevant top-k ranks r of 1/log2(r+1);
  ideal DCG = the same for ``min(R, k)`` relevant chunks at ranks 1..min(R, k), where R is the
  number of distinct relevant chunks that exist. R is counted over the whole chunk list when
  ``chunks`` (or ``n_relevant``) is given - the correct choice; without it R falls back to the
  number of relevant chunks among the hits given (all of them, not only the top k), which
  overestimates nDCG when relevant chunks were missed entirely. 0 when R is 0.
- ``hit@k``       = 1 when any top-k chunk is relevant.

Queries without relevance spans are skipped (they have no labels, not zero scores).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Iterable, Mapping, Sequence

from ragsweep.types import Chunk, Hit, Query, Span, is_relevant, overlaps

METRICS = ("recall", "precision", "mrr", "ndcg", "hit")


def _chunk(h: Hit | Chunk) -> Chunk:
    return h.chunk if isinstance(h, Hit) else h


def _top(hits: Sequence[Hit | Chunk], k: int) -> list[Chunk]:
    if k < 1:
        raise ValueError(f"k ({k}) must be >= 1")
    return [_chunk(h) for h in list(hits)[:k]]


def recall_at_k(hits: Sequence[Hit | Chunk], spans: Sequence[Span], k: int) -> float:
    """Fraction of ``spans`` that overlap at least one of the top-``k`` chunks."""
    spans = list(dict.fromkeys(spans))
    if not spans:
        return 0.0
    top = _top(hits, k)
    return sum(any(overlaps(c, s) for c in top) for s in spans) / len(spans)


def precision_at_k(hits: Sequence[Hit | Chunk], spans: Sequence[Span], k: int) -> float:
    """Relevant chunks among the top-``k``, divided by ``k``."""
    return sum(is_relevant(c, spans) for c in _top(hits, k)) / k


def mrr_at_k(hits: Sequence[Hit | Chunk], spans: Sequence[Span], k: int) -> float:
    """1 / rank of the first relevant chunk within the top-``k``; 0 when none."""
    for r, c in enumerate(_top(hits, k), start=1):
        if is_relevant(c, spans):
            return 1.0 / r
    return 0.0


def hit_at_k(hits: Sequence[Hit | Chunk], spans: Sequence[Span], k: int) -> float:
    return float(any(is_relevant(c, spans) for c in _top(hits, k)))


def ndcg_at_k(hits: Sequence[Hit | Chunk], spans: Sequence[Span], k: int, n_relevant: int | None = None) -> float:
    """Binary-gain nDCG@k; ``n_relevant`` = relevant chunks in the whole chunk list (see module doc)."""
    top = _top(hits, k)
    dcg = sum(1.0 / math.log2(r + 1) for r, c in enumerate(top, start=1) if is_relevant(c, spans))
    if n_relevant is None:
        n_relevant = len({(c.doc_id, c.start, c.end) for c in map(_chunk, hits) if is_relevant(c, spans)})
    ideal = sum(1.0 / math.log2(r + 1) for r in range(1, min(n_relevant, k) + 1))
    return dcg / ideal if ideal > 0 else 0.0


def count_relevant(chunks: Iterable[Chunk], spans: Sequence[Span]) -> int:
    """Distinct chunks (by doc_id, start, end) that overlap any span."""
    return len({(c.doc_id, c.start, c.end) for c in chunks if is_relevant(c, spans)})


def query_metrics(
    hits: Sequence[Hit | Chunk], spans: Sequence[Span], k: int, n_relevant: int | None = None
) -> dict[str, float]:
    """All metrics of one query, keyed ``"recall@k"`` etc."""
    return {
        f"recall@{k}": recall_at_k(hits, spans, k),
        f"precision@{k}": precision_at_k(hits, spans, k),
        f"mrr@{k}": mrr_at_k(hits, spans, k),
        f"ndcg@{k}": ndcg_at_k(hits, spans, k, n_relevant),
        f"hit@{k}": hit_at_k(hits, spans, k),
    }


def retrieval_metrics_per_query(
    results: Mapping[str, Sequence[Hit | Chunk]],
    queries: Sequence[Query],
    k: int,
    chunks: Sequence[Chunk] | None = None,
) -> dict[str, dict[str, float]]:
    """Metrics per query id, for queries that have relevance spans (a missing result = no hits)."""
    by_doc: dict[str, list[Chunk]] | None = None
    if chunks is not None:
        by_doc = defaultdict(list)
        if hasattr(chunks, "of_docs"):  # a chunk file: only the relevant documents' chunks are read
            chunks = [c for _, c in chunks.of_docs({s.doc_id for q in queries for s in q.relevant})]
        for c in chunks:
            by_doc[c.doc_id].append(c)
    out: dict[str, dict[str, float]] = {}
    for q in queries:
        if not q.relevant:
            continue
        n_rel = None
        if by_doc is not None:
            docs = {s.doc_id for s in q.relevant}
            n_rel = count_relevant((c for d in docs for c in by_doc.get(d, ())), q.relevant)
        out[q.query_id] = query_metrics(results.get(q.query_id, []), q.relevant, k, n_rel)
    return out


def retrieval_metrics(
    results: Mapping[str, Sequence[Hit | Chunk]],
    queries: Sequence[Query],
    k: int,
    chunks: Sequence[Chunk] | None = None,
) -> dict[str, float]:
    """Mean of every metric over the queries with relevance; ``{}`` when none has any."""
    per = retrieval_metrics_per_query(results, queries, k, chunks)
    if not per:
        return {}
    keys = next(iter(per.values())).keys()
    return {key: sum(m[key] for m in per.values()) / len(per) for key in keys}


def evaluated_queries(queries: Sequence[Query]) -> int:
    """How many queries carry relevance spans (the denominator of the means)."""
    return sum(1 for q in queries if q.relevant)


__all__ = [
    "recall_at_k",
    "precision_at_k",
    "mrr_at_k",
    "ndcg_at_k",
    "hit_at_k",
    "count_relevant",
    "query_metrics",
    "retrieval_metrics",
    "retrieval_metrics_per_query",
    "evaluated_queries",
]
