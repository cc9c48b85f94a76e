"""Build and install llama-cpp-python for any x86-64 CPU, fast on each, never reusing a foreign wheel.

pip keys its wheel cache by package version only, so a wheel compiled with llama.cpp's default
``GGML_NATIVE=ON`` on one machine (AVX-512, AMX ...) is silently installed on the next machine,
where it dies with SIGILL/SIGSEGV. This script therefore:

* builds with explicit CMake flags (``DISPATCH_CMAKE_ARGS``): llama.cpp's CPU backend once per
  x86-64 level it offers (``GGML_BACKEND_DL`` + ``GGML_CPU_ALL_VARIANTS``: x64, SSE4.2, AVX,
  AVX2 "haswell", AVX-512 "skylakex"/"icelake"/"zen4"..., AMX "sapphirerapids"), each a
  ``libggml-cpu-<variant>.so`` beside ``libllama.so``; at run time the best one this CPU executes
  is loaded (``ragsweep.rag.generator.servers.cpu_backend``), so one wheel runs on any x86-64 CPU
  and uses AVX-512/AMX where they exist. llama.cpp's own ``llama-server`` (continuous batching)
  is built from the same source into the same folder. ``RAGSWEEP_LLAMA_CMAKE_ARGS`` replaces
  these flags (a native or CUDA/Metal build);
* patches llama.cpp's CPU flash attention for decoding (``PATCHES``): the sdist is downloaded,
  ``llama_patches/flash_attn_rows.cpp`` inserted into ``ggml-cpu/ops.cpp``, and the patched source
  built (``RAGSWEEP_LLAMA_PATCHES=0`` builds the source as published, for comparisons);
* always builds with ``--no-cache-dir`` (pip's cache never supplies the wheel);
* keeps the wheel it built under a directory named by a hash of (version, flags, patches, compiler,
  platform), so a later setup reuses it only when every one of those is the same;
* records what it installed in ``<venv>/share/ragsweep/llama_build.json`` for ``ragsweep-doctor``.

Standard library only: it runs before ragsweep is installed. Usage:

    python scripts/build_llama_cpp.py               # every CPU variant, the default
    python scripts/build_llama_cpp.py --wheel-only  # build (or find) the wheel, print its path
    RAGSWEEP_LLAMA_CMAKE_ARGS="-DGGML_NATIVE=ON" python scripts/build_llama_cpp.py   # this CPU only
    RAGSWEEP_LLAMA_CMAKE_ARGS="-DGGML_CUDA=on" python scripts/build_llama_cpp.py      # NVIDIA GPU
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Every flag a build machine could otherwise turn on by itself is set explicitly. The CPU
# backends are loadable modules, one per x86-64 level; they, llama-server and the libraries they
# link are installed into llama_cpp/lib (RPATH $ORIGIN), where the loader and llama-server look.
# No web UI (it would be downloaded), no HTTPS (loopback only); libmtmd comes from llama.cpp's
# tools (LLAVA_BUILD=OFF: llama-cpp-python would add the same folder a second time).
# -fno-dse: GCC 12's _tile_loadconfig (amxtileintrin.h) tells the compiler it reads 8 bytes of the
# 64-byte tile configuration, so GCC drops the stores that fill the rest and the AMX kernels of the
# sapphirerapids variant die with SIGILL on their first tile instruction (ggml-org/llama.cpp#26954
# fixes it in the source instead). Without dead-store elimination the stores stay; other code
# loses nothing measurable (experiments/results/cpu_speed.md). cpu_backend trusts that variant only
# in a build recorded with this flag.
DISPATCH_CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON "
    "-DCMAKE_C_FLAGS=-fno-dse -DCMAKE_CXX_FLAGS=-fno-dse "
    "-DCMAKE_INSTALL_BINDIR=llama_cpp/lib -DCMAKE_INSTALL_LIBDIR=llama_cpp/lib "
    "-DCMAKE_INSTALL_RPATH=$ORIGIN "
    "-DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_TOOLS_INSTALL=ON "
    "-DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAVA_BUILD=OFF"
)

# Decoding over a long context spends most of its attention time in llama.cpp's reference loop
# (ggml_compute_forward_flash_attn_ext_f16_one_chunk): per KV position and query head one
# dot-product call, one expf and an FP16 round trip of the accumulator. llama_patches/
# flash_attn_rows.cpp does the same sums for all the heads of a token at once, a block of positions
# at a time, with one vectorized exp and FP32 accumulators, on x86 CPUs with F16C and AVX2/AVX-512
# (other CPUs keep the reference loop). Each edit: (anchor that must occur once, its replacement,
# a file of llama_patches/ inserted before that replacement or None).
PATCH_DIR = Path(__file__).resolve().parent / "llama_patches"
OPS = "ggml/src/ggml-cpu/ops.cpp"
_ONE_CHUNK = "static void ggml_compute_forward_flash_attn_ext_f16_one_chunk(\n"
_ROWS = "    int ith = params->ith;\n\n    for (int ir = ir0; ir < ir1; ++ir) {\n        // q indices\n"
_SPLIT = """            for (int64_t q_head = 0; q_head < neq2; q_head++) {
                ggml_compute_forward_flash_attn_ext_f16_one_chunk(
                    params, dst, q_head, q_head + 1, ic_start, ic_end,
                    chunk_partials, partial_stride);
            }"""
PATCHES = {
    "flash_attn_rows": [
        (_ONE_CHUNK, _ONE_CHUNK, "flash_attn_rows.cpp"),
        (_ROWS, """#ifdef RAGSWEEP_FA_VEC
    if (!params->use_ref && ggml_fa_vec_supported(q, k, v)) {
        ggml_fa_vec_rows(dst, ir0, ir1, ic_start, ic_end, partials, partial_stride);
        return;
    }
