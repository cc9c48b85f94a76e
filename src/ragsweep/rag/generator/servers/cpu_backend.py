"""Which of llama.cpp's CPU backends runs on this machine.

``scripts/build_llama_cpp.py`` builds llama.cpp's CPU code once per x86-64 level it offers
(``GGML_BACKEND_DL`` + ``GGML_CPU_ALL_VARIANTS``): ``llama_cpp/lib/libggml-cpu-<variant>.so``
for ``x64`` (SSE2) up to ``haswell`` (AVX2), ``skylakex``/``icelake``/``zen4`` (AVX-512) and
``sapphirerapids`` (AVX-512 + AMX). Each file exports a score: 0 when this CPU lacks one of its
instructions, else a sum of bits per feature; llama.cpp loads the highest. One wheel thus runs on
any x86-64 CPU and uses AVX-512/AMX where they exist.

llama.cpp looks for those files beside the executable (python's ``bin/``) and in the current
directory, not in ``llama_cpp/lib`` where llama-cpp-python installs them, so :func:`load` asks it
to look there (``ggml_backend_load_all_from_path``) before any model is loaded. A process that
serves a model starts through this module: ``python -m ragsweep.rag.generator.servers.cpu_backend
llama_cpp.server ARGS`` loads the backend, prints which variant on stderr (the server's log), then
runs ``llama_cpp.server``. ``llama-server`` (llama.cpp's own, in the same folder) finds them by itself.

Forcing a variant (``RAGSWEEP_LLAMA_CPU_VARIANT=haswell``, or ``load("haswell")``) loads that file
alone: the AVX2 code a CPU without AVX-512 would run. A build with the CPU code linked in (custom
``RAGSWEEP_LLAMA_CMAKE_ARGS``, a CUDA build) has no variant files: nothing to load, variant None.
"""

from __future__ import annotations

import importlib.util
import os
import re
import runpy
import sys
from pathlib import Path

ENV = "RAGSWEEP_LLAMA_CPU_VARIANT"

#: llama.cpp's feature name -> (the /proc/cpuinfo flags it needs, its bit in the score), as in
#: ggml/src/ggml-cpu/arch/x86/cpu-feats.cpp (``ggml_backend_cpu_x86_score``)
FEATURES: dict[str, tuple[tuple[str, ...], int]] = {
    "FMA": (("fma",), 1 << 0),
    "F16C": (("f16c",), 1 << 1),
    "SSE42": (("sse4_2",), 1 << 2),
    "BMI2": (("bmi2",), 1 << 3),
    "AVX": (("avx",), 1 << 4),
    "AVX2": (("avx2",), 1 << 5),
    "AVX_VNNI": (("avx_vnni",), 1 << 6),
    "AVX512": (("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"), 1 << 7),
    "AVX512_VBMI": (("avx512vbmi",), 1 << 8),
    "AVX512_BF16": (("avx512_bf16",), 1 << 9),
    "AVX512_VNNI": (("avx512_vnni",), 1 << 10),
    "AMX_INT8": (("amx_int8",), 1 << 11),
}
_AVX2 = ("SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2")
_AVX512 = (*_AVX2, "AVX512")
#: the x86-64 variants llama.cpp builds (ggml/src/CMakeLists.txt, GGML_CPU_ALL_VARIANTS), lowest first
VARIANTS: dict[str, tuple[str, ...]] = {
    "x64": (),
    "sse42": ("SSE42",),
    "sandybridge": ("SSE42", "AVX"),
    "ivybridge": ("SSE42", "AVX", "F16C"),
    "piledriver": ("SSE42", "AVX", "F16C", "FMA"),
    "haswell": _AVX2,
    "skylakex": _AVX512,
    "cannonlake": (*_AVX512, "AVX512_VBMI"),
    "cascadelake": (*_AVX512, "AVX512_VNNI"),
    "icelake": (*_AVX512, "AVX512_VBMI", "AVX512_VNNI"),
    "cooperlake": (*_AVX512, "AVX512_VNNI", "AVX512_BF16"),
    "zen4": (*_AVX512, "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16"),
    "alderlake": (*_AVX2, "AVX_VNNI"),
    "sapphirerapids": (*_AVX512, "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_INT8"),
}
#: variants never chosen by themselves (forcing one still loads it) unless the installed build's
#: record (``scripts/build_llama_cpp.py``) holds the flag of ``FIXED_BY`` that makes them safe.
#: llama.cpp's AMX kernels (Q4_0/Q4_1/Q8_0 weights) die with SIGILL on their first tile
#: instruction when GCC 12 compiles them: its ``_tile_loadconfig`` declares an 8-byte read of the
#: 64-byte tile configuration, so the stores that fill the rest are dropped and ``ldtilecfg``
#: loads an empty one (the disassembly shows it; ggml-org/llama.cpp#26954 fixes it in the source).
#: Built with ``-fno-dse`` the stores stay and the variant runs; without it, the next best (zen4
#: on a Sapphire Rapids Xeon: every AVX-512 extension it has, without AMX) runs every format.
SKIPPED = {"sapphirerapids": "its AMX kernels crash (SIGILL) when GCC builds them without -fno-dse "
                             "(ggml-org/llama.cpp#26954); rebuild: python scripts/build_llama_cpp.py"}
