"""BM25 rankings with the float32 bm25s index vs float64 and the rank_bm25 reference on SciFact.

    python experiments/benchmarks/bm25_float32_scifact.py /work/shared/data/scifact

Chunks SciFact (chunker defaults: 300 tokens, 0.2 overlap), indexes it three ways, ranks every
test question to depth 100 and prints how many rankings are identical, and nDCG@10 / recall@10
(mean over questions with a 95% bootstrap interval and n).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from ragsweep.corpus.chunker import TokenChunker
from ragsweep.corpus.dataset import BeirDataset
from ragsweep.judge.metrics.retrieval import retrieval_metrics_per_query
from ragsweep.rag.retriever.bm25 import BM25Retriever


def interval(values: list[float], seed: int = 0) -> tuple[float, float, float]:
    v = np.asarray(values)
    rng = np.random.default_rng(seed)
    boots = rng.choice(v, size=(2000, len(v)), replace=True).mean(axis=1)
    return float(v.mean()), float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def main(path: str) -> None:
    ds = BeirDataset(path=path, split="train").load()
    chunks = TokenChunker().chunk(ds.documents)
    print(f"SciFact: {len(ds.documents)} documents, {len(chunks)} chunks, {len(ds.queries)} questions")
    runs = {}
    for label, kw in (("rank_bm25 (reference)", {"backend": "rank_bm25"}),
                      ("bm25s float64", {"backend": "bm25s", "dtype": "float64"}),
                      ("bm25s float32 (default)", {"backend": "bm25s", "dtype": "float32"})):
        r = BM25Retriever(**kw)
        t = time.perf_counter()
        r.index(chunks)
        res = r.search(ds.queries, k=100)
        runs[label] = (res, time.perf_counter() - t)
    ref = runs["rank_bm25 (reference)"][0]
    for label, (res, secs) in runs.items():
        same = sum([h.chunk.chunk_id for h in res[q.query_id]] == [h.chunk.chunk_id for h in ref[q.query_id]]
                   for q in ds.queries)
        per = retrieval_metrics_per_query(res, ds.queries, 10, chunks)
        nd = interval([m["ndcg@10"] for m in per.values()])
        rc = interval([m["recall@10"] for m in per.values()])
        print(f"{label:<24} rankings identical to the reference (top 100): {same}/{len(ds.queries)}; "
              f"nDCG@10 {nd[0]:.4f} [{nd[1]:.4f}, {nd[2]:.4f}] recall@10 {rc[0]:.4f} [{rc[1]:.4f}, {rc[2]:.4f}] "
              f"(n={len(per)}); index+search {secs:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/work/shared/data/scifact")
