"""How this environment's llama.cpp was built, and what to say when it crashes for that reason:
the build record ``scripts/build_llama_cpp.py`` writes, the command that rebuilds it portably,
and the hint for a crash in llama.cpp's CPU code. Used by the llama.cpp server, the weight-format
conversion (:mod:`ragsweep.rag.generator.servers.gguf_format`) and ``ragsweep-doctor``."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

# signals of a crash in llama.cpp's CPU code: an instruction this CPU does not run (SIGILL), and
# what the same foreign build can also end in (SIGSEGV, SIGBUS)
CPU_CRASH_SIGNALS = (signal.SIGILL, signal.SIGSEGV, signal.SIGBUS)
BUILD_SCRIPT = "scripts/build_llama_cpp.py"


def rebuild_command() -> str:
    """The command that rebuilds llama-cpp-python for this CPU, into this environment."""
    root = Path(__file__).resolve().parents[5]  # src/ragsweep/rag/generator/servers/ -> the checkout
    if (root / BUILD_SCRIPT).is_file():
        return f"cd {root} && {sys.executable} {BUILD_SCRIPT}"
    return f"python {BUILD_SCRIPT} (in a ragsweep checkout, with this environment's {sys.executable})"


def build_record_path() -> Path:
    """Where ``scripts/build_llama_cpp.py`` records the llama-cpp-python build it installed."""
    return Path(sys.prefix) / "share" / "ragsweep" / "llama_build.json"


def build_record() -> dict:
    """The build record's fields; empty when there is none or it is unreadable (callers that must
    tell those apart read :func:`build_record_path` themselves)."""
    try:
        info = json.loads(build_record_path().read_text())
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def build_record_note() -> str:
    """What ``scripts/build_llama_cpp.py`` recorded about the installed llama-cpp-python."""
    record = build_record_path()
    try:
        info = json.loads(record.read_text())
    except FileNotFoundError:
        return (f"This environment's llama-cpp-python was not installed by {BUILD_SCRIPT} "
                f"(no {record}), so it may well be such a wheel")
    except (OSError, ValueError):
        return f"The build record {record} is unreadable"
    if info.get("cpu_dispatch"):
        return (f"This environment's llama-cpp-python {info.get('version', '?')} was built by {BUILD_SCRIPT} "
                f"with one CPU backend per x86-64 level, the one loaded chosen for this CPU (or forced by "
                f"RAGSWEEP_LLAMA_CPU_VARIANT: unset it to rule that out); look for the cause in the log below")
    if info.get("portable"):
        return (f"This environment's llama-cpp-python {info.get('version', '?')} was built portably "
                f"(AVX2, no AVX-512/AMX) by {BUILD_SCRIPT}: unless this CPU lacks AVX2 (grep avx2 "
                f"/proc/cpuinfo), look for the cause in the log below")
    return (f"This environment's llama-cpp-python {info.get('version', '?')} was built with custom "
            f"flags ({info.get('cmake_args', '?')}), perhaps for another CPU")


def cpu_crash_hint() -> str:
    return (
        "likely cause: llama.cpp compiled for another CPU: it runs instructions (AVX-512, AMX, ...) "
        "that this CPU, or the hypervisor it runs under, does not execute; typically a "
        "llama-cpp-python wheel from pip's cache, built on another machine with GGML_NATIVE=ON. "
        f"{build_record_note()}.\n"
        f"fix: rebuild it for this machine, portably: {rebuild_command()}\n"
        "check: ragsweep-doctor"
    )
