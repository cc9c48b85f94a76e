"""``model_format: auto`` for the bundled SmolLM2: the weight format this machine runs fastest,
chosen by measuring, once per machine.

Which format is fastest depends on the CPU and on which of llama.cpp's CPU backends it loads
(``cpu_backend``): on an AVX2 AMD EPYC F16 is fastest, on an AVX-512 Xeon Q8_0 decodes faster.
So on first use the packaged Q4_1 file is converted to each candidate (``CANDIDATES``: the
formats that keep the packaged weights' quality; Q4_0 does not) with llama.cpp's quantize API
(~1 s each, kept in the run's conversion cache) and each is timed in a child process on one thread, with
flash attention as the server runs it: a prompt of ``PROBE_PROMPT`` tokens, then ``PROBE_DECODE`` greedy tokens, ``ROUNDS`` interleaved rounds, best of each, in tokens per
CPU-second (what one server process's core does, whatever else the machine runs). The format
with the least CPU time for a typical question (``MIX``: the default run's 789 prompt + 83
decoded tokens a question) wins, unless one listed before it in ``CANDIDATES`` comes within
``MARGIN`` (5%) of it: differences that small are the probe's own noise, and the packaged file,
listed first, then serves. The table and the choice are logged and remembered in
``<choice dir>/<machine key>.json`` (``$RAGSWEEP_FORMAT_CHOICE_DIR``, else
``$XDG_CACHE_HOME/ragsweep/format_choice``): the key is the CPU model, its flags, the llama.cpp
version and build, a forced CPU variant and the model file, so another machine, build or model
measures again; a file lock makes concurrent jobs of a sweep measure once and agree.

``ragsweep-doctor`` does not wait for the measurement: it starts it in a process of its own
(:func:`start_background`, at a lower priority, its log beside the choice) and answers in seconds;
a run that needs the choice while that process measures waits for it (the same file lock), so the
formats are measured once, and a first run started a minute after the doctor finds them measured.

Answers differ between formats (greedy tokens change), so the run logs which format answered
(``served/model_format``) and cached answers are keyed by it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

log = logging.getLogger(__name__)
#: this module's name for ``python -m`` (not ``__name__``: run as the background process, that is __main__)
MODULE = "ragsweep.rag.generator.servers.format_choice"

#: the formats auto chooses among: those that hold the packaged Q4_1 weights without a second coarse
#: rounding. Quality is a property of the weights, not of the machine, so it is measured once, here,
#: and speed on each machine: on 50 ClapNQ questions (paired against F16, offline judge) BF16 and
#: Q8_0 answered as well as F16 (token F1 -0.001 and -0.003) and the packaged Q4_1 no worse (+0.022,
#: n.s.), while Q4_0, a second 4-bit rounding, lost 0.080 [-0.125, -0.038] (Holm p 0.011) and added
#: 16.7 points of hallucination (experiments/results/cpu_speed.md). Q4_0 serves only when named.
CANDIDATES = ("source", "f16", "bf16", "q8_0")
MIX = (789, 83)  # prompt, decoded tokens of a typical question: the default run's 15,777 + 1,653 over 20
# the probe reads a typical question's prompt, so that its decoding runs over a typical cache: with a
# 256-token prompt, decoding skipped most of the attention a question pays, and on the Xeon with AMX
# Q8_0 came out 1.5% ahead of Q4_1, which is 12% ahead at 789 tokens (experiments/results/cpu_speed.md)
# best of 4 rounds: on the Xeon one format's figures moved by up to 25% between rounds, seconds apart
PROBE_PROMPT, PROBE_DECODE, ROUNDS = MIX[0], 16, 4
DROP = 2.0  # a format twice as slow as the fastest after round 1 is not timed again (F16/BF16 with AMX)
# within this share of the fastest, a format listed earlier wins: two probes of the Xeon, minutes
# apart, put Q8_0 0.6% ahead of the packaged Q4_1 and 4.9% behind it
MARGIN = 0.05
ENV_DIR = "RAGSWEEP_FORMAT_CHOICE_DIR"
FILLER = ("The river delta formed over thousands of years as sediment carried from the mountains settled "
          "where the current slowed, and the towns along the banks traded fish, salt and cloth. ")


def choice_dir() -> Path:
    """Where choices are remembered: ``$RAGSWEEP_FORMAT_CHOICE_DIR``, else the user's cache."""
    if os.environ.get(ENV_DIR):
        return Path(os.environ[ENV_DIR])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ragsweep" / "format_choice"


def machine() -> dict[str, Any]:
    """What a choice holds for: CPU model and flags, llama.cpp version and build, forced variant."""
    from importlib import metadata

    from ragsweep.rag.generator.servers import cpu_backend, llama_build

    model = ""
    with contextlib.suppress(OSError):
        model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                      if ln.startswith("model name")), "")
    try:
        version = metadata.version("llama_cpp_python")
    except metadata.PackageNotFoundError:
        version = "?"
    build = llama_build.build_record().get("key", "")
    return {"cpu": model or platform.processor() or platform.machine(), "flags": sorted(cpu_backend.cpu_flags()),
            "llama_cpp": version, "build": build, "forced_variant": os.environ.get(cpu_backend.ENV) or None}


