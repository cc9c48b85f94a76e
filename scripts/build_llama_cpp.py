"""Build and install llama-cpp-python for any x86-64 CPU with AVX2, never reusing a foreign wheel.

pip keys its wheel cache by package version only, so a wheel compiled with llama.cpp's default
``GGML_NATIVE=ON`` on one machine (AVX-512, AMX ...) is silently installed on the next machine,
where it dies with SIGILL/SIGSEGV. This script therefore:

* builds with explicit, portable CMake flags (``PORTABLE_CMAKE_ARGS``) unless the user opts into
  other flags with ``RAGSWEEP_LLAMA_CMAKE_ARGS`` (a native or CUDA/Metal build, for speed);
* always builds with ``--no-cache-dir`` (pip's cache never supplies the wheel);
* keeps the wheel it built under a directory named by a hash of (version, flags, compiler,
  platform), so a later setup reuses it only when every one of those is the same;
* records what it installed in ``<venv>/share/ragsweep/llama_build.json`` for ``ragsweep-doctor``.

Standard library only: it runs before ragsweep is installed. Usage:

    python scripts/build_llama_cpp.py            # portable (AVX2) build, the default
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
# Every flag a build machine could otherwise turn on by itself is set explicitly.
PORTABLE_CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=OFF "
    "-DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF "
    "-DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
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


def main() -> int:
    version = llama_requirement()
    cmake_args = os.environ.get("RAGSWEEP_LLAMA_CMAKE_ARGS", "").strip() or PORTABLE_CMAKE_ARGS
    portable = cmake_args == PORTABLE_CMAKE_ARGS
    key = build_key(version, cmake_args)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ragsweep" / "wheels"
    wheel_dir = cache / f"llama-cpp-python-{version}-{key}"
    wheels = sorted(wheel_dir.glob("llama_cpp_python-*.whl")) if wheel_dir.is_dir() else []
    if wheels:
        print(f"build_llama_cpp: reusing {wheels[0]} (same version, flags, compiler: key {key})")
    else:
        print(f"build_llama_cpp: compiling llama-cpp-python {version} "
              f"({'portable AVX2' if portable else 'custom flags'}): several minutes on 2 cores\n"
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
    # --force-reinstall --no-deps: replace whatever llama-cpp-python is installed (perhaps a wheel
    # from pip's cache built elsewhere); then its [server] dependencies the ordinary way.
    pip("install", "--no-cache-dir", "--force-reinstall", "--no-deps", str(wheel))
    pip("install", f"{wheel}[server]")
    record = {"version": version, "cmake_args": cmake_args, "portable": portable, "key": key,
              "wheel": str(wheel), "compiler": compiler_id()}
    out = Path(sys.prefix) / "share" / "ragsweep" / "llama_build.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"build_llama_cpp: installed {wheel.name}; build recorded in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
