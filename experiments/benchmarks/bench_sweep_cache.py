"""What a shared cache saves a sweep: a 3 x 3 sweep run once as ONE sweep (one shared cache, one
model server) and once as nine independent single runs, each with an EMPTY cache.

    python experiments/benchmarks/bench_sweep_cache.py                  # top_k 2,3,4 x chunk size 100,200,300
    python experiments/benchmarks/bench_sweep_cache.py --limit 10 --evaluator none --launcher joblib

Both sides run the ``ragsweep`` command as a user would, on the built-in ClapNQ data
(``dataset.limit`` questions), with the bundled SmolLM2 on llama.cpp and the offline evaluator,
in a scratch directory (own MLflow store, caches and server registry). Printed and written to
``experiments/results/bench_sweep_cache.md``: generation calls, judge calls (LLM judge HTTP calls;
0 with the offline evaluator), entailment checks (pairs sent to the checker), wall time, and the
ratios. It also checks, by counting the rows of the sweep's cache against the calls its jobs
made, that no prompt was generated twice and no (claim, reference) pair was judged twice within
the sweep. With a parallel launcher two jobs may check the same pair at the same moment, so the
check is exact for the default sequential launcher only.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parents[1] / "results" / "bench_sweep_cache.md"


def _evaluator_override(name: str) -> list[str]:
    """``evaluator=X`` when the group is in the default list, else ``+evaluator=X``."""
    from hydra import compose, initialize_config_module

    with initialize_config_module("ragsweep.conf", version_base="1.3"):
        cfg = compose(config_name="config")
    return [f"{'' if 'evaluator' in cfg else '+'}evaluator={name}"]


def _run(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> float:
    t0 = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT)
    secs = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n--- {log}:\n" + log.read_text()[-4000:])
    return secs


def _runs(workdir: Path, experiment: str, children_only: bool):
    from ragsweep import tracking

    client = tracking.client(f"sqlite:///{workdir}/mlruns/mlflow.db")
    runs = tracking.experiment_runs(client, experiment, children_only=children_only)
    bad = [(r.info.run_name, r.info.status) for r in runs if r.info.status != "FINISHED"]
    if bad:
        sys.exit(f"runs did not finish: {bad}")
    return runs


def _total(runs, metric: str) -> float | None:
    vals = [r.data.metrics[metric] for r in runs if metric in r.data.metrics]
    return sum(vals) if vals else None


def _cache_rows(cache_dir: Path, stage: str) -> int | None:
    import sqlite3

    db = cache_dir / "cache.db"
    if not db.exists():
        return None
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT COUNT(*) FROM kv WHERE stage=?", (stage,)).fetchone()[0]
    finally:
        con.close()


def _fmt(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v:.1f}" if isinstance(v, float) and not v.is_integer() else f"{int(v)}"


def _ratio(single: float | None, sweep: float | None) -> str:
    if single is None or sweep is None:
        return "n/a"
    if sweep == 0:
        return "inf" if single else "-"
    return f"{single / sweep:.2f}x"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top-k", default="2,3,4")
    ap.add_argument("--sizes", default="100,200,300", help="chunker.size values")
    ap.add_argument("--limit", type=int, default=5, help="dataset.limit (questions)")
    ap.add_argument("--max-tokens", type=int, default=16, help="generator.max_tokens")
    ap.add_argument("--evaluator", default="offline", help="offline | llm | nli | none")
    ap.add_argument("--launcher", default="basic", help="hydra/launcher of the sweep (basic, joblib, ...)")
    ap.add_argument("--workdir", type=Path, default=None, help="scratch directory (default: a new temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench_sweep_cache-"))
    workdir.mkdir(parents=True, exist_ok=True)
    ks, sizes = args.top_k.split(","), args.sizes.split(",")
    common = [
        f"dataset.limit={args.limit}",
        f"generator.max_tokens={args.max_tokens}",
        *_evaluator_override(args.evaluator),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "RAGSWEEP_STATE_DIR": str(workdir / "state")}
    env.pop("MLFLOW_TRACKING_URI", None)
    env.pop("RAGSWEEP_SWEEP_FILE", None)
    cli = [sys.executable, "-m", "ragsweep.pipeline.cli"]

    # 1. one sweep, one shared cache
    sweep_cache = workdir / "cache-sweep"
    launcher = [] if args.launcher == "basic" else [f"hydra/launcher={args.launcher}"]
    cmd = [*cli, "-m", f"retriever.top_k={args.top_k}", f"chunker.size={args.sizes}", *common,
           "experiment_name=bench_sweep", f"hydra.sweep.dir={workdir / 'multirun'}", *launcher]
    print(f"sweep: {len(ks) * len(sizes)} systems, one shared cache ...", flush=True)
    sweep_s = _run(cmd, workdir, {**env, "RAGSWEEP_CACHE_DIR": str(sweep_cache)}, workdir / "sweep.log")

    # 2. the same systems as independent runs, each with an empty cache
    single_s = 0.0
    for i, (k, size) in enumerate(itertools.product(ks, sizes)):
        print(f"single run {i + 1}/{len(ks) * len(sizes)}: top_k={k} chunker.size={size} ...", flush=True)
        cache = workdir / f"cache-single-{i}"
        shutil.rmtree(cache, ignore_errors=True)
        cmd = [*cli, f"retriever.top_k={k}", f"chunker.size={size}", *common, "experiment_name=bench_single"]
        single_s += _run(cmd, workdir, {**env, "RAGSWEEP_CACHE_DIR": str(cache)}, workdir / f"single-{i}.log")

    sweep_runs = _runs(workdir, "bench_sweep", children_only=True)
    single_runs = _runs(workdir, "bench_single", children_only=False)
    n = len(ks) * len(sizes)
    assert len(sweep_runs) == n and len(single_runs) == n, (len(sweep_runs), len(single_runs))

    rows = [
        ("generation calls", "generator/calls"),
        ("generation cache hits", "generator/cache_hits"),
        ("judge calls (LLM)", "judge/calls"),
        ("entailment checks", "judge/checks"),
        ("claim extractions", "judge/extractions"),
    ]
    result: dict = {"systems": n, "questions_per_system": args.limit, "evaluator": args.evaluator, "launcher": args.launcher}
    lines = [
        f"# Shared cache: one {len(ks)} x {len(sizes)} sweep vs {n} independent runs",
        "",
        f"retriever.top_k={args.top_k} x chunker.size={args.sizes}, ClapNQ dataset.limit={args.limit}, "
        f"generator.max_tokens={args.max_tokens}, evaluator={args.evaluator}, sweep launcher={args.launcher}.",
        "",
        f"| | one sweep, shared cache | {n} single runs, empty caches | single / sweep |",
        "|---|---:|---:|---:|",
    ]
    for label, metric in rows:
        sw, si = _total(sweep_runs, metric), _total(single_runs, metric)
        result[metric] = {"sweep": sw, "single": si}
        ratio = "" if metric == "generator/cache_hits" else _ratio(si, sw)
        lines.append(f"| {label} | {_fmt(sw)} | {_fmt(si)} | {ratio} |")
    lines.append(f"| wall time (s) | {sweep_s:.1f} | {single_s:.1f} | {_ratio(single_s, sweep_s)} |")
    result["wall_s"] = {"sweep": round(sweep_s, 1), "single": round(single_s, 1)}

    # nothing done twice inside the sweep: rows of the shared cache = calls its jobs made
    lines.append("")
    checks_ok = True
    for stage, metric, what in (("generation", "generator/calls", "prompt generated"), ("entailment", "judge/checks", "(claim, reference) pair judged")):
        rows_n, calls = _cache_rows(sweep_cache, stage), _total(sweep_runs, metric)
        if not rows_n or calls is None:
            lines.append(f"- cache stage `{stage}`: not used in this configuration (n/a)")
            continue
        ok = rows_n == calls
        checks_ok &= ok
        verdict = f"OK: no {what} twice within the sweep" if ok else f"FAILED: {calls - rows_n:g} {what} more than once"
        lines.append(f"- cache stage `{stage}`: {rows_n} rows, {_fmt(calls)} made by the sweep's jobs -> {verdict}")
        result[f"{stage}_rows"] = rows_n
    table = "\n".join(lines) + "\n"
    print()
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table)
    print(f"wrote {args.out}; scratch dir {workdir}{'' if args.keep or args.workdir else ' (removed)'}")
    if not (args.keep or args.workdir):
        shutil.rmtree(workdir, ignore_errors=True)
    if not checks_ok and args.launcher == "basic":
        sys.exit(1)
    return result


if __name__ == "__main__":
    main()
