"""Issue 37, item 6: does a generated question set rank retrieval systems as people's questions do?

For each corpus with human questions (``clapnq_longdoc``: 300 questions with annotated sentences;
``ragbench_paper_longdoc``: 400 questions with their relevant chunk), ``ragsweep-questions`` generates a
set from the same documents with the embedded model (SmolLM2-135M on llama.cpp); then the same
retrieval-only systems - BM25 over token chunks of each size x each top-k - are scored under both
sets, and the two rankings of the systems are compared: Kendall's tau-b with a 95% percentile
bootstrap interval (questions of both sets resampled, 2,000 draws). Beside it, the same tau between
two random halves of the human questions (split-half), the agreement people's questions have with
themselves at that size, so the generated set's tau has something to be read against.

    python experiments/benchmarks/questions_ranking.py generate [--corpus NAME ...] [--candidates 50]   # minutes to hours
    python experiments/benchmarks/questions_ranking.py generate --extractive --candidates 60           # a minute: no model
    python experiments/benchmarks/questions_ranking.py compare                                         # minutes
    python experiments/benchmarks/questions_ranking.py strong --corpus clapnq_longdoc                  # prints the commands

``generate`` writes ``experiments/results/questions_ranking/<corpus>.jsonl`` (+ ``.dropped.jsonl``, the
summary; ``<corpus>.extractive.*`` with ``--extractive``: a sentence-copying template through the instant
fake endpoint of tests/, grounded by construction, a reference point where the embedded model keeps too
few questions to rank anything); ``compare`` writes ``experiments/results/questions_ranking.md`` and ``.json``. The systems are
scored with ragsweep's own stages (chunker, BM25 index, search, span metrics: what ``ragsweep ...
generator=none`` computes), in one process, so the sweep costs seconds instead of one CLI start per
system.
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
from common import QUESTIONS_CORPORA, QUESTIONS_OUT, machine, question_responder

ROOT = Path(__file__).resolve().parents[2]
OUT = QUESTIONS_OUT
CORPORA = QUESTIONS_CORPORA
SIZES = (100, 200, 300, 450)
KS = (1, 2, 4, 8)
METRICS = ("recall", "ndcg")
B = 2000
#: fewest generated questions with evidence spans a ranking is compared on: below it, a bootstrap over the
#: questions resamples the same one or two, and its interval would look narrow for no reason
MIN_SCORED = 10
#: the generated sets compared: the embedded model's, and a sentence-copying template's (no language model)
SETS = {"smollm2": "", "extractive": ".extractive"}


# -- generate --------------------------------------------------------------------------------------
def generate(corpora: list[str], candidates: int, seed: int, extra: list[str], extractive: bool = False) -> None:
    """One set per corpus from the embedded model; with ``extractive``, from the sentence-copying template
    of experiments/benchmarks/bench_questions.py through the instant fake endpoint instead (no language model)."""
    OUT.mkdir(parents=True, exist_ok=True)
    tmp = ROOT / "experiments" / "results" / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    fake = None
    if extractive:
        sys.path.insert(0, str(ROOT / "tests"))
        from fake_openai_server import FakeOpenAIServer

        fake = FakeOpenAIServer(responder=question_responder, max_seconds=7200, max_requests=100_000).__enter__()
        extra = ["generator=external", f"generator.server.base_url={fake.base_url}", "generator.server.model=extractive-template",
                 "generator.server.api_key_env=RAGSWEEP_FAKE_KEY", *extra]
    suffix = SETS["extractive" if extractive else "smollm2"]
    try:
        for name in corpora:
            out = OUT / f"{name}{suffix}.jsonl"
            cmd = [sys.executable, "-m", "ragsweep.pipeline.questions.cli", "-q", f"dataset={name}", f"n={candidates}",
                   "oversample=1", f"seed={seed}", f"out={out}", f"mlflow.tracking_uri=sqlite:///{tmp / 'questions_mlflow.db'}",
                   f"mlflow.artifact_location={tmp / 'questions_artifacts'}", *extra]
            print("$", " ".join(cmd[2:]), flush=True)
            before = machine()
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "RAGSWEEP_FAKE_KEY": "sk-x"})
            wall = time.perf_counter() - t0
            text = proc.stdout + (f"\n(exit {proc.returncode})\n{proc.stderr[-3000:]}" if proc.returncode else "")
            (OUT / f"{name}{suffix}.summary.txt").write_text(f"{' '.join(cmd[2:])}\nmachine at start: {before}\nmachine at end: "
                                                              f"{machine()}\nwall {wall:.1f}s\n\n{text}", encoding="utf-8")
            print(text, flush=True)
    finally:
        if fake is not None:
            fake.__exit__(None, None, None)


# -- compare ---------------------------------------------------------------------------------------
def per_question(name: str, queries_file: Path | None) -> tuple[list[str], dict[str, np.ndarray], list[str]]:
    """System names and, per metric, a questions x systems matrix of values (questions with
    relevance only), and the question ids."""
    from hydra.utils import instantiate

    from ragsweep.corpus.dataset import ClapNQLongDoc, RagbenchPaperLongDoc
    from ragsweep.judge.metrics.retrieval import retrieval_metrics_per_query
    from ragsweep.store.cache import Cache

    loader = {"clapnq_longdoc": ClapNQLongDoc, "ragbench_paper_longdoc": RagbenchPaperLongDoc}[name]
    ds = loader(queries=str(queries_file)).load() if queries_file else loader().load()
    queries = [q for q in ds.queries if q.relevant]
    cache = Cache(str(ROOT / ".ragsweep_cache"))
    systems, cols = [], {m: [] for m in METRICS}
    for size in SIZES:
        chunker = instantiate({"_target_": "ragsweep.corpus.chunker.TokenChunker", "size": size, "overlap": 0.2})
        chunks = chunker.chunk(ds.documents, cache=cache)
        retriever = instantiate({"_target_": "ragsweep.rag.retriever.bm25.BM25Retriever", "top_k": max(KS)})
        retriever.index(chunks, cache=cache)
        hits = retriever.search(queries, k=max(KS), cache=cache)
        for k in KS:
            vals = retrieval_metrics_per_query(hits, queries, k, chunks=chunks)
            systems.append(f"bm25-c{size}-k{k}")
            for m in METRICS:
                cols[m].append([vals[q.query_id][f"{m}@{k}"] for q in queries])
    return systems, {m: np.asarray(v, dtype=float).T for m, v in cols.items()}, [q.query_id for q in queries]


def tau(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import kendalltau

    t = kendalltau(a, b).statistic  # tau-b: ties (equal system means) count as ties
    return float(t) if np.isfinite(t) else float("nan")


def tau_within_k(a: np.ndarray, b: np.ndarray) -> float:
    """The chunk-size question alone: tau of the ranking of the chunk sizes at each top-k, averaged over
    the top-ks (a larger k always finds more, so the whole grid's tau is partly a given)."""
    ts = [tau(a[i :: len(KS)], b[i :: len(KS)]) for i in range(len(KS))]  # systems are size-major: c{size}-k{k}
    return float(np.nanmean(ts)) if np.isfinite(ts).any() else float("nan")


def boot_tau(x: np.ndarray, y: np.ndarray, rng: np.random.Generator, f=None) -> tuple[float, float, float]:
    """tau (or ``f``) of the system means of x and y (questions x systems), and its percentile interval over
    resamples of the questions of each."""
    f = f or tau
    t = f(x.mean(0), y.mean(0))
    draws = [f(x[rng.integers(0, len(x), len(x))].mean(0), y[rng.integers(0, len(y), len(y))].mean(0)) for _ in range(B)]
    lo, hi = np.nanpercentile(draws, [2.5, 97.5])
    return t, float(lo), float(hi)


def split_half(x: np.ndarray, rng: np.random.Generator, n: int, f=None) -> tuple[float, float, float]:
    """tau (or ``f``) between the rankings of two disjoint random halves of size ``n`` of people's questions:
    the median and the 2.5/97.5 percentiles over 2,000 splits."""
    f = f or tau
    vals = []
    for _ in range(B):
        idx = rng.permutation(len(x))
        vals.append(f(x[idx[:n]].mean(0), x[idx[n : 2 * n]].mean(0)))
    lo, mid, hi = np.nanpercentile(vals, [2.5, 50, 97.5])
    return float(mid), float(lo), float(hi)


def survival(name: str) -> dict[str, object]:
    """What the generation kept and dropped, from its files (``name``: the set's file stem)."""
    kept = [json.loads(x) for x in (OUT / f"{name}.jsonl").read_text().splitlines()] if (OUT / f"{name}.jsonl").exists() else []
    dropped_file = OUT / f"{name}.dropped.jsonl"
    dropped = [json.loads(x) for x in dropped_file.read_text().splitlines()] if dropped_file.exists() else []
    by: dict[str, int] = {}
    for d in dropped:
        by[d["reason"]] = by.get(d["reason"], 0) + 1
    kinds: dict[str, int] = {}
    for k in kept:
        kinds[k["kind"]] = kinds.get(k["kind"], 0) + 1
    return {"candidates": len(kept) + len(dropped), "kept": len(kept), "dropped": by, "kept_by_kind": kinds,
            "with_spans": sum(1 for k in kept if k["evidence"])}


def compare(seed: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    results: dict[str, object] = {"machine": machine(), "systems": [f"bm25-c{s}-k{k}" for s in SIZES for k in KS],
                                  "bootstrap_draws": B, "corpora": {}}
    for name in CORPORA:
        systems, human, hq = per_question(name, None)
        row: dict[str, object] = {"human_questions": len(hq), "sets": {}}
        for label, suffix in SETS.items():
            gen_file = OUT / f"{name}{suffix}.jsonl"
            if not gen_file.exists() and not (OUT / f"{name}{suffix}.summary.txt").exists():
                continue
            one: dict[str, object] = {"generation": survival(name + suffix)}
            if gen_file.exists() and one["generation"]["with_spans"]:
                _, gen, gq = per_question(name, gen_file)
                one["generated_questions_with_spans"] = len(gq)
                for m in METRICS if len(gq) >= MIN_SCORED else ():
                    t, lo, hi = boot_tau(human[m], gen[m], rng)
                    sh = split_half(human[m], rng, min(len(gq), len(hq) // 2))
                    tw = boot_tau(human[m], gen[m], rng, tau_within_k)
                    shw = split_half(human[m], rng, min(len(gq), len(hq) // 2), tau_within_k)
                    one[m] = {"tau": t, "low": lo, "high": hi, "split_half_at_same_n": sh,
                              "chunk_size_tau_within_k": tw, "chunk_size_split_half": shw,
                              "human_means": dict(zip(systems, human[m].mean(0).round(4))),
                              "generated_means": dict(zip(systems, gen[m].mean(0).round(4)))}
            row["sets"][label] = one
        results["corpora"][name] = row
    return results


def markdown(res: dict) -> str:
    lines = ["# Does a generated question set rank retrieval systems as people's questions do?", "",
             "Issue 37, item 6 (`python experiments/benchmarks/questions_ranking.py generate` then `compare`). Systems: BM25 over "
             f"token chunks of {', '.join(map(str, SIZES))} MiniLM tokens (overlap 0.2) x top-k {', '.join(map(str, KS))} "
             f"({len(res['systems'])} systems), retrieval only; each ranked by its mean span recall@k and nDCG@k under "
             "people's questions and under the generated set. Kendall tau-b of the two rankings, 95% percentile bootstrap "
             f"over the questions of both sets ({res['bootstrap_draws']} draws); split-half: tau between two disjoint random "
             "halves of people's questions, each as large as the generated set (median and 95% range over the splits). "
             "A larger k always finds more, so the whole grid's tau is partly a given; the second row of each table "
             "asks the chunk-size question alone: tau of the 4 chunk sizes' ranking at each k, averaged over the ks.", "",
             f"Machine: {res['machine']}.", ""]
    for name, row in res["corpora"].items():
        lines += [f"## {name}", "", f"People's questions with relevance: {row['human_questions']}.", ""]
        for label, one in row["sets"].items():
            g = one["generation"]
            lines += [f"### generated by {label}", "", f"Generation: {g['candidates']} candidates, {g['kept']} kept "
                      f"({g['with_spans']} with evidence spans; by kind: {g['kept_by_kind'] or 'none'}); dropped by reason: "
                      f"{g['dropped'] or 'none'}.", ""]
            if "recall" not in one:
                got = one.get("generated_questions_with_spans", 0)
                lines += [f"{got} generated question(s) with evidence spans survived, fewer than the {MIN_SCORED} a ranking "
                          "is compared on here: no Kendall tau (a bootstrap over one or two questions gives an interval "
                          "that looks narrow for no reason).", ""]
                continue
            lines += [f"Generated questions scored: {one['generated_questions_with_spans']}.", "",
                      "| ranking by | Kendall tau (generated vs people) [95% CI] | split-half tau of people's questions at that n [95% range] |",
                      "|---|---|---|"]
            for m in METRICS:
                r = one[m]
                sh = r["split_half_at_same_n"]
                lines.append(f"| {m}@k, all 16 systems | {r['tau']:.3f} [{r['low']:.3f}, {r['high']:.3f}] | {sh[0]:.3f} [{sh[1]:.3f}, {sh[2]:.3f}] |")
                tw, shw = r["chunk_size_tau_within_k"], r["chunk_size_split_half"]
                lines.append(f"| {m}@k, chunk sizes at each k (mean over k) | {tw[0]:.3f} [{tw[1]:.3f}, {tw[2]:.3f}] | "
                             f"{shw[0]:.3f} [{shw[1]:.3f}, {shw[2]:.3f}] |")
            lines += ["", "| system | recall@k people | recall@k generated |", "|---|---|---|"]
            for sy in res["systems"]:
                lines.append(f"| {sy} | {one['recall']['human_means'][sy]:.3f} | {one['recall']['generated_means'][sy]:.3f} |")
            lines.append("")
    return "\n".join(lines) + "\n"


def strong(corpora: list[str]) -> None:
    for name in corpora:
        print(f"# a GPU with vLLM (docs/gpu.md): a 7B instruct model\n"
              f"ragsweep-questions dataset={name} n=60 oversample=1 generator=vllm "
              f"generator.server.model=Qwen/Qwen2.5-7B-Instruct out={OUT / (name + '.jsonl')}\n"
              f"# any OpenAI-compatible endpoint (key in OPENAI_API_KEY)\n"
              f"ragsweep-questions dataset={name} n=60 oversample=1 generator=external "
              f"generator.server.model=gpt-4o-mini out={OUT / (name + '.jsonl')}\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("step", choices=["generate", "compare", "all", "strong"])
    ap.add_argument("--corpus", action="append", choices=CORPORA)
    ap.add_argument("--candidates", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--extractive", action="store_true",
                    help="generate: the sentence-copying template through the fake endpoint, not the embedded model")
    ap.add_argument("extra", nargs="*", help="more ragsweep-questions overrides (generate)")
    args = ap.parse_intermixed_args(argv)
    corpora = args.corpus or list(CORPORA)
    if args.step == "strong":
        strong(corpora)
        return 0
    if args.step in ("generate", "all"):
        generate(corpora, args.candidates, args.seed, args.extra, args.extractive)
    if args.step in ("compare", "all"):
        res = compare(args.seed)
        (ROOT / "experiments" / "results" / "questions_ranking.json").write_text(json.dumps(res, indent=1, default=float))
        md = markdown(res)
        (ROOT / "experiments" / "results" / "questions_ranking.md").write_text(md, encoding="utf-8")
        print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
