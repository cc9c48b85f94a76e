"""Retrieval benchmark on ClapNQ dev: chunking + index + search time per retriever, and the check
that both BM25 backends give identical rankings.

    python experiments/bench_retrieval.py                       # all 600 passages, 20 questions
    python experiments/bench_retrieval.py --queries 300 --skip-dense --out bench.json
    python experiments/bench_retrieval.py --data DIR            # ClapNQ files from DIR instead

By default it reads the ClapNQ dev files shipped inside the package (the built-in dataset);
``--data DIR`` points at a folder holding ``clapnq_dev_answerable.jsonl`` and
``clapnq_dev_unanswerable.jsonl``.

Passages of answerable and unanswerable questions together form the corpus (as in RAGChecker's
ClapNQ setup); questions are the first N answerable ones. Chunked with TokenChunker defaults
(300 tokens, 20% overlap, minilm tokenizer).

SciFact (BEIR format, read from a path; CC BY-NC, not shipped) with the rerankers:

    python experiments/bench_retrieval.py --scifact ../shared/data/scifact [--queries N] [--cache DIR]

prints nDCG@10, R@100 and queries/s for bm25, dense, hybrid (rrf and weighted 0.5, their YAML
defaults) and each reranker on top of bm25 and both hybrids (reranker YAML defaults: depth 50,
bundled MiniLM; cross_encoder needs the hub). One chunk per abstract (title + text), as in
BEIR. queries/s: search (+ rerank) over all queries, the corpus already indexed (its embeddings
from ``--cache`` when given); nothing is tuned here. Only the train qrels are in the shared copy:
the published references (BM25 flat 0.679 / R@100 0.925) are on the test queries.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from ragsweep.chunker import TokenChunker
from ragsweep.retriever.base import rank_top_k
from ragsweep.retriever.bm25 import BM25Retriever
from ragsweep.retriever.tfidf import TfidfRetriever
from ragsweep.types import Document, Query

FILES = ("clapnq_dev_answerable.jsonl", "clapnq_dev_unanswerable.jsonl")


def builtin_clapnq() -> Path:
    import importlib.resources as resources

    return Path(str(resources.files("ragsweep") / "dataset" / "builtin" / "clapnq"))


def load(n_queries: int, data: Path) -> tuple[list[Document], list[Query]]:
    missing = [name for name in FILES if not (data / name).is_file()]
    if missing:
        sys.exit(f"bench_retrieval: --data {data}: missing {', '.join(missing)}; point --data at a folder holding "
                 f"both ClapNQ dev files, or leave it out to use the copy shipped with ragsweep")
    docs, queries = [], []
    for name in FILES:
        with open(data / name, encoding="utf-8") as f:
            for line in f:
                rec = json.loads(line)
                for i, p in enumerate(rec["passages"]):
                    docs.append(Document(f"{rec['id']}-{i}", p["text"], p.get("title")))
                if "unanswerable" not in name and len(queries) < n_queries:
                    queries.append(Query(str(rec["id"]), rec["input"]))
    return docs, queries


def scifact(folder: Path, n_queries: int | None, cache_dir: str | None, split: str = "train") -> dict:
    """Retrievers and rerankers on SciFact: nDCG@10, R@100, queries/s (see the module docstring)."""
    from experiments.meta_eval.scifact_retrieval import load as load_scifact, ndcg_at, recall_at
    from ragsweep.cache import Cache
    from ragsweep.retriever.dense import DenseRetriever
    from ragsweep.retriever.hybrid import HybridRetriever
    from ragsweep.retriever.rerank import CrossEncoderReranker, EmbeddingReranker

    chunks, queries, qrels = load_scifact(folder, split, n_queries)
    cache = Cache(cache_dir) if cache_dir else None
    dense = {"model": "minilm", "device": "cpu"}
    firsts = {
        "bm25": BM25Retriever(),
        "dense": DenseRetriever(**dense),
        "hybrid:rrf": HybridRetriever(dense=dense),
        "hybrid:weighted-0.5": HybridRetriever(fusion="weighted", weight=0.5, dense=dense),
    }
    rerankers = {"embedding": lambda: EmbeddingReranker(device="cpu"), "cross_encoder": lambda: CrossEncoderReranker()}
    out: dict = {"dataset": f"scifact {split}", "queries": len(queries), "corpus": len(chunks), "rows": {}}

    def score(results: dict) -> tuple[float, float]:
        nd = [ndcg_at([h.chunk.doc_id for h in results[q.query_id]], qrels[q.query_id], 10) for q in queries]
        rc = [recall_at([h.chunk.doc_id for h in results[q.query_id]], qrels[q.query_id], 100) for q in queries]
        return sum(nd) / len(nd), sum(rc) / len(rc)

    for name, r in firsts.items():
        r.index(chunks, cache=cache)
        t = time.perf_counter()
        base = r.search(queries, 100)  # no cache for the rankings: the time is the search's
        secs = time.perf_counter() - t
        nd, rc = score(base)
        out["rows"][name] = {"ndcg@10": round(nd, 4), "recall@100": round(rc, 4), "queries_per_s": round(len(queries) / secs, 1)}
        if name == "dense":
            continue
        for rname, make in rerankers.items():
            try:
                rr = make()
            except Exception as exc:  # noqa: BLE001 - cross_encoder offline: its own message
                out["rows"][f"{name}+{rname}"] = {"error": str(exc).splitlines()[0][:300]}
                continue
            t = time.perf_counter()
            top = rr.rerank(queries, base, rr.depth, cache=cache)
            secs_rr = time.perf_counter() - t
            # R@100: the reranked first `depth`, then the first stage's order below it
            merged = {q.query_id: top[q.query_id] + base[q.query_id][rr.depth:] for q in queries}
            nd, rc = score(merged)
            out["rows"][f"{name}+{rname}"] = {"ndcg@10": round(nd, 4), "recall@100": round(rc, 4),
                                             "queries_per_s": round(len(queries) / (secs + secs_rr), 1), "depth": rr.depth}
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=None, help="folder with the ClapNQ dev files (default: the built-in copy)")
    ap.add_argument("--queries", type=int, default=None, help="questions (ClapNQ default 20; SciFact default all)")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--skip-dense", action="store_true")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--scifact", type=Path, help="SciFact folder (BEIR format): retrievers + rerankers, nDCG@10/R@100/queries/s")
    ap.add_argument("--cache", help="cache folder for --scifact (corpus embeddings are reused across runs)")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.scifact:
        out = scifact(args.scifact, args.queries, args.cache)
        print(json.dumps(out, indent=2))
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(out, indent=2) + "\n")
        return {**out, "bm25.identical_top_k": True}

    docs, queries = load(args.queries or 20, args.data or builtin_clapnq())
    t = time.perf_counter()
    chunks = TokenChunker().chunk(docs)
    out: dict = {"documents": len(docs), "chunks": len(chunks), "queries": len(queries), "k": args.k}
    out["chunking_s"] = round(time.perf_counter() - t, 3)

    retrievers = {
        "tfidf": TfidfRetriever(),
        "bm25[bm25s]": BM25Retriever(backend="bm25s"),
        "bm25[rank_bm25]": BM25Retriever(backend="rank_bm25"),
    }
    if not args.skip_dense:
        from ragsweep.retriever.dense import DenseRetriever

        retrievers["dense"] = DenseRetriever()
    results = {}
    for name, r in retrievers.items():
        t = time.perf_counter()
        r.index(chunks)
        t_index = time.perf_counter() - t
        t = time.perf_counter()
        results[name] = r.search(queries, args.k)
        out[f"{name}.index_s"] = round(t_index, 3)
        out[f"{name}.search_s"] = round(time.perf_counter() - t, 3)

    a, b = results["bm25[bm25s]"], results["bm25[rank_bm25]"]
    ids = lambda hits: [h.chunk.chunk_id for h in hits]  # noqa: E731
    differ = [q.query_id for q in queries if ids(a[q.query_id]) != ids(b[q.query_id])]
    ra, rb = retrievers["bm25[bm25s]"], retrievers["bm25[rank_bm25]"]
    full_same = all(
        np.array_equal(rank_top_k(ra.scores(q.query), len(chunks))[0], rank_top_k(rb.scores(q.query), len(chunks))[0])
        for q in queries
    )
    max_diff = max(float(np.max(np.abs(ra.scores(q.query) - rb.scores(q.query)))) for q in queries)
    out["bm25.identical_top_k"] = not differ
    out["bm25.queries_differing"] = differ
    out["bm25.identical_full_ranking"] = full_same
    out["bm25.max_abs_score_diff"] = max_diff
    print(json.dumps(out, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    sys.exit(0 if main()["bm25.identical_top_k"] else 1)