FIXED_BY = {"sapphirerapids": "-fno-dse"}
#: what ``llama_print_system_info`` reports of each feature (SSE4.2 shows as SSE3/SSSE3)
_REPORTED = {"SSE42": {"SSE3", "SSSE3"}}
_PREFIX, _SUFFIX = "libggml-cpu-", ".so"
_loaded: str | None = None
_done = False


class CpuBackendError(RuntimeError):
    """A forced variant that is not built or that this CPU cannot run; the message names the fix."""


def lib_dir() -> Path | None:
    """``llama_cpp/lib`` of the installed llama-cpp-python (found without importing it)."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "lib"


def available(directory: Path | None = None) -> list[str]:
    """The variants built into this install, lowest first (empty: CPU code linked in)."""
    directory = lib_dir() if directory is None else directory
    if directory is None or not directory.is_dir():
        return []
    names = {p.name[len(_PREFIX):-len(_SUFFIX)] for p in directory.glob(f"{_PREFIX}*{_SUFFIX}")}
    return [v for v in VARIANTS if v in names] + sorted(names - set(VARIANTS))


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """This CPU's feature flags (the first ``flags`` line of /proc/cpuinfo)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return set()
    m = re.search(r"^flags\s*:(.*)$", cpuinfo, re.M)
    return set(m.group(1).split()) if m else set()


def missing(variant: str, flags: set[str]) -> list[str]:
    """The llama.cpp features of ``variant`` that a CPU with ``flags`` lacks."""
    return [f for f in VARIANTS[variant] if not set(FEATURES[f][0]) <= flags]


def score(variant: str, flags: set[str]) -> int:
    """llama.cpp's score of ``variant`` on a CPU with ``flags``: 0 if it cannot run it."""
    if missing(variant, flags):
        return 0
    return 1 + sum(FEATURES[f][1] for f in VARIANTS[variant])


def best_variant(flags: set[str], built: list[str] | None = None, skip: bool = False) -> str | None:
    """The variant llama.cpp's scores pick on a CPU with ``flags``, among ``built`` (default:
    all); ``skip``: never one of :func:`skipped` (what :func:`load` loads)."""
    avoid = skipped() if skip else {}
    scored = [(score(v, flags), v) for v in (built if built is not None else VARIANTS)
              if v in VARIANTS and v not in avoid]
    top = max(scored, default=(0, None))
    return top[1] if top[0] > 0 else None


def skipped(record: dict | None = None) -> dict[str, str]:
    """The variants of ``SKIPPED`` this install's build does not show fixed (its build record's
    CMake flags lack the ``FIXED_BY`` flag, or it has no record), each with why."""
    if record is None:
        from ragsweep.rag.generator.servers.llama_build import build_record

        record = build_record()
    flags = str(record.get("cmake_args", "")).split()
    return {v: why for v, why in SKIPPED.items() if not any(f.endswith(FIXED_BY[v]) for f in flags)}


