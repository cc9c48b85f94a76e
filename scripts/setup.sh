#!/usr/bin/env bash
# One command sets up everything the default run and the tests need, CPU only, offline models:
#   bash scripts/setup.sh
# Into the active virtualenv (or conda env); without one, into ./.venv (created here).
# llama-cpp-python is compiled by scripts/build_llama_cpp.py with llama.cpp's CPU code once per
# x86-64 level, the best loaded at run time (never from pip's cache); RAGSWEEP_LLAMA_CMAKE_ARGS opts
# into other flags (see docs/cpu_speed.md).
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -z "${VIRTUAL_ENV:-}" && -z "${CONDA_PREFIX:-}" ]]; then
    [[ -x .venv/bin/python ]] || python3 -m venv .venv
    # shellcheck disable=SC1091
    . .venv/bin/activate
    echo "setup: using ./.venv (activate it with: . .venv/bin/activate)"
fi
start=$SECONDS
took() { echo "setup: $1 ($((SECONDS - start)) s since the start)"; }
python -m pip install --upgrade pip
# PyTorch, pinned (vLLM 0.27.1-0.32 take exactly 2.13.0). On Linux PyPI's 2.13.0 is the CUDA 13 build
# (~2.4 GiB); RAGSWEEP_TORCH_INDEX=https://download.pytorch.org/whl/cpu installs the CPU wheel instead
# (.../whl/cu128, the CUDA 12.8 build, works for dense retrieval but not with vLLM 0.32: libcudart.so.13).
# Installed while llama.cpp compiles (unpacking files beside a compiler that keeps both cores busy), its
# output in a log of its own so that the build's stays readable
torch_log="$(mktemp "${TMPDIR:-/tmp}/ragsweep-torch-install.XXXXXX")"
python -m pip install "torch==2.13.0" ${RAGSWEEP_TORCH_INDEX:+--index-url "$RAGSWEEP_TORCH_INDEX"} >"$torch_log" 2>&1 &
torch_pid=$!
trap 'kill "$torch_pid" 2>/dev/null || true' EXIT
# llama.cpp for any x86-64 CPU (AVX2, AVX-512, AMX code chosen at run time), keyed by its build
# flags, never a foreign cached wheel: compiled here (the venv untouched), installed once PyTorch is in
python scripts/build_llama_cpp.py --wheel-only
took "llama.cpp compiled"
if ! wait "$torch_pid"; then
    tail -n 30 "$torch_log" >&2
    echo "setup: error: installing PyTorch (torch==2.13.0) failed; its whole log: $torch_log" >&2
    exit 1
fi
trap - EXIT
rm -f "$torch_log"
took "PyTorch installed"
python scripts/build_llama_cpp.py
# everything else (llama-cpp-python is already satisfied, so pip does not build it again), with the
# tests' packages and the docs site's (mkdocs build --strict, as CI runs it after the tests)
python -m pip install -e '.[dev,docs]'
took "done"
echo "setup: done. Check the install with: ragsweep-doctor"
