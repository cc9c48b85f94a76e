"""Why vLLM did not start: the first root-cause error in its whole log, and the fix that applies.

vLLM raises its start-up errors in the EngineCore child process; the API server then prints a
traceback of its own ending in "Engine core initialization failed. See root cause above", about 40
lines that fill a log's tail. :func:`root_cause` reads the whole log for the first line that names
a known cause (the messages are vLLM 0.32's: ``vllm/v1/worker/utils.py``,
``vllm/v1/core/kv_cache_utils.py``, ``vllm/config/model.py``, ``vllm/platforms/cuda.py``,
``vllm/model_executor/model_loader/default_loader.py``; huggingface_hub's for gated and unknown
models), else for the first exception line that is not such an echo, and says what to change:
under ``config_key`` (``generator.server`` or ``evaluator.judge.server``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

#: "(EngineCore pid=4242) ERROR 11-26 12:00:01 [core.py:1100] " and the like, before the message
PREFIX = re.compile(r"^(\((?:EngineCore|APIServer|Worker|VllmWorker)[^)]*\)\s*)?"
                    r"((?:ERROR|WARNING|INFO|DEBUG|CRITICAL)\s+\S+\s+\S+\s+\[[^\]]*\]\s*)?")
EXCEPTION = re.compile(r"\b(?:[\w.]+\.)?([A-Z]\w*(?:Error|Exception)):\s")
#: lines that only point at the cause elsewhere
ECHOES = ("See root cause above", "EngineCore failed to start", "Engine core initialization failed",
          "Traceback (most recent call last)", "KeyboardInterrupt")


@dataclass(frozen=True)
class Cause:
    pattern: re.Pattern
    fix: Callable[[re.Match, str, str], str]  # (match, config key, model) -> what to do


def _free(m: re.Match, key: str, model: str) -> str:
    free, total = float(m.group(1)), float(m.group(2))
    most = max(0.0, free / total - 0.02) if total else 0.0
    return (f"the GPU has {free:g} of {total:g} GiB free, less than vLLM's share of it: free the GPU (what holds it "
            f"is listed below), or lower {key}.gpu_memory_utilization to at most {most:.2f}")


def _max_len(m: re.Match, key: str, model: str) -> str:
    fit = re.search(r"estimated maximum model length is (\d+)", m.string)
    to = f"={fit.group(1)} or lower" if fit else " (e.g. 8192)"
    return (f"the KV cache left beside the weights cannot hold one request of the model's full length ({m.group(1)} "
            f"tokens): set {key}.max_model_len{to} (ragsweep's prompts at top_k=20 need about 6,000 tokens), or raise "
            f"{key}.gpu_memory_utilization")


CAUSES: tuple[Cause, ...] = (
    Cause(re.compile(r"Free memory on device \S+ \(([\d.]+)/([\d.]+) GiB\) on startup is less than"), _free),
    Cause(re.compile(r"No available memory for the cache blocks"), lambda m, key, model: (
        f"the model's weights fill vLLM's whole share of the GPU: raise {key}.gpu_memory_utilization, serve a smaller "
        f"or quantized model ({key}.model, e.g. an AWQ one), or spread it over more GPUs ({key}.tensor_parallel_size)")),
    Cause(re.compile(r"To serve at least one request with the model's max seq len \((\d+)\)"), _max_len),
    Cause(re.compile(r"User-specified max_model_len \((\d+)\) is greater than the derived max_model_len "
                     r"\((\w+)=(\d+)"), lambda m, key, model: (
        f"the model supports {m.group(3)} tokens: set {key}.max_model_len={m.group(3)} or lower")),
    Cause(re.compile(r"CUDA out of memory|OutOfMemoryError"), lambda m, key, model: (
        f"the GPU ran out of memory: free the GPU, serve a smaller or quantized model ({key}.model), lower "
        f"{key}.max_model_len, or spread the model over more GPUs ({key}.tensor_parallel_size)")),
    Cause(re.compile(r"Bfloat16 is only supported on GPUs with compute capability of at least 8.0"),
          lambda m, key, model: f"this GPU is older than Ampere: set {key}.dtype=half"),
    Cause(re.compile(r"Total number of attention heads \((\d+)\) must be divisible by tensor parallel size"),
          lambda m, key, model: f"set {key}.tensor_parallel_size to a divisor of {m.group(1)} (the model's attention heads)"),
    Cause(re.compile(r"GatedRepoError|gated repo|Access to model \S+ is restricted"), lambda m, key, model: (
        f"{model} is a gated model: accept its licence on its Hugging Face page, then export HF_TOKEN=<a read token> "
        "in the shell that runs ragsweep (vLLM reads it from its environment)")),
    Cause(re.compile(r"RepositoryNotFoundError|Repository Not Found|is not a local folder and is not a valid model "
                     r"identifier"), lambda m, key, model: (
        f"no model {model!r} on the Hugging Face hub (or no access: HF_TOKEN): check {key}.model (an organisation/name, "
        "or a local folder)")),
    Cause(re.compile(r"Cannot find any model weights"), lambda m, key, model: (
        f"{key}.model names a folder without weights (*.safetensors or *.bin)")),
    Cause(re.compile(r"libcudart\.so\.13"), lambda m, key, model: (
        "vLLM 0.32 is built for CUDA 13, and this torch is not: pip install --force-reinstall torch==2.13.0 (PyPI's "
        "Linux wheel, the CUDA 13 build; not the cu128 one), driver 580 or newer")),
    Cause(re.compile(r"driver version is insufficient|NVIDIA driver on your system is too old"), lambda m, key, model: (
        "the NVIDIA driver is older than vLLM's CUDA: CUDA 13 (vLLM 0.32, torch 2.13.0 from PyPI) needs driver 580 or newer")),
    Cause(re.compile(r"No CUDA GPUs are available|Failed to infer device type"), lambda m, key, model: (
        "vLLM sees no GPU: check nvidia-smi, CUDA_VISIBLE_DEVICES and (in a container) the GPU's passthrough")),
)


def message(line: str) -> str:
    """The line without vLLM's process and logger prefixes."""
    return PREFIX.sub("", line.rstrip("\n"), count=1).strip()


def root_cause(log: str | Path | None, config_key: str = "generator.server", model: str = "the model"
               ) -> tuple[int, str, str | None] | None:
    """(line number, the error, its fix or None) of the first root-cause error in the log at
    ``log``; None when the log names none."""
    if log is None:
        return None
    try:
        lines = Path(log).read_text(errors="replace").splitlines()
    except OSError:
        return None
    first_exception = None
    for n, line in enumerate(lines, 1):
        for cause in CAUSES:
            m = cause.pattern.search(line)
            if m:
                return n, message(line), cause.fix(m, config_key, model)
        if first_exception is None and EXCEPTION.search(line) and not any(e in line for e in ECHOES):
            first_exception = (n, message(line), None)
    return first_exception


def explain(log: str | Path | None, config_key: str = "generator.server", model: str = "the model") -> list[str]:
    """The root cause as lines for an error message: what the log says, then the fix."""
    found = root_cause(log, config_key, model)
    if found is None:
        return []
    n, text, fix = found
    out = [f"root cause (line {n} of its log): {text[:1000]}"]
    if fix:
        out.append(f"fix: {fix}")
    return out