def variant_of(features: set[str]) -> str | None:
    """The variant whose compiled x86 features are ``features`` (as the loaded backend reports them)."""
    x86 = {f for f in features if f in {n for names in _REPORTED.values() for n in names} | set(FEATURES)}
    for name, feats in VARIANTS.items():
        want = set().union(*[_REPORTED.get(f, {f}) for f in feats]) if feats else set()
        if want == x86:
            return name
    return None


def reported_features(info: str) -> set[str]:
    """The features a ``llama_print_system_info`` string reports as on (``AVX2 = 1``)."""
    return {m.group(1) for m in re.finditer(r"(\w+) = 1\b", info)}


def load(variant: str | None = None) -> str | None:
    """Load llama.cpp's CPU backend into this process, once, before any model: ``variant`` (or
    ``$RAGSWEEP_LLAMA_CPU_VARIANT``) alone, else llama.cpp's best for this CPU. Returns the
    variant in use; None for a build without variant files (its CPU code is linked in)."""
    global _loaded, _done
    if _done:
        return _loaded
    directory = lib_dir()
    built = available(directory)
    forced = (variant or os.environ.get(ENV) or "").strip() or None
    if not built:
        if forced:
            raise CpuBackendError(f"{ENV}={forced} but this llama-cpp-python has no CPU variant files "
                                  f"(in {directory}): it was not built by scripts/build_llama_cpp.py's default "
                                  f"flags; unset {ENV} or rebuild: python scripts/build_llama_cpp.py")
        _done = True
        return None
    lib = _libggml(directory)
    import ctypes

    lib.ggml_backend_reg_count.restype = ctypes.c_size_t
    flags = cpu_flags()
    if not forced:  # llama.cpp's own choice, unless that is a variant known to crash here
        choice = best_variant(flags, built, skip=True)
        if choice != best_variant(flags, built):
            forced = choice
    if forced:
        if forced not in built:
            raise CpuBackendError(f"{ENV}={forced!r} is not a CPU variant of this llama.cpp build; "
                                  f"use one of {', '.join(built)} (or unset it: the best for this CPU)")
        lack = missing(forced, flags) if forced in VARIANTS else []
        if lack:
            raise CpuBackendError(f"{ENV}={forced}: this CPU lacks {', '.join(lack)}, which that variant "
                                  f"needs; use {best_variant(flags, built)} or a lower one, or unset it")
        lib.ggml_backend_load.argtypes = [ctypes.c_char_p]
        lib.ggml_backend_load.restype = ctypes.c_void_p
        if not lib.ggml_backend_load(str(directory / f"{_PREFIX}{forced}{_SUFFIX}").encode()):
            raise CpuBackendError(f"llama.cpp refused to load its {forced} CPU backend from {directory}")
    elif lib.ggml_backend_reg_count() == 0:
        lib.ggml_backend_load_all_from_path.argtypes = [ctypes.c_char_p]
        lib.ggml_backend_load_all_from_path(str(directory).encode())
    _loaded = loaded_variant()
    _done = True
    return _loaded


def _libggml(directory: Path):
    """The libggml that libllama itself uses (its registry is the one models see). A wheel stores
    ``libggml.so``, ``.so.0`` and ``.so.0.x`` as separate copies, not links: opening another copy
    than libllama's would load a second ggml with a registry of its own."""
    import ctypes

    import llama_cpp  # noqa: F401 - loads libllama, and with it libggml by its soname

    mapped = []
    try:
        mapped = [ln.split()[-1] for ln in Path("/proc/self/maps").read_text().splitlines()
                  if re.search(r"/libggml\.so[.0-9]*$", ln)]
    except OSError:
        pass
    path = next(iter(mapped), None) or next((str(p) for p in (directory / "libggml.so.0", directory / "libggml.so")
                                             if p.is_file()), "libggml.so.0")
    return ctypes.CDLL(path)


def planned_variant() -> str | None:
    """The variant :func:`load` would load in a process started now (without loading it)."""
    built = available()
    if not built:
        return None
    return (os.environ.get(ENV) or "").strip() or best_variant(cpu_flags(), built, skip=True)


