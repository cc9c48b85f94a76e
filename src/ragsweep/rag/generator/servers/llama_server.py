"""llama.cpp's own ``llama-server``: one process, several slots, continuous batching.

``scripts/build_llama_cpp.py`` builds it from the same llama.cpp source as llama-cpp-python, into
the same folder (``llama_cpp/lib``), where it also finds the per-CPU backends and loads the best
(its log says which). Where llama-cpp-python's server answers one request at a time, so ragsweep
runs one process per core, ``llama-server -np N`` keeps N requests in flight and decodes them in
one batch per step: the weights are read once for N tokens. ``generator.server.engine`` picks it
(``llama-server``) or llama-cpp-python's (``llama-cpp-python``); ``generator.server.parallel``
is N (``auto``: ``SLOTS``, 1) for each of the ``replicas`` one-thread processes: two OpenMP threads
sharing one small decoding graph wait at barriers (beside a busy process they collapse), so the
cores stay one process each and the batching happens inside each. Measured in
experiments/benchmarks/bench_batching.py.

One slot is the default because batched decoding does not repeat its greedy answers: a sequence's
logits depend on which other sequences (decoding, or reading their prompts) share its batch, and
that changes with timing. Two cold runs of the same 20 questions differed on 14 of 20 answers with
4 slots, on none with 1 (experiments/results/bench_generation.md). ``parallel`` > 1 is the opt-in.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

ENGINES = ("auto", "llama-cpp-python", "llama-server")
FIELD = "generator.server.engine"
SLOTS = 1  # batched slots (> 1) are faster but their greedy answers change from run to run
EXECUTABLE = "llama-server"


def executable(run: bool = False) -> Path | None:
    """``llama_cpp/lib/llama-server`` of the installed llama-cpp-python, if it was built; ``run``:
    the copy to start, beside the CPU variant this process would load (``cpu_backend.binary_dir``)."""
    from ragsweep.rag.generator.servers import cpu_backend

    lib = cpu_backend.lib_dir()
    path = lib / EXECUTABLE if lib is not None else None
    if path is None or not os.access(path, os.X_OK):
        return None
    return cpu_backend.binary_dir() / EXECUTABLE if run else path


def check_engine(value: Any) -> str:
    name = str(value if value is not None else "auto").strip().lower().replace("_", "-")
    if name not in ENGINES:
        from ragsweep.errors import ConfigError

        raise ConfigError(f"{FIELD}={value!r} is not an engine; use one of {', '.join(ENGINES)}")
    return name


def resolve_engine(value: Any) -> str:
    """``auto``: llama-server where it was built (scripts/build_llama_cpp.py), else llama-cpp-python."""
    name = check_engine(value)
    if name == "auto":
        return "llama-server" if executable() is not None else "llama-cpp-python"
    return name


def check_parallel(value: Any) -> int:
    """``parallel`` (slots of each llama-server process): ``auto``/None -> ``SLOTS``, else an
    integer >= 1; anything else a ConfigError naming the field."""
    if value is None or value == "auto":
        return SLOTS
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        from ragsweep.errors import ConfigError

        raise ConfigError(f"generator.server.parallel must be 'auto' or an integer >= 1, got {value!r}")
    return value


def check_flash_attn(value: Any) -> str:
    """``flash_attn``: on, off or auto (llama.cpp decides: on where the backend supports it).
    YAML reads a bare on/off as a boolean, so True/False are on/off."""
    if isinstance(value, bool) or value is None:
        name = {True: "on", False: "off", None: "auto"}[value]
    else:
        name = str(value).strip().lower()
    if name not in ("on", "off", "auto"):
        from ragsweep.errors import ConfigError

        raise ConfigError(f"generator.server.flash_attn={value!r}: use on, off or auto")
    return name


def command(server: Any, port: int) -> list[str]:
    """The argv of ``llama-server`` for a ``LlamaCppServer`` with ``engine == "llama-server"``:
    ``parallel`` slots of ``n_ctx`` tokens each, its threads, no web UI."""
    exe = executable(run=True)
    if exe is None:
        from ragsweep.rag.generator.servers.errors import ExecutableNotFoundError

        raise ExecutableNotFoundError(
            f"{FIELD}=llama-server, but this llama-cpp-python has no llama-server beside it; rebuild it with "
            f"python scripts/build_llama_cpp.py (the default flags build it), or set {FIELD}=llama-cpp-python")
    argv = [
        str(exe),
        "--model", str(server.served_model()),
        "--host", server.host,
        "--port", str(port),
        "--alias", server.model_alias,
        "--parallel", str(server.parallel),
        "--ctx-size", str(server.n_ctx * server.parallel),  # split evenly: n_ctx per slot
        "--threads", str(server.n_threads),
        "--threads-batch", str(server.n_threads_batch),
        "--flash-attn", server.flash_attn,
        "--no-webui",
    ]
    return argv + list(server.extra_args)
