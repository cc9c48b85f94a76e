"""Do greedy answers change with the weight format llama.cpp serves? Runs the default system on the
same questions once per ``generator.server.model_format`` and compares the answers token by token.

    python experiments/benchmarks/answer_equality.py                      # source (packaged Q4_1) vs f16, 20 questions
    python experiments/benchmarks/answer_equality.py --formats source,q8_0 --limit 20
    python experiments/benchmarks/answer_equality.py --key generator.server.replicas --formats 1,auto   # any other setting
    python experiments/benchmarks/answer_equality.py --records A/records.json B/records.json   # compare two runs' records

Each run is a fresh ``ragsweep dataset.limit=N`` in a scratch directory (temperature 0, seed 0).
Answers are tokenized with the model's own tokenizer; for every answer that differs, the number of
differing tokens is ``max(len a, len b) - matched`` (difflib's matching blocks) and the position of
the first differing token. Appends its table to ``experiments/results/bench_generation.md``.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "results" / "bench_generation.md"


def run(fmt: str, limit: int, work: Path, key: str = "generator.server.model_format") -> Path:
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "RAGSWEEP_CACHE_DIR": str(work / "cache")}
    env.pop("MLFLOW_TRACKING_URI", None)
    cmd = [sys.executable, "-m", "ragsweep.pipeline.cli", "-q", f"dataset.limit={limit}", f"{key}={fmt}",
           f"mlflow.tracking_uri=sqlite:///{work / 'mlflow.db'}", f"mlflow.artifact_location={work / 'art'}"]
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"answer_equality: {' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    found = sorted((work / "art").rglob("records.json"))
    if not found:
        sys.exit(f"answer_equality: no records.json under {work / 'art'}")
    return found[-1]


QUALITY = ("baseline/token_f1", "ragchecker/overall/f1", "ragchecker/generator/faithfulness", "baseline/context_overlap")


def quality(ra: Path, rb: Path, fa: str, fb: str, reps: int = 4000) -> list[str]:
    """Paired difference (b - a) of per-question scores, mean with a 95% percentile-bootstrap
    interval and the count: do the differing answers score differently?"""
    import random
    import statistics

    a = {str(r.get("query_id")): r.get("scores") or {} for r in json.loads(ra.read_text())["results"]}
    b = {str(r.get("query_id")): r.get("scores") or {} for r in json.loads(rb.read_text())["results"]}
    rng, out = random.Random(0), []
    for m in QUALITY:
        pairs = [(a[q][m], b[q][m]) for q in sorted(set(a) & set(b)) if a[q].get(m) is not None and b[q].get(m) is not None]
        if len(pairs) < 2:
            continue
        d = [y - x for x, y in pairs]
        boots = sorted(statistics.mean(rng.choices(d, k=len(d))) for _ in range(reps))
        out.append(f"| {m} | {statistics.mean(x for x, _ in pairs):.3f} | {statistics.mean(y for _, y in pairs):.3f} | "
                   f"{statistics.mean(d):+.3f} [{boots[int(0.025 * reps)]:+.3f}, {boots[int(0.975 * reps) - 1]:+.3f}] | {len(d)} |")
    return out


def answers(records: Path) -> dict[str, str]:
    rows = json.loads(records.read_text())["results"]
    return {str(r.get("query_id")): str(r.get("response") or "") for r in rows}


def compare(a: dict[str, str], b: dict[str, str]) -> tuple[list[str], dict]:
    import llama_cpp

    sys.path.insert(0, str(ROOT / "src"))
    from ragsweep.rag.generator.servers.llamacpp import resolve_model_path

    tok = llama_cpp.Llama(model_path=str(resolve_model_path("smollm2")), vocab_only=True, verbose=False)
    rows, differing, tokens_differ, tokens_total = [], 0, 0, 0
    for qid in sorted(set(a) & set(b)):
        ta, tb = tok.tokenize(a[qid].encode(), add_bos=False), tok.tokenize(b[qid].encode(), add_bos=False)
        tokens_total += max(len(ta), len(tb))
        if ta == tb:
            continue
        differing += 1
        sm = difflib.SequenceMatcher(a=ta, b=tb, autojunk=False)
        diff = max(len(ta), len(tb)) - sum(m.size for m in sm.get_matching_blocks())
        first = next((i for i, (x, y) in enumerate(zip(ta, tb)) if x != y), min(len(ta), len(tb)))
        tokens_differ += diff
        rows.append(f"| {qid} | {len(ta)} | {len(tb)} | {first} | {diff} |")
    summary = {"questions": len(set(a) & set(b)), "identical": len(set(a) & set(b)) - differing,
               "differing": differing, "tokens_differing": tokens_differ, "tokens_total": tokens_total}
    return rows, summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--formats", default="source,f16", help="the two values of --key to compare")
    p.add_argument("--key", default="generator.server.model_format", help="the setting that differs between the runs")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--records", nargs=2, type=Path, help="compare two existing records.json files instead")
    p.add_argument("--no-save", action="store_true")
    args = p.parse_args(argv)
    fa, fb = args.formats.split(",")
    if args.records:
        ra, rb = args.records
    else:
        tmp = Path(tempfile.mkdtemp(prefix="answer_equality_"))
        ra, rb = run(fa, args.limit, tmp / fa, args.key), run(fb, args.limit, tmp / fb, args.key)
    rows, s = compare(answers(ra), answers(rb))
    what = "" if args.key == "generator.server.model_format" else f"{args.key}="
    lines = [f"### answer equality, {what}{fa} vs {what}{fb}, greedy (temperature 0), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             f"{s['identical']} of {s['questions']} answers identical token for token; {s['differing']} differ, "
             f"{s['tokens_differing']} of {s['tokens_total']} answer tokens in all.", ""]
    if rows:
        lines += [f"| question | tokens ({fa}) | tokens ({fb}) | first differing token | tokens differing |", "|---|---|---|---|---|", *rows]
    q = quality(ra, rb, fa, fb)
    if q:
        lines += ["", f"| score (offline judge) | mean {fa} | mean {fb} | paired {fb} - {fa} [95% bootstrap CI] | n |",
                  "|---|---|---|---|---|", *q]
    print("\n".join(lines))
    if not args.no_save:
        with RESULTS.open("a") as fh:
            fh.write("\n".join(lines) + "\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