def machine_key(source: Path, info: dict[str, Any] | None = None) -> str:
    info = machine() if info is None else info
    ident = json.dumps([info, Path(source).name, Path(source).stat().st_size], sort_keys=True)
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def question_seconds(rates: dict[str, float], mix: tuple[int, int] = MIX) -> float:
    """CPU seconds of one typical question at these prompt/decode tokens per CPU-second."""
    return mix[0] / rates["prompt_tps"] + mix[1] / rates["decode_tps"]


def pick(table: dict[str, dict[str, float]]) -> str:
    """The format with the least CPU time per typical question; one within ``MARGIN`` of it that
    comes earlier in ``CANDIDATES`` (the packaged file first) is preferred, since two probes of the
    same machine differ by about that much."""
    ok = {f: r for f, r in table.items() if r.get("prompt_tps", 0) > 0 and r.get("decode_tps", 0) > 0}
    if not ok:
        raise RuntimeError(f"no candidate weight format could be measured: {table}")
    best = min(question_seconds(r) for r in ok.values())
    near = [f for f in ok if question_seconds(ok[f]) <= best * (1 + MARGIN)]
    return min(near, key=lambda f: (CANDIDATES.index(f) if f in CANDIDATES else 99, question_seconds(ok[f])))


def table_lines(table: dict[str, dict[str, Any]], choice: str) -> list[str]:
    rows = [f"{'format':8} {'prompt tok/CPU-s':>16} {'decode tok/CPU-s':>16} {'s/question':>10}"]
    for fmt, r in table.items():
        if r.get("prompt_tps"):
            rows.append(f"{fmt:8} {r['prompt_tps']:16.0f} {r['decode_tps']:16.1f} {question_seconds(r):10.2f}"
                        + ("  <- chosen" if fmt == choice else ""))
        else:
            rows.append(f"{fmt:8} failed: {r.get('error', '?')}")
    return rows


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def remembered(source: Path) -> dict[str, Any] | None:
    """The choice made earlier on this machine for ``source``, or None."""
    path = choice_dir() / f"{machine_key(source)}.json"
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    # a choice made among other candidates (an earlier ragsweep) is measured again
    return rec if rec.get("choice") in CANDIDATES and rec.get("candidates") == list(CANDIDATES) else None


def _running_path(source: Path, info: dict[str, Any] | None = None) -> Path:
    return choice_dir() / f"{machine_key(source, info)}.running.json"


def running(source: Path) -> dict[str, Any] | None:
    """The background measurement of ``source``'s formats now under way ({pid, started, log}), or None."""
    try:
        rec = json.loads(_running_path(source).read_text())
        os.kill(int(rec["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return rec


def start_background(source: Path, cache_dir: Path | None = None) -> dict[str, Any] | None:
    """Measure ``source``'s formats in a process of its own (lower priority, its own session, its
    output in ``<choice dir>/<machine key>.log``) unless they are remembered (None) or already being
    measured (that process's record); returns at once with {pid, started, log}."""
    if remembered(source) is not None:
        return None
    now = running(source)
    if now is not None:
        return now
    info = machine()
    key = machine_key(source, info)
    log_path = choice_dir() / f"{key}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", MODULE, "--choose", str(source)]
    if cache_dir is not None:
        cmd += ["--cache-dir", str(cache_dir)]
    with open(log_path, "w") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=lambda: os.nice(10))
    rec = {"pid": proc.pid, "started": time.strftime("%Y-%m-%d %H:%M:%S"), "log": str(log_path)}
    tmp = choice_dir() / f"{key}.running.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(rec) + "\n")
    os.replace(tmp, _running_path(source, info))
    return rec


_PENDING: list[tuple[Path, Path | None]] = []


def start_later(source: Path, cache_dir: Path | None = None) -> None:
    """Have :func:`start_pending` measure ``source``'s formats in the background (unless under way)."""
    if running(source) is None and (source, cache_dir) not in _PENDING:
        _PENDING.append((source, cache_dir))


def start_pending() -> list[str]:
    """Start each measurement :func:`start_later` asked for; a line per one started, naming its log."""
    lines = []
    while _PENDING:
        source, cache_dir = _PENDING.pop(0)
        bg = start_background(source, cache_dir)
        if bg is not None:
            lines.append(f"measuring {Path(source).name}'s weight formats in the background now "
                         f"(pid {bg['pid']}, log {bg['log']})")
    return lines


def chosen_or_source(source: Path) -> str:
    """The remembered choice for ``source``, else ``source``, the file as packaged: for a check that
    must not wait for a measurement (the doctor's generation, while one may run in the background)."""
    rec = remembered(source)
    return rec["choice"] if rec else "source"


def choose(source: Path, cache_dir: Path | None = None, timeout_s: float = 300) -> str:
    """The fastest format of ``source`` on this machine: remembered, else measured now (or, while
    a background measurement holds the lock, its result once it is done)."""
    rec = remembered(source)
    if rec is not None:
        return rec["choice"]
    info = machine()
    path = choice_dir() / f"{machine_key(source, info)}.json"
    other = running(source)
    if other is not None and other["pid"] != os.getpid():
        log.info("model_format auto: waiting for the weight formats' measurement under way since %s (pid %s, "
                 "log %s)", other["started"], other["pid"], other["log"])
    with _locked(path.with_suffix(".lock")):
        rec = remembered(source)  # another job measured while this one waited
        if rec is not None:
            return rec["choice"]
        t0 = time.perf_counter()
        table, variant = measure(source, cache_dir, timeout_s)
        choice = pick(table)
        rec = {"choice": choice, "candidates": list(CANDIDATES), "table": table, "mix": list(MIX), "cpu_variant": variant, "machine": info,
               "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"), "load": list(os.getloadavg()),
               "seconds": round(time.perf_counter() - t0, 1), "source": str(source)}
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(rec, indent=1) + "\n")
        os.replace(tmp, path)
    log.info("model_format auto: measured %d weight formats of %s in %.1fs on %s (CPU backend %s, load %.1f):\n  %s\n"
             "chose %s; remembered in %s (delete it to measure again; set generator.server.model_format to override)",
             len(table), Path(source).name, rec["seconds"], info["cpu"], variant, rec["load"][0],
             "\n  ".join(table_lines(table, choice)), choice, path)
    return choice


