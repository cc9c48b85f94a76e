"""Scale benchmark: a user's own corpus of N abstract-sized documents, cold and warm runs.

    nice -n 10 python experiments/benchmarks/bench_corpus_scale.py --docs 100000 --retrievers bm25,tfidf \
        --workdir /tmp/corpus-bench --out experiments/results/bench_corpus_scale_100k.md

The corpus is deterministic: the 5,183 SciFact abstracts, then synthetic documents of 6-12
SciFact sentences drawn with a fixed seed (about 1.5 KB of JSONL each, as SciFact's own); the
questions are the first 20 SciFact train questions with qrels (relevant = their SciFact abstract).
Each run is the real CLI (``python -m ragsweep.pipeline.cli dataset=jsonl ...``) with generation answered
instantly by the local fake OpenAI endpoint (tests/fake_openai_server.py) and ``evaluator=none``,
so only the corpus side is timed. Cold = a fresh cache dir and fingerprint memo; warm = the same
again. Printed per retriever: wall, the summary's ``time:`` stages, peak RSS of the run's process
(``wait4``), cache dir size; and chunking throughput against the tokenizer's own batched limit on
the same documents (in-process, first ``--tput-docs`` documents).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from common import first_documents

ROOT = Path(__file__).resolve().parents[2]
SCIFACT = Path("/work/shared/data/scifact")


def build_corpus(n_docs: int, out: Path, scifact: Path = SCIFACT, seed: int = 0) -> tuple[Path, Path, int]:
    out.mkdir(parents=True, exist_ok=True)
    corpus, queries = out / f"corpus_{n_docs}.jsonl", out / "queries.jsonl"
    abstracts = [json.loads(line) for line in open(scifact / "corpus.jsonl")]
    sentences = [s.strip() + "." for a in abstracts for s in a["text"].split(". ") if len(s.strip()) > 20]
    if not corpus.is_file():
        rng = np.random.default_rng(seed)
        tmp = corpus.with_suffix(".tmp")
        with open(tmp, "w") as f:
            for a in abstracts[:n_docs]:
                f.write(json.dumps({"doc_id": a["_id"], "title": a.get("title"), "text": a["text"]}) + "\n")
            for i in range(max(0, n_docs - len(abstracts))):
                k = int(rng.integers(6, 13))
                idx = rng.integers(0, len(sentences), size=k)
                f.write(json.dumps({"doc_id": f"syn{i}", "text": " ".join(sentences[j] for j in idx)}) + "\n")
        os.replace(tmp, corpus)
    rel: dict[str, list[str]] = {}
    for line in open(scifact / "qrels" / "train.tsv"):
        q, d, *_ = line.split("\t")
        if q != "query-id":
            rel.setdefault(q, []).append(d)
    have = {a["_id"] for a in abstracts[:n_docs]}
    with open(queries, "w") as f:
        n = 0
        for line in open(scifact / "queries.jsonl"):
            q = json.loads(line)
            docs = [d for d in rel.get(q["_id"], []) if d in have]
            if docs and n < 20:
                f.write(json.dumps({"query_id": q["_id"], "query": q["text"], "relevant_doc_ids": docs}) + "\n")
                n += 1
    return corpus, queries, corpus.stat().st_size


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def run_cli(args: list[str], env: dict[str, str], cwd: Path, timeout: float) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "ragsweep.pipeline.cli", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out_lines = []
    for line in proc.stdout:  # type: ignore[union-attr]
        out_lines.append(line)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    out = "".join(out_lines)
    m = re.findall(r"^time: (.*)$", out, flags=re.M)
    return {"rc": proc.returncode, "wall_s": wall, "peak_rss_gb": usage.ru_maxrss / 2**20,
            "time": m[-1] if m else "", "tail": out[-1500:]}


def throughput(corpus: Path, n: int) -> dict:
    from ragsweep.corpus.chunker import TokenChunker, _backend, load_tokenizer

    docs = first_documents(corpus, n)
    texts = [d.text for d in docs]
    load_tokenizer("minilm")
    tok = _backend("minilm")
    t = time.perf_counter()
    for s in range(0, len(texts), 2048):
        tok.encode_batch(texts[s : s + 2048], add_special_tokens=False)
    limit = len(texts) / (time.perf_counter() - t)
    chunker = TokenChunker()
    t = time.perf_counter()
    chunks = chunker._chunk_all(docs)
    rate = len(texts) / (time.perf_counter() - t)
    return {"docs": len(texts), "chunks": len(chunks), "tokenizer_docs_s": limit, "chunker_docs_s": rate}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--docs", type=int, default=100_000)
    p.add_argument("--retrievers", default="bm25,tfidf")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/corpus-bench"))
    p.add_argument("--out", type=Path, default=None, help="append the results as markdown here")
    p.add_argument("--tput-docs", type=int, default=50_000)
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--src", type=Path, default=ROOT / "src", help="the ragsweep source to run (e.g. an older checkout's src/)")
    p.add_argument("--skip-throughput", action="store_true")
    p.add_argument("--warm-runs", type=int, default=1, help="how many warm runs after the cold one")
    p.add_argument("--keep", action="store_true",
                   help="keep an existing run dir (its cache and fingerprint memo): the first run is then warm for "
                        "whatever that cache already holds, e.g. an older source's chunks and indexes")
    a = p.parse_args()

    corpus, queries, size = build_corpus(a.docs, a.workdir)
    print(f"corpus: {a.docs:,} documents, {size / 2**20:,.0f} MB of JSONL ({corpus})", flush=True)
    port = free_port()
    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fake_openai_server.py"), "--port", str(port),
                               "--max-seconds", str(a.timeout * 4)], stdout=subprocess.DEVNULL)
    rows = []
    try:
        time.sleep(1.0)
        for retriever in a.retrievers.split(","):
            run_dir = a.workdir / f"run_{a.docs}_{retriever}"
            if not a.keep:
                shutil.rmtree(run_dir, ignore_errors=True)
            run_dir.mkdir(parents=True, exist_ok=True)
            env = {**os.environ, "PYTHONPATH": str(a.src), "FAKE_KEY": "x", "HF_HUB_OFFLINE": "1",
                   "TRANSFORMERS_OFFLINE": "1", "RAGSWEEP_FINGERPRINTS": str(run_dir / "fingerprints.json")}
            args = ["dataset=jsonl", f"dataset.corpus={corpus}", f"dataset.queries={queries}",
                    f"retriever={retriever}", "evaluator=none", "generator=external",
                    f"generator.server.base_url=http://127.0.0.1:{port}/v1", "generator.server.model=fake",
                    "generator.server.api_key_env=FAKE_KEY", "generator.name=fake",
                    f"cache_dir={run_dir / 'cache'}", f"mlflow.tracking_uri=sqlite:///{run_dir / 'mlflow.db'}",
                    f"mlflow.artifact_location={run_dir / 'artifacts'}", f"hydra.run.dir={run_dir / 'hydra'}"]
            for phase in ["first" if a.keep else "cold"] + [f"warm{i + 1}" if a.warm_runs > 1 else "warm" for i in range(a.warm_runs)]:
                r = run_cli(args, env, run_dir, a.timeout)
                r.update(retriever=retriever, phase=phase, cache_mb=du(run_dir / "cache") / 2**20)
                rows.append(r)
                print(f"{retriever:<6} {phase}: rc={r['rc']} wall {r['wall_s']:.1f} s, peak RSS {r['peak_rss_gb']:.2f} GB, "
                      f"cache {r['cache_mb']:,.0f} MB; time: {r['time']}", flush=True)
                if r["rc"] != 0:
                    print(r["tail"], flush=True)
                    break
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=10)

    # after the runs: a child's ru_maxrss starts at this process's RSS when it forks (Linux keeps the
    # high-water mark across exec), so documents loaded here first would show in every run's peak
    tp = {"docs": 0, "chunks": 0, "tokenizer_docs_s": float("nan"), "chunker_docs_s": float("nan")}
    if not a.skip_throughput:
        tp = throughput(corpus, min(a.tput_docs, a.docs))
    print(f"chunking throughput on {tp['docs']:,} documents: chunker {tp['chunker_docs_s']:,.0f} doc/s, "
          f"tokenizer's own batched limit {tp['tokenizer_docs_s']:,.0f} doc/s "
          f"(ratio {tp['tokenizer_docs_s'] / tp['chunker_docs_s']:.2f}x)", flush=True)
    load = os.getloadavg()
    md = [f"\n## {a.docs:,} documents ({size / 2**20:,.0f} MB JSONL), retrievers {a.retrievers}, source {a.src}\n",
          f"command: `python experiments/benchmarks/bench_corpus_scale.py {' '.join(sys.argv[1:])}`  ",
          f"machine: {os.cpu_count()} cores, shared with other jobs; load average at the end {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}\n",
          f"chunking throughput ({tp['docs']:,} documents, {tp['chunks']:,} chunks): chunker {tp['chunker_docs_s']:,.0f} doc/s, "
          f"tokenizer's batched limit {tp['tokenizer_docs_s']:,.0f} doc/s, ratio {tp['tokenizer_docs_s'] / tp['chunker_docs_s']:.2f}x\n",
          "| retriever | run | wall | stages (summary `time:`) | peak RSS | cache dir |", "|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['retriever']} | {r['phase']} | {r['wall_s']:.1f} s | {r['time'] or 'rc=' + str(r['rc'])} | "
                  f"{r['peak_rss_gb']:.2f} GB | {r['cache_mb']:,.0f} MB |")
    text = "\n".join(md) + "\n"
    print(text)
    if a.out:
        with open(a.out, "a") as f:
            f.write(text)
    return 0 if all(r["rc"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