#endif
""" + _ROWS, None),
        # all heads in one call (row = head, its partials at row*partial_stride as before), so the
        # rows of one decoded token are computed together
        (_SPLIT, """            ggml_compute_forward_flash_attn_ext_f16_one_chunk(
                params, dst, 0, (int) neq2, ic_start, ic_end,
                chunk_partials, partial_stride);""", None),
    ],
}


def patches_enabled() -> bool:
    return os.environ.get("RAGSWEEP_LLAMA_PATCHES", "1").strip() not in ("0", "off", "no", "false")


def patch_id() -> str:
    """A hash of every edit and inserted file: part of the build key."""
    h = hashlib.sha256(json.dumps(PATCHES, sort_keys=True).encode())
    for f in sorted(PATCH_DIR.glob("*.cpp")):
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:12]


def apply_patches(llama_dir: Path) -> list[str]:
    """Apply ``PATCHES`` to a llama.cpp source tree; each anchor must occur exactly once, else the
    source is not the one these edits were written for and the build stops, naming the edit."""
    path = llama_dir / OPS
    text = path.read_text()
    for name, edits in PATCHES.items():
        for i, (anchor, replacement, inserted) in enumerate(edits):
            n = text.count(anchor)
            if n != 1:
                sys.exit(f"build_llama_cpp: patch {name} edit {i + 1} expects its anchor once in {path}, found {n}: "
                         f"this llama.cpp differs from the one the patch was written for; update "
                         f"scripts/build_llama_cpp.py's PATCHES, or build unpatched with RAGSWEEP_LLAMA_PATCHES=0")
            if inserted:
                replacement = (PATCH_DIR / inserted).read_text() + "\n" + replacement
            text = text.replace(anchor, replacement)
    path.write_text(text)
    return sorted(PATCHES)


def llama_requirement() -> str:
    """The exact llama-cpp-python pin, read from pyproject.toml (the one place it is written)."""
    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(r'"llama-cpp-python\[server\]==([0-9][^"]*)"', text)
    if not m:
        sys.exit("build_llama_cpp: pyproject.toml must pin llama-cpp-python[server]==VERSION")
    return m.group(1)


def compiler_id() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or "cc"
    try:
        return subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        return cc


def build_key(version: str, cmake_args: str, patches: str = "") -> str:
    ident = [version, cmake_args, compiler_id(), platform.machine(), f"cp{sys.version_info[0]}{sys.version_info[1]}"]
    ident = json.dumps(ident + [patches] if patches else ident)  # unpatched: the key of earlier builds
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def pip(*args: str, env: dict | None = None) -> None:
    cmd = [sys.executable, "-m", "pip", *args]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=env)


def patched_source(version: str, where: Path) -> Path:
    """llama-cpp-python's sdist from the package index pip uses, unpacked under ``where`` with
    ``PATCHES`` applied to its vendored llama.cpp: the folder to build."""
    where.mkdir(parents=True)
    pip("download", "--no-cache-dir", "--no-deps", "--no-binary", "llama-cpp-python", "-d", str(where),
        f"llama-cpp-python=={version}")
    sdists = sorted(where.glob("llama_cpp_python-*.tar.gz")) + sorted(where.glob("llama-cpp-python-*.tar.gz"))
    if not sdists:
        sys.exit(f"build_llama_cpp: pip download gave no llama-cpp-python {version} sdist in {where}")
    with tarfile.open(sdists[0]) as tar:
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4 / 3.10.12: no links or paths out of ``where``
            tar.extractall(where, filter="data")
        else:
            tar.extractall(where)
    roots = [d for d in where.iterdir() if d.is_dir() and (d / "vendor" / "llama.cpp" / OPS).is_file()]
    if len(roots) != 1:
        sys.exit(f"build_llama_cpp: the sdist {sdists[0].name} has no vendor/llama.cpp/{OPS}")
    names = apply_patches(roots[0] / "vendor" / "llama.cpp")
    print(f"build_llama_cpp: patched {', '.join(names)} into {roots[0] / 'vendor' / 'llama.cpp' / OPS}", flush=True)
    return roots[0]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    unknown = [a for a in argv if a != "--wheel-only"]
    if unknown:
        sys.exit(f"build_llama_cpp: unknown argument(s) {unknown}; the only option is --wheel-only")
    version = llama_requirement()
    cmake_args = os.environ.get("RAGSWEEP_LLAMA_CMAKE_ARGS", "").strip() or DISPATCH_CMAKE_ARGS
    portable = cmake_args == DISPATCH_CMAKE_ARGS
    patched = patches_enabled()
    key = build_key(version, cmake_args, patch_id() if patched else "")
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ragsweep" / "wheels"
    wheel_dir = cache / f"llama-cpp-python-{version}-{key}"
    wheels = sorted(wheel_dir.glob("llama_cpp_python-*.whl")) if wheel_dir.is_dir() else []
    if wheels:
        print(f"build_llama_cpp: reusing {wheels[0]} (same version, flags, compiler: key {key})")
    else:
        print(f"build_llama_cpp: compiling llama-cpp-python {version} "
              f"({'every x86-64 CPU variant' if portable else 'custom flags'}"
              f"{', patched: ' + ', '.join(sorted(PATCHES)) if patched else ', unpatched'}): "
              f"about 13 minutes on 2 idle cores, longer beside other work\n"
              f"  CMAKE_ARGS={cmake_args}", flush=True)
        with tempfile.TemporaryDirectory(dir=cache.parent if cache.parent.exists() else None) as tmp:
            env = dict(os.environ, CMAKE_ARGS=cmake_args, FORCE_CMAKE="1")
            env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
            source = f"llama-cpp-python=={version}"
            if patched:
                source = str(patched_source(version, Path(tmp) / "src"))
            pip("wheel", "--no-cache-dir", "--no-deps", "--no-binary", "llama-cpp-python",
                "-w", tmp, source, env=env)
            built = sorted(Path(tmp).glob("llama_cpp_python-*.whl"))
            if not built:
                sys.exit("build_llama_cpp: pip wheel produced no llama_cpp_python wheel")
            wheel_dir.mkdir(parents=True, exist_ok=True)
            shutil.move(str(built[0]), wheel_dir / built[0].name)
        wheels = sorted(wheel_dir.glob("llama_cpp_python-*.whl"))
    wheel = wheels[0]
    if "--wheel-only" in argv:
        print(wheel)
        return 0
    # --force-reinstall --no-deps: replace whatever llama-cpp-python is installed (perhaps a wheel
    # from pip's cache built elsewhere); then its [server] dependencies the ordinary way.
    pip("install", "--no-cache-dir", "--force-reinstall", "--no-deps", str(wheel))
    pip("install", f"{wheel}[server]")
    record = {"version": version, "cmake_args": cmake_args, "portable": portable,
              "cpu_dispatch": "GGML_CPU_ALL_VARIANTS=ON" in cmake_args, "key": key,
              "patches": sorted(PATCHES) if patched else [],
              "wheel": str(wheel), "compiler": compiler_id()}
    out = Path(sys.prefix) / "share" / "ragsweep" / "llama_build.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"build_llama_cpp: installed {wheel.name}; build recorded in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
