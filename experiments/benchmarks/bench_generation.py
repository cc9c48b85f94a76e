"""How close to the CPU's limit llama.cpp generates: prompt and decoding tokens/s per weight format
and thread setting, beside the CPU's own fp32 matrix-multiply throughput on the same cores.

    python experiments/benchmarks/bench_generation.py                       # the grid below, idle and beside a busy process
    python experiments/benchmarks/bench_generation.py --formats f16 --threads 2/2 --wait passive --no-busy
    python experiments/benchmarks/bench_generation.py --default-run         # + ragsweep dataset.limit=20, cold and warm
    python experiments/benchmarks/bench_generation.py --chunk-point         # + one chunk-size-600 point (20 questions)
    python experiments/benchmarks/bench_generation.py --formats f16 --threads 1/1 --procs 1,2   # + two processes side by side
    RAGSWEEP_LLAMA_CPU_VARIANT=haswell python experiments/benchmarks/bench_generation.py ...  # the AVX2 code on any CPU

Each setting runs in its own child process (OMP_WAIT_POLICY is read when OpenMP starts) with
``llama_cpp.Llama`` on the default model (SmolLM2-135M-Instruct), converted by ragsweep's own
``model_format`` path: an 800-token prompt evaluated in one call (prompt tokens/s), then 64 greedy
tokens decoded one at a time (decoding tokens/s); ``--reps`` rounds, each running every setting
once (interleaved, so a shared machine's drifting load hits every setting alike), median reported
with the min-max range. Beside wall-clock tokens/s, tokens per CPU-second of the process: on a
busy machine, for one thread, that is close to what an idle core gives (for two, it also counts
time spent spinning at barriers). "busy" runs the same beside one CPU-bound process (``while True: pass``), the
situation that made OpenMP's spinning threads collapse. The matmul peak is numpy's float32 GEMM
(2048 x 2048) on 1 and 2 threads, in FLOP per CPU-second of the process (what a core does while it
runs, whatever else the machine runs), measured before every round and the best kept (the host's
speed drifts; so does the memory figure); "share of peak" = prompt FLOP per CPU-second / that peak
(for two threads, time spinning at barriers counts as CPU time too), where a prompt token
costs 2 x (parameters - embedding table) + 4 x layers x width x mean context FLOPs (the output
head runs on the last token only). ``uptime``'s load average is printed beside every figure: on a
shared machine the numbers are lower bounds. Results are appended to
``experiments/results/bench_generation.md`` (``--no-save`` to skip).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import cpu_line, run_once  # run_once: the same run, timed the same way, as the default-run benchmark

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "results" / "bench_generation.md"
FILLER = (
    "The river delta formed over thousands of years as sediment carried from the mountains settled "
    "where the current slowed. Farmers used the fertile soil to grow rice, and the towns along the "
    "banks traded fish, salt and cloth with merchants who arrived by boat each spring. "
)


def load() -> str:
    return "load %.2f %.2f %.2f" % os.getloadavg()


# -- child process: one measurement ---------------------------------------------------------------
def worker(spec: dict) -> dict:
    sys.path.insert(0, str(ROOT / "src"))
    from ragsweep.rag.generator.servers import cpu_backend

    variant = cpu_backend.load()  # llama.cpp's CPU code for this CPU (or $RAGSWEEP_LLAMA_CPU_VARIANT)
    import llama_cpp

    llm = llama_cpp.Llama(model_path=spec["model"], n_ctx=spec["prompt"] + spec["decode"] + 64,
                          n_batch=512, n_threads=spec["n_threads"], n_threads_batch=spec["n_threads_batch"],
                          flash_attn=spec.get("flash_attn", False), seed=0, verbose=False)
    tokens = llm.tokenize((FILLER * (spec["prompt"] // 40 + 2)).encode())[: spec["prompt"]]
    llm.eval(tokens[:16])  # first call allocates buffers
    out = []
    for _ in range(spec["reps"]):
        llm.reset()
        c0, t0 = time.process_time(), time.perf_counter()
        llm.eval(tokens)
        c1, t1 = time.process_time(), time.perf_counter()
        for _ in range(spec["decode"]):
            tok = llm.sample(temp=0.0, top_k=1)
            llm.eval([tok])
        c2, t2 = time.process_time(), time.perf_counter()
        out.append((len(tokens) / (t1 - t0), spec["decode"] / (t2 - t1),
                     len(tokens) / max(c1 - c0, 1e-9), spec["decode"] / max(c2 - c1, 1e-9)))
    model = llm.model
    n_params = llama_cpp.llama_model_n_params(model)
    n_embd = llama_cpp.llama_model_n_embd(model)
    n_layer = llama_cpp.llama_model_n_layer(model)
    n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
    flop = 2 * (n_params - n_vocab * n_embd) + 4 * n_layer * n_embd * (len(tokens) / 2)
    return {"prompt_tps": [o[0] for o in out], "decode_tps": [o[1] for o in out], "prompt_cpu": [o[2] for o in out],
            "decode_cpu": [o[3] for o in out], "flop_per_token": flop, "n_params": n_params, "variant": variant}


def matmul_peak(threads: int, n: int = 2048, reps: int = 5) -> tuple[float, float]:
    """numpy float32 GEMM on ``threads`` threads, best of ``reps``: (GFLOP/s of wall time, GFLOP per
    CPU-second of the process). On a shared machine only the second is a property of the core."""
    code = f"""