def binary_dir() -> Path | None:
    """Where to start llama.cpp's own programs (``llama-server``) so they load :func:`planned_variant`:
    they load the best variant beside their executable, so for a forced or skipped one this is a
    folder (in the user's cache, made once) holding a copy of each program and links to the
    libraries and to that variant alone."""
    directory = lib_dir()
    variant = planned_variant()
    if directory is None or variant is None or variant == best_variant(cpu_flags(), available()):
        return directory
    import hashlib
    import shutil

    tag = hashlib.sha256(f"{directory.resolve()}:{(directory / 'libllama.so').stat().st_mtime_ns}".encode()).hexdigest()[:12]
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    out = base / "ragsweep" / "llama-bin" / f"{tag}-{variant}"
    if (out / ".done").is_file():
        return out
    import tempfile

    out.parent.mkdir(parents=True, exist_ok=True)
    # a folder of its own for each caller: jobs may make it at once, in processes or in threads of
    # one process (a Ray worker runs several jobs)
    tmp = Path(tempfile.mkdtemp(prefix=f"{out.name}.", suffix=".tmp", dir=out.parent))
    for f in directory.iterdir():
        if f.name.startswith(_PREFIX) and f.name != f"{_PREFIX}{variant}{_SUFFIX}":
            continue
        if f.suffix == ".so" or ".so." in f.name:
            (tmp / f.name).symlink_to(f.resolve())
        elif f.is_file() and os.access(f, os.X_OK):  # a program: a copy, so its own folder is this one
            shutil.copy2(f, tmp / f.name)
    (tmp / ".done").write_text(variant + "\n")
    try:
        tmp.rename(out)
    except OSError:  # another process made it meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def loaded_variant() -> str | None:
    """The variant this process runs, from the features its loaded CPU backend reports."""
    import llama_cpp

    return variant_of(reported_features(llama_cpp.llama_print_system_info().decode(errors="replace")))


def describe(variant: str | None) -> str:
    """One line for logs and ``ragsweep-doctor``: the variant and its instruction sets."""
    if variant is None:
        return "CPU code linked in (no per-CPU variants in this build)"
    feats = VARIANTS.get(variant)
    top = [f for f in ("AMX_INT8", "AVX512_BF16", "AVX512_VNNI", "AVX512", "AVX_VNNI", "AVX2", "AVX", "SSE42")
           if feats and f in feats]
    if os.environ.get(ENV):
        how = "forced by " + ENV
    else:
        passed = [f"not {v}: {why}" for v, why in skipped().items() if v in available() and score(v, cpu_flags())]
        how = "; ".join(["the best of " + ", ".join(available()), *passed])
    return f"{variant} ({', '.join(top[:3]) or 'SSE2'}; {how})"


def variant_in_log(path: str | os.PathLike | None) -> str | None:
    """The variant a server process named in its log (started through :func:`main`, or
    llama-server), else None."""
    try:
        with open(path or "", encoding="utf-8", errors="replace") as fh:
            head = [next(fh, "") for _ in range(40)]
    except OSError:
        return None
    # ours (cpu_backend.main), else llama.cpp's own ("load_backend: loaded CPU backend from .../libggml-cpu-zen4.so")
    for pattern in (r"llama\.cpp CPU backend: (\S+)", r"loaded CPU backend from \S*/libggml-cpu-(\w+)\.so"):
        m = next((m for m in (re.search(pattern, ln) for ln in head) if m), None)
        if m:
            return m.group(1)
    return None


def main(argv: list[str] | None = None) -> None:
    """``python -m ragsweep.rag.generator.servers.cpu_backend MODULE ARGS...``: load the CPU
    backend, say which on stderr, then run ``python -m MODULE ARGS...`` in this process."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        variant = load()
    except CpuBackendError as exc:
        sys.exit(f"llama.cpp CPU backend: {exc}")
    print(f"llama.cpp CPU backend: {describe(variant)}", file=sys.stderr, flush=True)
    if argv:
        sys.argv = [argv[0], *argv[1:]]
        runpy.run_module(argv[0], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
