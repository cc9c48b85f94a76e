"""Which FAISS index a dense run searches, and saying so when ``device`` asks for CUDA.

faiss-cpu and faiss-gpu-cu12 ship the same ``faiss`` package: with both installed one
overwrites the other's files (faiss issue 2892), and with faiss-cpu alone a ``device: cuda`` run
searches on the CPU. Neither is an error (the exact index gives the same results on both), but
a GPU user must see it: the index type is logged at WARNING, once per process, whenever the
device is CUDA, with the reason and the fix when it is not the GPU index.
"""

from __future__ import annotations

import logging
from importlib import metadata
from typing import Any

log = logging.getLogger("ragsweep.retriever.dense")

GPU_DIST = "faiss-gpu-cu12"
CPU_DIST = "faiss-cpu"
FIX = (f"for the GPU index: pip uninstall -y {CPU_DIST} && pip install '{GPU_DIST}>=1.14.1,<1.15' "
       "(Python <= 3.13; README, 'GPU: vLLM and faiss-gpu')")

_said: set[str] = set()


def installed(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _say_once(message: str) -> None:
    if message not in _said:
        _said.add(message)
        log.warning("%s", message)


def flat_ip(dim: int, device: str) -> tuple[Any, Any]:
    """An exact inner-product index for ``dim``-dimensional vectors: on the GPU when ``device`` is
    ``cuda[:N]`` and faiss can, else on the CPU. Returns ``(index, gpu_resources or None)``; keep
    the resources alive as long as the index."""
    import faiss

    index = faiss.IndexFlatIP(dim)
    if not device.startswith("cuda"):
        return index, None
    gpu_version, cpu_version = installed(GPU_DIST), installed(CPU_DIST)
    both = (f"; {CPU_DIST} {cpu_version} and {GPU_DIST} {gpu_version} are both installed and share the "
            f"faiss/ package, so which one answers depends on the install order" if gpu_version and cpu_version else "")
    if not hasattr(faiss, "StandardGpuResources"):
        _say_once(f"retriever.device={device}: the dense index is IndexFlatIP on the CPU (exact: same results, "
                  f"slower search), because this faiss ({faiss.__version__}) has no GPU support{both}; {FIX}")
        return index, None
    gpu = int(device.split(":")[1]) if ":" in device else 0
    try:
        n = faiss.get_num_gpus()
        if gpu >= n:
            raise RuntimeError(f"faiss sees {n} GPU(s)")
        res = faiss.StandardGpuResources()
        index = faiss.index_cpu_to_gpu(res, gpu, index)
    except Exception as exc:  # noqa: BLE001 - fall back to the exact CPU index, and say so
        _say_once(f"retriever.device={device}: the dense index is IndexFlatIP on the CPU (exact: same results, "
                  f"slower search), because the GPU index failed: {exc}{both}")
        return faiss.IndexFlatIP(dim), None
    _say_once(f"retriever.device={device}: the dense index is {type(index).__name__} on GPU {gpu} "
              f"(faiss {faiss.__version__}){both}")
    return index, res