import time, numpy as np
from threadpoolctl import threadpool_limits
a = np.random.rand({n}, {n}).astype(np.float32); b = np.random.rand({n}, {n}).astype(np.float32)
with threadpool_limits({threads}):
    a @ b
    walls, cpus = [], []
    for _ in range({reps}):
        c0, t0 = time.process_time(), time.perf_counter()
        a @ b
        walls.append(time.perf_counter() - t0); cpus.append(time.process_time() - c0)
print(2 * {n}**3 / min(walls) / 1e9, 2 * {n}**3 / min(cpus) / 1e9)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1])


def mem_bandwidth(gb: float = 1.0, reps: int = 5) -> float:
    """What one thread reads from memory: numpy summing a ``gb`` GB float32 array (far larger than
    any cache), best of ``reps``, GB per CPU-second (a stalled load counts as CPU time; time the
    process was descheduled does not). Decoding one token reads every weight once (SmolLM2's
    output head is its embedding table), so weight bytes / this = the decode bound of a format."""
    code = f"""
import time, numpy as np
a = np.ones(int({gb} * 2**30 / 4), dtype=np.float32); a.sum()
best = 1e9
for _ in range({reps}):
    t0 = time.process_time(); a.sum(); best = min(best, time.process_time() - t0)
print(a.nbytes / best / 1e9)
"""
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def measure(model: str, n_threads: int, n_threads_batch: int, wait: str, busy: bool, args, procs: int = 1,
            variant: str = "best") -> dict:
    env = dict(os.environ)
    env.pop("RAGSWEEP_LLAMA_CPU_VARIANT", None)
    if variant != "best":
        env["RAGSWEEP_LLAMA_CPU_VARIANT"] = variant
    env.pop("OMP_WAIT_POLICY", None)
    if wait != "default":
        env["OMP_WAIT_POLICY"] = wait.upper()
    spec = {"model": model, "n_threads": n_threads, "n_threads_batch": n_threads_batch,
            "prompt": args.prompt_tokens, "decode": args.decode, "reps": 1, "flash_attn": args.flash_attn == "on"}
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        before = load()
        running = [subprocess.Popen([sys.executable, __file__, "--worker", json.dumps(spec)], env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(procs)]
        outs = [(pr.communicate(timeout=args.timeout), pr.returncode) for pr in running]
    except subprocess.TimeoutExpired:
        for pr in running:
            pr.kill()
        return {"error": [f"over {args.timeout:g}s"], "load": before}
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    for (out, err), rc in outs:
        if rc != 0:
            return {"error": err.strip().splitlines()[-1:] or [f"exit {rc}"], "load": before}
    each = [json.loads(out.strip().splitlines()[-1]) for (out, _), _ in outs]
    res = dict(each[0])
    for key in ("prompt_tps", "decode_tps"):  # side by side: the processes' tokens/s add up
        res[key] = [sum(r[key][i] for r in each) for i in range(len(each[0][key]))]
    res["load"] = before
    return res


def med(xs: list[float]) -> str:
    return f"{statistics.median(xs):.0f} ({min(xs):.0f}-{max(xs):.0f})" if len(xs) > 1 else f"{xs[0]:.0f}"


def run_ragsweep(cwd: Path, extra: list[str]) -> tuple[float, str]:
    """A fresh ``ragsweep`` process in ``cwd`` (its own cache there): wall seconds and its ``time:`` line."""
    wall, _, out = run_once(cwd, extra)
    return wall, next((ln for ln in out.splitlines() if ln.startswith("time: ")), "time: ?")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--formats", default="source,f16,bf16,q8_0,q4_0", help="model_format values (source = the packaged Q4_1)")
    p.add_argument("--threads", default="1/1,2/2,1/2", help="n_threads/n_threads_batch pairs")
    p.add_argument("--wait", default="default,passive", help="OMP_WAIT_POLICY values (default = unset)")
    p.add_argument("--procs", default="1", help="processes answering side by side (generator.server.replicas)")
    p.add_argument("--variants", default="best", help="llama.cpp CPU variants: best (this CPU's), haswell (AVX2), ...")
    p.add_argument("--no-busy", action="store_true", help="skip the runs beside a busy process")
    p.add_argument("--busy-only", action="store_true")
    p.add_argument("--prompt-tokens", type=int, default=800)
    p.add_argument("--decode", type=int, default=64)
    p.add_argument("--flash-attn", default="on", choices=("on", "off"),
                   help="llama.cpp's flash attention: on (default), as ragsweep serves (flash_attn: auto, which "
                        "llama-server turns on for the CPU), or off")
    p.add_argument("--reps", type=int, default=3, help="rounds: every setting once per round, interleaved")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--default-run", action="store_true", help="also time ragsweep dataset.limit=20, cold then warm")
    p.add_argument("--chunk-point", action="store_true", help="also time one 20-question chunk-size-600 point")
    p.add_argument("--chunk-formats", default="experiment,f16",
                   help="weights of the chunk-size point: 'experiment' (as it ships: auto's format) and/or a model_format")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--no-save", action="store_true")
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0

    sys.path.insert(0, str(ROOT / "src"))
    from ragsweep.rag.generator.servers.gguf_format import converted_model
    from ragsweep.rag.generator.servers.llamacpp import resolve_model_path

    src = resolve_model_path("smollm2")
    cache = Path(tempfile.mkdtemp(prefix="bench_gen_"))
    lines = [f"### bench_generation on {os.cpu_count()} cores ({platform.machine()}), "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             cpu_line(), "",
             f"{args.prompt_tokens}-token prompt, {args.decode} decoded tokens, flash attention {args.flash_attn}, {args.reps} interleaved rounds: median (min-max); "
             "load = 1/5/15-min load average before the setting ran (a shared machine: lower bounds)", ""]
    peaks = {}
    for t in (1, 2):
        wall, peaks[t] = matmul_peak(t)
        lines.append(f"numpy float32 GEMM 2048^3 on {t} thread(s): {wall:.0f} GFLOP/s wall, "
                     f"{peaks[t]:.0f} GFLOP per CPU-second ({load()})")
    bandwidth = mem_bandwidth()
    lines.append(f"memory read by one thread (numpy sum of 1 GB float32): {bandwidth:.1f} GB per CPU-second ({load()})")
    lines += ["", "| weights | [processes x] n_threads/batch | OMP_WAIT_POLICY | busy process added | prompt tok/s | decode tok/s | prompt tok per CPU-s | decode tok per CPU-s | prompt share of GEMM peak (per CPU-s) | decode bound of the weights' bytes, tok/s (decode per CPU-s / bound) | load (per round) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    busy_modes = [True] if args.busy_only else [False] if args.no_busy else [False, True]
    settings = []
    for fmt in args.formats.split(","):
        model, _ = converted_model(src, fmt, cache)
        for pair in args.threads.split(","):
            nt, nb = (int(x) for x in pair.split("/"))
            for wait in args.wait.split(","):
                for busy in busy_modes:
                    for procs in (int(x) for x in args.procs.split(",")):
                        for variant in args.variants.split(","):
                            settings.append((fmt, str(model), nt, nb, wait, busy, procs, variant))
    # interleaved: every setting once per round, so a shared machine's drifting load hits all alike
    got: dict[tuple, list[dict]] = {st: [] for st in settings}
    for rnd in range(args.reps):
        if rnd:  # the host's speed drifts: the GEMM and memory references again, the best kept
            for t in (1, 2):
                peaks[t] = max(peaks[t], matmul_peak(t)[1])
            bandwidth = max(bandwidth, mem_bandwidth())
        for st in settings:
            fmt, model, nt, nb, wait, busy, procs, variant = st
            r = measure(model, nt, nb, wait, busy, args, procs, variant)
            got[st].append(r)
            print(f"  round {rnd + 1}: {fmt} [{variant}] {procs}x {nt}/{nb} {wait} {'busy' if busy else 'idle'}: "
                  + (f"error {r['error']}" if "error" in r else
                     f"prompt {r['prompt_tps'][0]:.0f} tok/s ({r['prompt_cpu'][0]:.0f}/CPU-s), decode {r['decode_tps'][0]:.0f} tok/s, {r['load']}"),
                  file=sys.stderr, flush=True)
    if args.reps > 1:
        lines.append(f"references, the best of the {args.reps} rounds' measurements (each round measures them again): "
                     f"GEMM {peaks[1]:.0f} GFLOP per CPU-second on 1 thread, {peaks[2]:.0f} on 2; memory "
                     f"{bandwidth:.1f} GB per CPU-second")
        print(lines[-1], flush=True)
    for st in settings:
        fmt, model, nt, nb, wait, busy, procs, variant = st
        ok = [r for r in got[st] if "error" not in r]
        label = ("Q4_1 (source)" if fmt == "source" else fmt.upper()) + (f" [{ok[0]['variant'] if ok else variant}]"
                                                                         if args.variants != "best" else "")
        loads = "; ".join(r["load"].replace("load ", "") for r in got[st])
        nt_label = f"{procs} x {nt}/{nb}" if procs > 1 else f"{nt}/{nb}"
        if not ok:
            row = f"| {label} | {nt_label} | {wait} | {'1 busy process' if busy else 'none'} | error: {got[st][0]['error']} | | | | | | {loads} |"
        else:
            pt, dt = [x for r in ok for x in r["prompt_tps"]], [x for r in ok for x in r["decode_tps"]]
            pc, dc = [x for r in ok for x in r["prompt_cpu"]], [x for r in ok for x in r["decode_cpu"]]
            share = statistics.median(pc) * ok[0]["flop_per_token"] / 1e9 / peaks[min(max(nb, 1), 2)]
            bound = bandwidth / (os.path.getsize(model) / 1e9)  # tokens/s if every weight byte is read once
            row = (f"| {label} | {nt_label} | {wait} | {'1 busy process' if busy else 'none'} | {med(pt)} | {med(dt)} | "
                   f"{med(pc)} | {med(dc)} | {share:.0%} | {bound:.0f} ({statistics.median(dc) / bound:.0%}) | {loads} |")
        lines.append(row)
        print(row, flush=True)
    if args.default_run or args.chunk_point:
        lines.append("")
        with tempfile.TemporaryDirectory(prefix="bench_gen_run_") as tmp:
            work = Path(tmp)
            if args.default_run:
                for label in ("cold", "warm"):
                    before = load()
                    wall, stages = run_ragsweep(work, [f"dataset.limit={args.limit}"])
                    row = f"- `ragsweep dataset.limit={args.limit}` {label}: {wall:.1f} s wall; {stages} ({before})"
                    lines.append(row)
                    print(row, flush=True)
            if args.chunk_point:
                for fmt in args.chunk_formats.split(","):
                    extra = [] if fmt == "experiment" else [f"generator.server.model_format={fmt}"]
                    point = work / f"chunk-{fmt}"  # cold: its own cache
                    point.mkdir()
                    before = load()
                    wall, stages = run_ragsweep(point, ["+experiment=ragchecker_chunk_size", "chunker.size=600",
                                                        f"dataset.limit={args.limit}", *extra])
                    row = (f"- one chunk-size-600 point (`+experiment=ragchecker_chunk_size chunker.size=600 "
                           f"dataset.limit={args.limit}{' ' + extra[0] if extra else ''}`, k=20"
                           f"{', the format the experiment runs on' if not extra else ''}), cold: {wall:.1f} s wall; "
                           f"{stages} ({before})")
                    lines.append(row)
                    print(row, flush=True)
    if not args.no_save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        with RESULTS.open("a") as fh:
            fh.write("\n".join(lines) + "\n\n")
        print(f"appended to {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
