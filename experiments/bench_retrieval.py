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


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=None, help="folder with the ClapNQ dev files (default: the built-in copy)")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--skip-dense", action="store_true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")

    docs, queries = load(args.queries, args.data or builtin_clapnq())
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
