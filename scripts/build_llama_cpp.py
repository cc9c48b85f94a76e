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
* always builds with ``--no-cache-dir`` (pip's cache never supplies the wheel);
* keeps the wheel it built under a directory named by a hash of (version, flags, compiler,
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


def build_key(version: str, cmake_args: str) -> str:
    ident = json.dumps([version, cmake_args, compiler_id(), platform.machine(),
                        f"cp{sys.version_info[0]}{sys.version_info[1]}"])
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def pip(*args: str, env: dict | None = None) -> None:
    cmd = [sys.executable, "-m", "pip", *args]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=env)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    unknown = [a for a in argv if a != "--wheel-only"]
    if unknown:
        sys.exit(f"build_llama_cpp: unknown argument(s) {unknown}; the only option is --wheel-only")
    version = llama_requirement()
    cmake_args = os.environ.get("RAGSWEEP_LLAMA_CMAKE_ARGS", "").strip() or DISPATCH_CMAKE_ARGS
    portable = cmake_args == DISPATCH_CMAKE_ARGS
    key = build_key(version, cmake_args)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ragsweep" / "wheels"
    wheel_dir = cache / f"llama-cpp-python-{version}-{key}"
    wheels = sorted(wheel_dir.glob("llama_cpp_python-*.whl")) if wheel_dir.is_dir() else []
    if wheels:
        print(f"build_llama_cpp: reusing {wheels[0]} (same version, flags, compiler: key {key})")
    else:
        print(f"build_llama_cpp: compiling llama-cpp-python {version} "
              f"({'every x86-64 CPU variant' if portable else 'custom flags'}): about 13 minutes on 2 idle cores, longer beside other work\n"
              f"  CMAKE_ARGS={cmake_args}", flush=True)
        with tempfile.TemporaryDirectory(dir=cache.parent if cache.parent.exists() else None) as tmp:
            env = dict(os.environ, CMAKE_ARGS=cmake_args, FORCE_CMAKE="1")
            env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
            pip("wheel", "--no-cache-dir", "--no-deps", "--no-binary", "llama-cpp-python",
                "-w", tmp, f"llama-cpp-python=={version}", env=env)
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
              "wheel": str(wheel), "compiler": compiler_id()}
    out = Path(sys.prefix) / "share" / "ragsweep" / "llama_build.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"build_llama_cpp: installed {wheel.name}; build recorded in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
