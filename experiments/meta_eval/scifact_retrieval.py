"""SciFact retrieval (BEIR format): nDCG@10 and R@100 of ragsweep's retrievers.

Data: ``scifact/corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv`` (CC BY-NC 2.0; only the
train qrels are in the shared copy, so numbers are on the train queries). One chunk per abstract,
text = title + " " + abstract (BEIR's convention). nDCG@10 with the qrels' graded scores
(SciFact's are all 1) and log2 discount; R@100 = relevant documents in the top 100 / relevant
documents. Reference: Anserini BM25 flat on the *test* split, nDCG@10 0.679, R@100 0.925
(published, not rerun; a different query set).

``--retrievers`` picks which to run (default: tfidf, bm25 with both backends, dense MiniLM, and
hybrid BM25 + dense fused by RRF and by weighted scores at weight 0.5, both at their defaults).
``--checker`` is accepted for a uniform command line and ignored.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from experiments.meta_eval import common as C

NAME = "scifact_retrieval"
RETRIEVERS = {
    "tfidf": ("ragsweep.rag.retriever.tfidf", "TfidfRetriever", {}),
    "bm25:rank_bm25": ("ragsweep.rag.retriever.bm25", "BM25Retriever", {"backend": "rank_bm25"}),
    "bm25:bm25s": ("ragsweep.rag.retriever.bm25", "BM25Retriever", {"backend": "bm25s"}),
    "dense": ("ragsweep.rag.retriever.dense", "DenseRetriever", {"model": "minilm", "device": "cpu"}),
    # the YAML defaults (not tuned here): RRF with rrf_k 60, and weighted fusion at weight 0.5
    "hybrid:rrf": ("ragsweep.rag.retriever.hybrid", "HybridRetriever", {"dense": {"model": "minilm", "device": "cpu"}}),
    "hybrid:weighted-0.5": ("ragsweep.rag.retriever.hybrid", "HybridRetriever",
                            {"fusion": "weighted", "weight": 0.5, "dense": {"model": "minilm", "device": "cpu"}}),
}


def load(folder: Path, split: str, limit: int | None = None) -> tuple[list[Any], list[Any], dict[str, dict[str, int]]]:
    from ragsweep.types import Chunk, Query

    qrels: dict[str, dict[str, int]] = {}
    with open(folder / "qrels" / f"{split}.tsv", newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    chunks = []
    for d in C.load_json_or_jsonl(folder / "corpus.jsonl"):
        text = (d.get("title", "") + " " + d.get("text", "")).strip()
        chunks.append(Chunk(chunk_id=str(d["_id"]), doc_id=str(d["_id"]), start=0, end=len(text), text=text))
    queries = [Query(query_id=str(q["_id"]), query=q["text"]) for q in C.load_json_or_jsonl(folder / "queries.jsonl")
               if str(q["_id"]) in qrels]
    if limit:
        queries = queries[:limit]
    return chunks, queries, qrels


def ndcg_at(ranked: list[str], rel: dict[str, int], k: int) -> float:
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(rel.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(ranked: list[str], rel: dict[str, int], k: int) -> float:
    pos = {d for d, g in rel.items() if g > 0}
    return len(pos & set(ranked[:k])) / len(pos) if pos else 0.0


def evaluate(retriever: Any, chunks: list[Any], queries: list[Any], qrels: dict[str, dict[str, int]],
             cache: Any = None) -> dict[str, float]:
    t = time.time()
    retriever.index(chunks, cache=cache)
    k = min(100, len(chunks))
    hits = retriever.search(queries, k, cache=cache)
    nd, rc = [], []
    for q in queries:
        ranked = [h.chunk.doc_id for h in hits[q.query_id]]
        nd.append(ndcg_at(ranked, qrels[q.query_id], 10))
        rc.append(recall_at(ranked, qrels[q.query_id], 100))
    return {"ndcg@10": sum(nd) / len(nd), "recall@100": sum(rc) / len(rc), "seconds": time.time() - t}


def run(args: argparse.Namespace) -> str:
    folder = C.find_data(args.data, "scifact", "corpus.jsonl")
    if not (folder / "qrels" / f"{args.split}.tsv").is_file():
        raise C.Skip(f"no qrels/{args.split}.tsv under {folder}")
    chunks, queries, qrels = load(folder, args.split, args.limit)
    C.set_threads(args.threads)
    cache = C.open_cache(args.cache)
    import importlib
    import warnings

    rows = []
    for name in [r.strip() for r in args.retrievers.split(",") if r.strip()]:
        if name not in RETRIEVERS:
            raise SystemExit(f"unknown retriever {name!r}; choose from {', '.join(RETRIEVERS)}")
        mod, cls, kw = RETRIEVERS[name]
        try:
            retriever = getattr(importlib.import_module(mod), cls)(**kw)
        except (ImportError, AttributeError) as exc:
            rows.append([name, None, None, f"not available: {exc}"])
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = evaluate(retriever, chunks, queries, qrels, cache)
        rows.append([name, res["ndcg@10"], res["recall@100"], f"{res['seconds']:.0f}"])
    rows.append(["Anserini BM25 flat (published, test split)", 0.679, 0.925, "-"])
    lines = [
        f"## SciFact retrieval ({args.split} queries: {len(queries)}, corpus: {len(chunks)} abstracts, one chunk each)",
        "",
        C.md_table(["retriever", "nDCG@10", "R@100", "seconds (index+search, cache as found)"], rows, digits=3),
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = C.parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--split", default="train", help="qrels split (default train: the only one in the shared copy)")
    p.add_argument("--retrievers", default=",".join(RETRIEVERS), help="comma-separated: " + ", ".join(RETRIEVERS))
    return C.run_main(NAME, run, p, argv)


if __name__ == "__main__":
    sys.exit(main())
