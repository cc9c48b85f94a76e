"""Retrieval benchmark on ClapNQ dev: chunking + index + search time per retriever, and the check
that both BM25 backends give identical rankings.

    python experiments/benchmarks/bench_retrieval.py                       # all 600 passages, 20 questions
    python experiments/benchmarks/bench_retrieval.py --queries 300 --skip-dense --out bench.json
    python experiments/benchmarks/bench_retrieval.py --data DIR            # ClapNQ files from DIR instead

By default it reads the ClapNQ dev files shipped inside the package (the built-in dataset);
``--data DIR`` points at a folder holding ``clapnq_dev_answerable.jsonl`` and
``clapnq_dev_unanswerable.jsonl``.

Passages of answerable and unanswerable questions together form the corpus (as in RAGChecker's
ClapNQ setup); questions are the first N answerable ones. Chunked with TokenChunker defaults
(300 tokens, 20% overlap, minilm tokenizer).

SciFact (BEIR format, read from a path; CC BY-NC, not shipped):

    python experiments/benchmarks/bench_retrieval.py --scifact ../shared/data/scifact [--queries N] [--cache DIR] [--systems bm25,dense]

runs every system of ``+experiment=scifact_retrieval`` (tfidf, bm25, dense, hybrid, each with
reranker none and embedding) through the pipeline itself (``ragsweep.pipeline.system.run_system`` with
generator=none, evaluator=none: the code path of ``ragsweep -m +experiment=scifact_retrieval``)
and prints nDCG@10 and R@100 per system with their 95% intervals over queries, n and queries/s.
One chunk per abstract ("title text"), as in BEIR; the reranker re-scores all 100 hits.
Only the train qrels are in the shared copy: the published references (BM25 flat 0.679 /
R@100 0.925) are on the test queries.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from ragsweep.corpus.chunker import TokenChunker
from ragsweep.rag.retriever.base import rank_top_k
from ragsweep.rag.retriever.bm25 import BM25Retriever
from ragsweep.rag.retriever.tfidf import TfidfRetriever
from ragsweep.types import Document, Query

FILES = ("clapnq_dev_answerable.jsonl", "clapnq_dev_unanswerable.jsonl")


def builtin_clapnq() -> Path:
    import importlib.resources as resources

    return Path(str(resources.files("ragsweep") / "corpus" / "dataset" / "builtin" / "clapnq"))


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


def scifact_systems(reranker_depth: int) -> list[tuple[str, list[str]]]:
    """The grid of ``+experiment=scifact_retrieval`` (its ``hydra.sweeper.params``) as (label, overrides);
    a reranker re-scores ``reranker_depth`` hits (all of the first stage's k by default)."""
    import itertools

    from omegaconf import OmegaConf

    from ragsweep.pipeline.config import CONF_DIR

    params = OmegaConf.load(CONF_DIR / "experiment" / "scifact_retrieval.yaml").hydra.sweeper.params
    keys = list(params)
    grid = [[v.strip() for v in str(params[k]).split(",")] for k in keys]
    out = []
    for values in itertools.product(*grid):
        ov = [f"{k}={v}" for k, v in zip(keys, values)]
        choice = dict(zip(keys, values))
        if choice.get("reranker", "none") != "none":
            ov.append(f"reranker.depth={reranker_depth}")
        label = choice.get("retriever", "?") + ("" if choice.get("reranker", "none") == "none" else f"+{choice['reranker']}")
        out.append((label, ov))
    return out


def scifact(folder: Path, n_queries: int | None, cache_dir: str | None, split: str = "train",
            only: list[str] | None = None) -> dict:
    """Every system of ``+experiment=scifact_retrieval`` through :func:`ragsweep.pipeline.system.run_system`
    (generator=none, evaluator=none): the code path of ``ragsweep -m +experiment=scifact_retrieval``,
    its dataset loader, chunker, retrievers, rerankers and retrieval metrics; nDCG@10 and R@100 are
    the runs' ``retrieval/ndcg_at_10`` and ``retrieval/recall_at_k`` (k = 100) with their 95%
    intervals over queries. queries/s: the run's retrieve stage (search + rerank, cold or cached as
    the cache holds it) over its queries."""
    import tempfile

    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from ragsweep.pipeline.config import CONF_DIR
    from ragsweep.pipeline.system import run_system

    cache_dir = cache_dir or tempfile.mkdtemp(prefix="ragsweep-scifact-")
    base = ["+experiment=scifact_retrieval", f"dataset.path={Path(folder).resolve()}", f"dataset.split={split}",
            f"cache_dir={cache_dir}", "mlflow.enabled=false"] + ([f"dataset.limit={n_queries}"] if n_queries else [])
    out: dict = {"dataset": f"scifact {split}", "rows": {}, "interval": "95% percentile bootstrap over queries"}
    for label, overrides in scifact_systems(100):
        if only and label not in only:
            continue
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=base + overrides)
        GlobalHydra.instance().clear()
        m = run_system(cfg)
        n = int(m["retrieval/ndcg_at_10/n"])
        out["queries"], out["corpus"] = n, int(m.get("data/chunks", 0))
        secs = float(m.get("time/retrieve_s") or 0.0)
        out["rows"][label] = {
            "ndcg@10": round(m["retrieval/ndcg_at_10"], 4),
            "ndcg@10_ci": [round(m["retrieval/ndcg_at_10/ci_low"], 4), round(m["retrieval/ndcg_at_10/ci_high"], 4)],
            "recall@100": round(m["retrieval/recall_at_k"], 4),
            "recall@100_ci": [round(m["retrieval/recall_at_k/ci_low"], 4), round(m["retrieval/recall_at_k/ci_high"], 4)],
            "n": n, "queries_per_s": round(n / secs, 1) if secs > 0 else None,
            "index_s": round(float(m.get("time/index_s") or 0.0), 1),
        }
    return out


def scifact_table(out: dict) -> str:
    lines = [f"{out['dataset']}: {out.get('queries', '?')} queries, {out.get('corpus', '?')} abstracts; "
             f"mean [{out['interval']}]",
             f"{'system':<20} {'nDCG@10':<24} {'R@100':<24} {'n':>5} {'q/s':>8}"]
    for name, r in out["rows"].items():
        lines.append(f"{name:<20} {r['ndcg@10']:.3f} [{r['ndcg@10_ci'][0]:.3f}, {r['ndcg@10_ci'][1]:.3f}]     "
                     f"{r['recall@100']:.3f} [{r['recall@100_ci'][0]:.3f}, {r['recall@100_ci'][1]:.3f}]     "
                     f"{r['n']:>5} {r['queries_per_s'] if r['queries_per_s'] is not None else '-':>8}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=None, help="folder with the ClapNQ dev files (default: the built-in copy)")
    ap.add_argument("--queries", type=int, default=None, help="questions (ClapNQ default 20; SciFact default all)")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--skip-dense", action="store_true")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--scifact", type=Path, help="SciFact folder (BEIR format): retrievers + rerankers, nDCG@10/R@100/queries/s")
    ap.add_argument("--cache", help="cache folder for --scifact (corpus embeddings are reused across runs)")
    ap.add_argument("--split", default="train", help="--scifact: the qrels split (the shared copy has train only)")
    ap.add_argument("--systems", help="--scifact: comma-separated labels to run (e.g. bm25,bm25+embedding); default all")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.scifact:
        out = scifact(args.scifact, args.queries, args.cache, args.split,
                      args.systems.split(",") if args.systems else None)
        print(scifact_table(out))
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
        from ragsweep.rag.retriever.dense import DenseRetriever

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
