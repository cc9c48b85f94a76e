"""Where ``device: auto`` puts ragsweep's own models (the dense retriever and the embedding
reranker, the NLI checker): on CUDA when torch sees a GPU, except beside a vLLM server of the run.

A vLLM server takes its share of a GPU's memory at start and refuses to start when less is free;
every other process on that GPU (this one with its CUDA context, MiniLM and faiss's temporary
memory, each joblib worker with its own) holds memory outside that share. So when the run's
generator or LLM judge is a vLLM server ragsweep starts on the GPU that ``cuda`` names,
:func:`plan` makes ``auto`` mean ``cpu`` for the run, and says so once; ``device: cuda`` still
puts a model on the GPU (then give vLLM a smaller ``gpu_memory_utilization``).
"""

from __future__ import annotations

import logging
import os
from typing import Any

log = logging.getLogger(__name__)

#: why ``auto`` means ``cpu`` in this run (None: it follows torch)
_beside: str | None = None
_said: set[str] = set()

SERVERS = (("generator", "server"), ("evaluator", "judge", "server"))


def _node(cfg: Any, path: tuple[str, ...]) -> Any:
    node = cfg
    for part in path:
        try:
            node = node.get(part) if node is not None else None
        except AttributeError:
            return None
    return node


def vllm_beside(cfg: Any, env: dict | None = None) -> str | None:
    """The config key of a vLLM server of ``cfg`` that uses the GPU ``cuda`` names, else None."""
    from ragsweep.rag.generator.servers import gpu

    env = dict(os.environ if env is None else env)
    first = (gpu.devices(env, 1) or ["0"])[0]  # cuda:0 of this process
    for path in SERVERS:
        node = _node(cfg, path)
        if not gpu._is_vllm(node):
            continue
        spec = gpu._plain(node)
        if first in gpu.devices({**env, **(spec.get("env") or {})}, spec.get("tensor_parallel_size", 1)):
            return ".".join(path)
    return None


def plan(cfg: Any) -> str | None:
    """Decide ``auto`` for a run of ``cfg`` (call before its models load); returns the reason when
    ``auto`` means ``cpu``."""
    global _beside
    key = vllm_beside(cfg)
    _beside = None if key is None else (
        f"the vLLM server of {key} shares that GPU (its memory would count against vLLM's share): set "
        "device=cuda (e.g. retriever.device=cuda) to put it there anyway, beside a lower "
        f"{key}.gpu_memory_utilization")
    return _beside


def resolve(device: str, what: str = "retriever.device") -> str:
    """``device`` as given, or for ``auto``: ``cuda`` when torch sees a GPU and no vLLM server of
    the run shares it, else ``cpu``."""
    if device != "auto":
        return device
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    if _beside is not None:
        message = f"{what}=auto runs on the CPU: {_beside}"
        if message not in _said:
            _said.add(message)
            log.warning("%s", message)
        return "cpu"
    return "cuda"