def measure(source: Path, cache_dir: Path | None, timeout_s: float = 300) -> tuple[dict[str, dict[str, Any]], str | None]:
    """Each candidate converted (cached) and timed in one child process: (table, CPU variant)."""
    from ragsweep.rag.generator.servers.gguf_format import converted_model

    files, table = {}, {}
    for fmt in CANDIDATES:
        try:
            files[fmt] = str(converted_model(Path(source), fmt, cache_dir)[0])
        except RuntimeError as exc:
            table[fmt] = {"error": str(exc).splitlines()[0]}
    cmd = [sys.executable, "-m", MODULE, json.dumps(files)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        last = "\n".join(proc.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"timing the weight formats failed (exit {proc.returncode}): {last}\n"
                           f"set generator.server.model_format (e.g. f16) to skip the measurement")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    table.update(out["table"])
    return {f: table[f] for f in CANDIDATES if f in table}, out["variant"]


def probe(files: dict[str, str], rounds: int = ROUNDS) -> dict[str, Any]:
    """In this process: each file's prompt and decode tokens per CPU-second on one thread, best of
    ``rounds`` interleaved rounds; after the first, only the formats within ``DROP`` times the
    fastest question are timed again (the others keep their first figures)."""
    from ragsweep.rag.generator.servers import cpu_backend

    variant = cpu_backend.load()
    import llama_cpp

    best: dict[str, dict[str, float]] = {f: {"prompt_tps": 0.0, "decode_tps": 0.0} for f in files}
    active = dict(files)
    for rnd in range(rounds):
        if rnd == 1:  # after one round, only the formats that could still win are timed again
            fastest = min(question_seconds(r) for r in best.values())
            active = {f: p for f, p in files.items() if question_seconds(best[f]) <= DROP * fastest}
        for fmt, path in active.items():
            # flash attention on, as llama-server serves with ragsweep's flash_attn: auto on a CPU
            llm = llama_cpp.Llama(model_path=path, n_ctx=PROBE_PROMPT + PROBE_DECODE + 32, n_batch=512, n_threads=1,
                                  n_threads_batch=1, flash_attn=True, seed=0, verbose=False)
            tokens = llm.tokenize((FILLER * (PROBE_PROMPT // 30 + 2)).encode())[:PROBE_PROMPT]
            llm.eval(tokens[:8])  # the first call allocates buffers (and repacks weights)
            llm.reset()
            c0 = time.process_time()
            llm.eval(tokens)
            c1 = time.process_time()
            for _ in range(PROBE_DECODE):
                llm.eval([llm.sample(temp=0.0, top_k=1)])
            c2 = time.process_time()
            r = best[fmt]
            r["prompt_tps"] = max(r["prompt_tps"], round(len(tokens) / max(c1 - c0, 1e-9), 1))
            r["decode_tps"] = max(r["decode_tps"], round(PROBE_DECODE / max(c2 - c1, 1e-9), 1))
            llm.close()
    return {"table": best, "variant": variant}


def _choose_main(argv: list[str]) -> int:
    """``python -m ...format_choice --choose SOURCE [--cache-dir DIR]``: the background measurement."""
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--choose", required=True)
    p.add_argument("--cache-dir")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    source = Path(args.choose)
    try:
        choose(source, Path(args.cache_dir) if args.cache_dir else None)
    finally:
        with contextlib.suppress(OSError, ValueError):
            if json.loads(_running_path(source).read_text()).get("pid") == os.getpid():
                _running_path(source).unlink()
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--choose"]:
        sys.exit(_choose_main(sys.argv[1:]))
    print(json.dumps(probe(json.loads(sys.argv[1]))))
