"""Continuous batching (one llama.cpp process, several sequences per weight pass) against one
process per core (one sequence each), and flash attention on long prompts, with llama.cpp's own
``llama-batched-bench`` (built beside ``libllama.so`` by scripts/build_llama_cpp.py).

    python experiments/benchmarks/bench_batching.py                          # default-run shape: 800-token prompts, 83 tokens
    python experiments/benchmarks/bench_batching.py --prompt 6500 --decode 16 --fa off,on   # top-k 20 shape
    python experiments/benchmarks/bench_batching.py --formats f16,q4_0 --settings 2x1x1,2x1x4,1x2x8 --reps 3

Settings ``PxTxN``, each in its own process(es), interleaved round by round (a shared machine's
drifting load hits all alike), median of ``--reps`` rounds: P processes side by side (their
tokens/s add up), each on T threads reading N prompts, then decoding its N sequences together,
one weight pass per step for all N (what ``llama-server -np N`` does with N requests in flight).
``2x1x1`` is ragsweep's one-thread process per core with llama-cpp-python's server (one request
each); ``2x1x4`` is two one-thread llama-servers with four slots each.

Prompt tok/s = prompt tokens / time to the first token of all; decode tok/s = decoded tokens /
decoding time; "s per question" = seconds of the cores per question of that prompt/decode mix
at the per-CPU-second rates. The 1-minute load average is printed beside every
figure: numbers on a shared machine are lower bounds. Appends to
``experiments/results/bench_batching.md`` (``--no-save`` to skip).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "results" / "bench_batching.md"
BIN_DIR = os.environ.get("RAGSWEEP_LLAMA_BIN_DIR")  # another folder of llama.cpp binaries (and its CPU variants)
sys.path.insert(0, str(ROOT / "src"))


def batched_bench(model: str, prompt: int, decode: int, n_seq: int, threads: int, fa: str, timeout: float) -> dict:
    from ragsweep.rag.generator.servers import cpu_backend

    # binary_dir: the programs beside the CPU variant this process would load (never a skipped one)
    exe = Path(BIN_DIR or cpu_backend.binary_dir()) / "llama-batched-bench"
    cmd = [str(exe), "-m", model, "-c", str(n_seq * (prompt + decode) + 64), "-b", "2048", "-ub", "512",
           "-npp", str(prompt), "-ntg", str(decode), "-npl", str(n_seq), "-t", str(threads), "-tb", str(threads),
           "-fa", fa]
    return _popen(cmd), cmd


def _popen(cmd: list[str]) -> subprocess.Popen:
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def parse(out: str) -> dict:
    """The last result row of llama-batched-bench: PP, TG, B, N_KV, T_PP, S_PP, T_TG, S_TG, T, S."""
    rows = [ln for ln in out.splitlines() if re.match(r"^\|\s*\d", ln)]
    if not rows:
        raise RuntimeError("llama-batched-bench printed no result:\n" + out[-2000:])
    v = [float(x) for x in rows[-1].strip("|").split("|")]
    return {"pp": v[0], "tg": v[1], "b": v[2], "t_pp": v[4], "s_pp": v[5], "t_tg": v[6], "s_tg": v[7], "t": v[8]}


def run_setting(model: str, mode: str, args) -> dict:
    """One setting ``PxTxN``: P processes side by side, each on T threads with N sequences.
    Beside the wall-clock rates, each process's rates per CPU-second it got: its wall rate x its
    wall time / (its CPU time / T), which on a shared machine is what idle cores would give
    (descheduled time removed, assuming it was spread evenly over the run)."""
    n_procs, threads, n_seq = (int(x) for x in mode.split("x"))
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    procs = [batched_bench(model, args.prompt, args.decode, n_seq, threads, args.fa_now, args.timeout)[0]
             for _ in range(n_procs)]
    res = []
    for p in procs:
        out = p.stdout.read()
        _, _, usage = os.wait4(p.pid, 0)
        p.returncode = 0
        r = parse(out)
        share = (usage.ru_utime + usage.ru_stime) / threads / max(r["t"], 1e-9)  # of its wall time on its cores
        r["cpu_pp"], r["cpu_tg"] = r["s_pp"] / min(share, 1.0), r["s_tg"] / min(share, 1.0)
        res.append(r)
    return {"prompt_tps": sum(r["s_pp"] for r in res), "decode_tps": sum(r["s_tg"] for r in res),
            "prompt_cpu": sum(r["cpu_pp"] for r in res), "decode_cpu": sum(r["cpu_tg"] for r in res),
            "wall": time.perf_counter() - t0, "load": load}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--formats", default="f16,q4_0")
    ap.add_argument("--prompt", type=int, default=800)
    ap.add_argument("--decode", type=int, default=83)
    ap.add_argument("--settings", default="2x1x1,2x1x2,2x1x4,1x2x1,1x2x4",
                    help="PxTxN: P processes side by side, T threads each, N sequences decoded together in each")
    ap.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--fa", default="off", help="flash attention settings: off, on (comma-separated)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--questions", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)

    from common import cpu_line
    from ragsweep.rag.generator.servers.gguf_format import converted_model
    from ragsweep.rag.generator.servers.llamacpp import resolve_model_path

    src = resolve_model_path("smollm2")
    cache = Path(tempfile.mkdtemp(prefix="bench_batch_"))
    lines = [f"### bench_batching, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "", cpu_line(), "",
             f"{args.prompt}-token prompts, {args.decode} decoded tokens each, {args.cores} cores; llama-batched-bench; "
             f"{args.reps} interleaved rounds, median (min-max); load = 1-min load average before each round", "",
             "| weights | flash attn | setting | prompt tok/s | decode tok/s | prompt tok/s per CPU-s of the cores | decode tok/s per CPU-s | s per question (mix, per CPU-s rates) | load |",
             "|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    modes = args.settings.split(",")
    settings = [(fmt, str(converted_model(src, fmt, cache)[0]), fa, mode)
                for fmt in args.formats.split(",") for fa in args.fa.split(",") for mode in modes]
    got: dict[tuple, list[dict]] = {st: [] for st in settings}
    for rnd in range(args.reps):
        for st in settings:
            fmt, model, fa, mode = st
            args.fa_now = fa
            r = run_setting(model, mode, args)
            got[st].append(r)
            print(f"  round {rnd + 1}: {fmt} fa={fa} {mode}: prompt {r['prompt_tps']:.0f} tok/s ({r['prompt_cpu']:.0f} "
                  f"per CPU-s), decode {r['decode_tps']:.1f} tok/s ({r['decode_cpu']:.1f}) (load {r['load']:.2f})",
                  file=sys.stderr, flush=True)
    for st in settings:
        fmt, _, fa, mode = st
        rs = got[st]
        pt, dt = [r["prompt_tps"] for r in rs], [r["decode_tps"] for r in rs]
        pc, dc = [r["prompt_cpu"] for r in rs], [r["decode_cpu"] for r in rs]
        per_q = args.prompt / statistics.median(pc) + args.decode / statistics.median(dc)
        n_procs, threads, n_seq = mode.split("x")
        label = f"{n_procs} process(es) x {threads} thread(s) x {n_seq} sequence(s)"
        row = (f"| {fmt.upper() if fmt != 'source' else 'Q4_1'} | {fa} | {label} | {_med(pt)} | {_med(dt)} | {_med(pc)} | "
               f"{_med(dc)} | {per_q:.2f} | "
               + ", ".join(f"{r['load']:.1f}" for r in rs) + " |")
        lines.append(row)
        print(row, flush=True)
    if not args.no_save:
        with RESULTS.open("a", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n\n")
        print(f"appended to {RESULTS}")
    return 0


def _med(xs: list[float]) -> str:
    return f"{statistics.median(xs):.0f} ({min(xs):.0f}-{max(xs):.0f})" if len(xs) > 1 else f"{xs[0]:.0f}"


if __name__ == "__main__":
    sys.exit(main())
